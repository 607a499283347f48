import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { LaunchButton } from "@/components/launch-button";
import { RunsTable } from "@/components/runs-table";
import { ButtonLink } from "@/components/ui/button";
import { Card, PageHeader } from "@/components/ui/card";
import { RelativeTime } from "@/components/ui/time";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ id: string }> };

async function load(id: string) {
  const caller = await serverCaller();
  try {
    return await Promise.all([caller.experiments.byId({ id }), caller.runs.list({ experimentId: id, limit: 50 })]);
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    throw error;
  }
}

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  const [experiment] = await load((await params).id);
  return { title: experiment.name };
}

export default async function ExperimentPage({ params }: Props) {
  const [experiment, runs] = await load((await params).id);
  const files = Object.entries(experiment.latest?.files ?? {});
  return (
    <>
      <PageHeader
        title={experiment.name}
        subtitle={
          <>
            {experiment.description || "No description"} · version {experiment.latestVersion} · created <RelativeTime date={experiment.createdAt} />
          </>
        }
        actions={
          experiment.role === "viewer" ? (
            <>
              <span className="text-sm text-slate-500">You view this project: editors and owners edit and launch.</span>
              <ButtonLink variant="secondary" href={`/experiments/${experiment.id}/edit`}>
                Read source
              </ButtonLink>
            </>
          ) : (
            <>
              <ButtonLink variant="secondary" href={`/experiments/${experiment.id}/edit`}>
                Edit
              </ButtonLink>
              <LaunchButton experimentId={experiment.id} />
            </>
          )
        }
      />
      <div className="grid gap-6 lg:grid-cols-3">
        <Card title="Runs" className="lg:col-span-2">
          {runs.items.length > 0 ? <RunsTable runs={runs.items} /> : <p className="px-4 py-6 text-sm text-slate-500">No runs of this experiment yet.</p>}
        </Card>
        <Card title={`Config (v${experiment.latestVersion})`}>
          <pre className="overflow-auto px-4 py-3 font-mono text-xs text-slate-700">{JSON.stringify(experiment.latest?.config ?? {}, null, 2)}</pre>
        </Card>
        <Card title="Source" className="lg:col-span-3">
          {files.length === 0 ? (
            <p className="px-4 py-6 text-sm text-slate-500">No source files in this version.</p>
          ) : (
            files.map(([path, content]) => (
              <details key={path} className="border-b border-slate-100 last:border-0" open={files.length === 1}>
                <summary className="cursor-pointer px-4 py-2 font-mono text-sm text-slate-800">{path}</summary>
                <pre className="overflow-auto bg-slate-50 px-4 py-3 font-mono text-xs text-slate-700">{content}</pre>
              </details>
            ))
          )}
        </Card>
      </div>
    </>
  );
}
