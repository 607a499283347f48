import type { Metadata } from "next";
import { RunsTable } from "@/components/runs-table";
import { Card, PageHeader } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Runs" };

const STATUSES = ["queued", "running", "paused", "completed", "failed", "cancelled"] as const;
type Status = (typeof STATUSES)[number];

export default async function RunsPage({ searchParams }: { searchParams: Promise<{ q?: string; status?: string }> }) {
  const { q, status } = await searchParams;
  const statuses = (status ?? "").split(",").filter((s): s is Status => (STATUSES as readonly string[]).includes(s));
  const caller = await serverCaller();
  const runs = await caller.runs.list({ search: q || undefined, status: statuses.length ? statuses : undefined, limit: 100 });
  return (
    <>
      <PageHeader title="Runs" />
      <search className="mb-4 block">
        <form className="flex flex-wrap items-center gap-2">
          <input
            type="search"
            name="q"
            aria-label="Search runs"
            defaultValue={q}
            placeholder="Search by run, experiment or id"
            className="w-72 rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
          />
          <select
            name="status"
            defaultValue={statuses[0] ?? ""}
            className="rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm"
            aria-label="Status"
          >
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
          <button type="submit" className="rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm font-medium hover:bg-slate-50">
            Filter
          </button>
        </form>
      </search>
      <Card>
        {runs.items.length > 0 ? (
          <RunsTable runs={runs.items} />
        ) : (
          <EmptyState title={q || statuses.length ? "No runs match" : "No runs yet"}>
            {q || statuses.length ? "Try another search or status." : "Runs appear here once you launch one from an experiment."}
          </EmptyState>
        )}
      </Card>
    </>
  );
}
