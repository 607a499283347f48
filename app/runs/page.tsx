import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import { RunsTableView } from "@/components/runs/runs-table-view";
import { parseTableState, type SearchParams, tableInput } from "@/components/runs/table-state";
import { Card, PageHeader } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Runs" };

/** The runs table of one project; its whole state (columns, sort, filters, group, page) is in the URL. */
export default async function RunsPage({ searchParams }: { searchParams: Promise<SearchParams> }) {
  const { state, problems } = parseTableState(await searchParams);
  const caller = await serverCaller();
  const projects = await caller.projects.list();
  const project = projects.find((p) => p.id === state.project) ?? projects[0];
  if (!project) {
    return (
      <>
        <PageHeader title="Runs" />
        <Card>
          <EmptyState title="No runs yet">You are a member of no project yet: make one on the Projects page, or ask an owner to add you.</EmptyState>
        </Card>
      </>
    );
  }
  let result = null;
  let error: string | null = null;
  try {
    result = await caller.runs.table(tableInput(state, project.id));
  } catch (cause) {
    // A URL the table cannot show (a condition its column cannot answer): say why, keep the controls to change it.
    if (!(cause instanceof TRPCError) || cause.code !== "BAD_REQUEST") throw cause;
    error = cause.message;
  }
  return (
    <>
      <PageHeader title="Runs" />
      <RunsTableView
        state={{ ...state, project: state.project && project.id === state.project ? state.project : null }}
        project={{ id: project.id, role: project.role }}
        projects={projects.map((p) => ({ id: p.id, name: p.name }))}
        result={result}
        problems={error ? [...problems, error] : problems}
      />
    </>
  );
}
