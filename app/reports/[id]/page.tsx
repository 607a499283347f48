import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { ReportView } from "@/components/reports/report-view";
import { PageHeader } from "@/components/ui/card";
import { RelativeTime } from "@/components/ui/time";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ id: string }> };

async function load(id: string) {
  try {
    return await (await serverCaller()).reports.byId({ id });
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    throw error;
  }
}

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: (await load((await params).id)).title };
}

export default async function ReportPage({ params }: Props) {
  const report = await load((await params).id);
  return (
    <>
      <PageHeader
        title={report.title}
        subtitle={
          <>
            <Link className="text-brand-700 hover:underline" href="/reports">
              Reports
            </Link>{" "}
            · by {report.createdBy} · edited <RelativeTime date={report.updatedAt} />
          </>
        }
      />
      <ReportView key={report.updatedAt.toISOString()} report={report} />
    </>
  );
}
