"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter, useSearchParams } from "next/navigation";
import { useState } from "react";
import { compareQuery, type CompareState, parseCompareState } from "@/components/compare/compare-state";
import { useTRPC } from "@/components/trpc/provider";
import { Button, ButtonLink } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { ProjectSelect } from "@/components/ui/project-select";
import { RelativeTime } from "@/components/ui/time";
import { MAX_PANEL_RUNS, type ReportBlock } from "@/lib/reports/blocks";

/** The blocks a new report starts with: one panel per chosen metric over the chosen runs, then a note to write. */
function startingBlocks(runIds: string[], panels: CompareState["panels"]): ReportBlock[] {
  const blocks: ReportBlock[] = panels.map((panel, i) => ({ kind: "panel", id: `p${i + 1}`, ...panel, runIds, group: null }));
  return [...blocks, { kind: "note", id: "n1", markdown: "" }];
}

/** `/reports?new=1&runs=a,b&panels=…` (the compare view's parameters): what "Save as report" opens. */
export function newReportHref(state: CompareState): string {
  return `/reports?new=1&${compareQuery({ ...state, group: null, baseline: null, differencesOnly: false })}`;
}

/** The reports of the caller's projects, and "New report" from chosen runs (pre-filled from a comparison's URL). */
export function ReportsList() {
  const trpc = useTRPC();
  const params = useSearchParams();
  const reports = useQuery(trpc.reports.list.queryOptions({}));
  const [creating, setCreating] = useState(params.get("new") === "1");
  return (
    <div className="space-y-6">
      {creating ? (
        <NewReport initial={parseCompareState(new URLSearchParams(params.toString()))} onCancel={() => setCreating(false)} />
      ) : (
        <div className="flex justify-end">
          <Button onClick={() => setCreating(true)}>New report</Button>
        </div>
      )}
      <Card title="Reports">
        {reports.error ? (
          <p className="px-4 py-3 text-sm text-red-600">{reports.error.message}</p>
        ) : reports.data?.length === 0 ? (
          <EmptyState title="No reports yet">A report saves chosen runs' charts and your notes as one page, live, and shareable by link.</EmptyState>
        ) : (
          <ul aria-label="Reports" className="divide-y divide-slate-100">
            {(reports.data ?? []).map((report) => (
              <li key={report.id} className="flex items-center gap-3 px-4 py-2.5 text-sm">
                <Link href={`/reports/${report.id}`} className="min-w-0 flex-1 truncate font-medium text-slate-800 hover:text-brand-700 hover:underline">
                  {report.title}
                </Link>
                <span className="text-xs text-slate-500">
                  {report.panels} panel{report.panels === 1 ? "" : "s"} · {report.notes} note{report.notes === 1 ? "" : "s"} · {report.runs} run
                  {report.runs === 1 ? "" : "s"}
                </span>
                <span className="w-48 text-right text-xs text-slate-500">
                  {report.createdBy} · edited <RelativeTime date={report.updatedAt} />
                </span>
              </li>
            ))}
          </ul>
        )}
      </Card>
    </div>
  );
}

function NewReport({ initial, onCancel }: { initial: CompareState; onCancel(): void }) {
  const trpc = useTRPC();
  const router = useRouter();
  const recent = useQuery(trpc.runs.list.queryOptions({ limit: 100 }));
  const [title, setTitle] = useState("");
  const [projectId, setProjectId] = useState("");
  const [runIds, setRunIds] = useState(initial.runs);
  const [metrics, setMetrics] = useState(initial.panels.map((p) => p.metric).join(", "));
  const create = useMutation(trpc.reports.create.mutationOptions({ onSuccess: ({ id }) => router.push(`/reports/${id}`) }));
  const runs = recent.data?.items ?? [];
  const submit = () => {
    const names = [...new Set(metrics.split(",").map((m) => m.trim()))].filter(Boolean);
    // Panels from a comparison keep their x-axis and smoothing; a metric typed here gets the step and no smoothing.
    const panels = names.map((metric) => initial.panels.find((p) => p.metric === metric) ?? { metric, x: "step" as const, smoothing: 0 });
    // A report of runs goes to their project; one without runs yet to the project chosen.
    create.mutate({ title, projectId: runIds.length ? undefined : projectId || undefined, blocks: runIds.length ? startingBlocks(runIds, panels) : [] });
  };
  return (
    <Card title="New report">
      <form
        className="space-y-3 px-4 py-3"
        onSubmit={(event) => {
          event.preventDefault();
          submit();
        }}
      >
        <label className="block text-sm">
          <span className="font-medium text-slate-700">Title</span>
          <input
            aria-label="Title"
            required
            value={title}
            onChange={(event) => setTitle(event.target.value)}
            className="mt-1 block w-full rounded-md border border-slate-300 px-2 py-1.5"
          />
        </label>
        {runIds.length === 0 && <ProjectSelect value={projectId} onChange={setProjectId} />}
        <label className="block text-sm">
          <span className="font-medium text-slate-700">Panels: metrics, comma-separated (one panel each)</span>
          <input
            aria-label="Metrics"
            value={metrics}
            onChange={(event) => setMetrics(event.target.value)}
            className="mt-1 block w-full rounded-md border border-slate-300 px-2 py-1.5 font-mono"
          />
        </label>
        <fieldset className="text-sm">
          <legend className="font-medium text-slate-700">
            Runs ({runIds.length} of at most {MAX_PANEL_RUNS})
          </legend>
          <div className="mt-1 flex max-h-48 flex-wrap gap-x-4 gap-y-1 overflow-auto">
            {runs.map((run) => (
              <label key={run.id} className="inline-flex items-center gap-1.5">
                <input
                  type="checkbox"
                  checked={runIds.includes(run.id)}
                  onChange={() => setRunIds(runIds.includes(run.id) ? runIds.filter((id) => id !== run.id) : [...runIds, run.id].slice(0, MAX_PANEL_RUNS))}
                />
                {run.name}
                <span className="text-xs text-slate-400">{run.status}</span>
              </label>
            ))}
            {recent.isSuccess && runs.length === 0 && <span className="text-slate-500">No runs yet: a report can start with notes only.</span>}
          </div>
        </fieldset>
        {create.error && (
          <p role="alert" className="whitespace-pre-line text-sm text-red-600">
            {create.error.message}
          </p>
        )}
        <div className="flex gap-2">
          <Button type="submit" disabled={create.isPending || !title.trim()}>
            {create.isPending ? "Creating…" : "Create report"}
          </Button>
          <Button variant="ghost" onClick={onCancel}>
            Cancel
          </Button>
        </div>
      </form>
    </Card>
  );
}

/** "Save as report": a new report from the comparison as the URL holds it now (its runs and panels). */
export function SaveAsReportLink() {
  const params = useSearchParams();
  const state = parseCompareState(new URLSearchParams(params.toString()));
  if (state.runs.length === 0) return null;
  return (
    <ButtonLink variant="secondary" href={newReportHref(state)}>
      Save as report
    </ButtonLink>
  );
}
