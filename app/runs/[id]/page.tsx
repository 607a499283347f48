import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { RunView } from "@/components/run/run-view";
import { PageHeader } from "@/components/ui/card";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ id: string }> };

async function load(id: string) {
  try {
    return await (await serverCaller()).runs.byId({ id });
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    throw error;
  }
}

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: (await load((await params).id)).name };
}

export default async function RunPage({ params }: Props) {
  const id = (await params).id;
  // The metrics so far come with the HTML (a summary from the run's feed, in memory while it reports); the page
  // then streams what comes after.
  const [run, initialMetrics] = await Promise.all([load(id), (await serverCaller()).runs.metricSummary({ runId: id }).catch(() => null)]);
  return (
    <>
      <PageHeader
        title={run.name}
        subtitle={
          <>
            <Link className="text-brand-700 hover:underline" href={`/experiments/${run.experimentId}`}>
              {run.experimentName}
            </Link>{" "}
            · {run.id}
          </>
        }
      />
      <RunView runId={run.id} initialMetrics={initialMetrics} />
    </>
  );
}
