import type { Metadata } from "next";
import { notFound, redirect } from "next/navigation";
import { SharedView } from "@/components/share/shared-view";
import { openShareLink } from "@/server/auth";
import { getDatabase } from "@/server/db";
import { reportOfShareLink } from "@/server/reports";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ token: string }>; searchParams: Promise<Record<string, string | string[] | undefined>> };

async function load(token: string) {
  const link = await openShareLink((await getDatabase()).db, token);
  // Unknown, revoked and expired links alike: the same not-found page, which says nothing of whether it existed.
  if (!link) notFound();
  return link;
}

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: (await load((await params).token)).title, robots: { index: false } };
}

/**
 * A share link (`/s/<token>`): the run, comparison, trajectory or report it names, view-only, for anyone holding it.
 * It opens with the view it was made with (its parameters join the URL, where the page keeps its view from then on);
 * a report is read as it is saved now.
 */
export default async function SharedPage({ params, searchParams }: Props) {
  const { token } = await params;
  const link = await load(token);
  if (link.kind === "report") {
    const report = await reportOfShareLink((await getDatabase()).db, link);
    if (!report) notFound();
    return <SharedView kind="report" runIds={link.runIds} title={report.title} expiresAt={link.expiresAt} report={report} />;
  }
  const query = await searchParams;
  // A comparison shows exactly its runs, whatever view it was made with.
  const view = link.kind === "compare" ? { ...link.view, runs: link.runIds.join(",") } : link.view;
  if (Object.keys(query).length === 0 && Object.keys(view).length > 0) redirect(`/s/${token}?${new URLSearchParams(view).toString()}`);
  return <SharedView kind={link.kind} runIds={link.runIds} title={link.title} expiresAt={link.expiresAt} />;
}
