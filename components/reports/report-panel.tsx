"use client";

import { keepPreviousData, useQueries, useQuery } from "@tanstack/react-query";
import { useCallback, useMemo, useState } from "react";
import { ComparePanel, xAxisName } from "@/components/compare/compare-panel";
import { PALETTE } from "@/components/compare/compare-view";
import { type Grouping, panelLines, type RunData, runDataOf } from "@/components/compare/panel-data";
import { useTRPC } from "@/components/trpc/provider";
import type { PanelBlock } from "@/lib/reports/blocks";

/** Points per series a panel asks for: the chart draws no more than this across its width. */
const MAX_POINTS = 1000;
const ACTIVE = new Set(["queued", "placing", "running"]);
/** How often a panel with a run still training reads its series again. */
const LIVE_REFETCH_MS = 5000;

/**
 * One panel of a report: the compare view's chart of one metric over the panel's runs, read again every few seconds
 * while any of them trains, so the report stays live (also through a share link, whose token reads these runs).
 */
export function ReportPanel({ block }: { block: PanelBlock }) {
  const trpc = useTRPC();
  // A training run's status is read again too, so the panel stops refetching once every run has finished.
  const runQueries = useQueries({
    queries: block.runIds.map((id) => ({
      ...trpc.runs.byId.queryOptions({ id }),
      retry: false,
      refetchInterval: (query: { state: { data?: { status: string } } }) => (ACTIVE.has(query.state.data?.status ?? "") ? LIVE_REFETCH_MS : false),
    })),
  });
  const active = runQueries.some((q) => ACTIVE.has(q.data?.status ?? ""));
  const xMetric = block.x.startsWith("metric:") ? [block.x.slice("metric:".length)] : [];
  const series = useQuery({
    ...trpc.compare.series.queryOptions({
      runIds: block.runIds,
      metrics: [...new Set([block.metric, ...xMetric])],
      time: block.x === "time",
      tokens: block.x === "tokens",
      maxPoints: MAX_POINTS,
    }),
    placeholderData: keepPreviousData,
    retry: false,
    refetchInterval: active ? LIVE_REFETCH_MS : false,
  });
  const runsKey = runQueries.map((q) => q.dataUpdatedAt).join(",");
  // biome-ignore lint/correctness/useExhaustiveDependencies: the run queries' results are new objects only when runsKey changes
  const runData = useMemo(
    (): RunData[] =>
      runDataOf(
        block.runIds,
        runQueries.map((q) => q.data),
        series.data,
        PALETTE,
      ),
    [block.runIds, series.data, runsKey],
  );
  const grouping: Grouping | null = useMemo(() => (block.group ? { path: block.group, band: "minmax", colors: PALETTE } : null), [block.group]);
  const lines = useMemo(() => panelLines(block, runData, grouping), [block, runData, grouping]);
  const [hoveredStep, setHoveredStep] = useState<number | null>(null);
  const onHover = useCallback((step: number | null) => setHoveredStep(step), []);
  const failed = series.error ?? runQueries.find((q) => q.error)?.error;
  return (
    <section aria-label={`panel ${block.metric}`} className="rounded-lg border border-slate-200 bg-white p-3">
      <header className="mb-2 flex flex-wrap items-baseline gap-x-3 gap-y-1">
        <h3 className="font-mono text-sm font-semibold text-slate-800">{block.metric}</h3>
        <span className="text-xs text-slate-500">
          against {xAxisName(block.x)}
          {block.smoothing > 0 && ` · smoothing ${block.smoothing}`}
          {block.group && ` · grouped by ${block.group}`}
          {active && <span className="ml-2 text-emerald-700">● live</span>}
        </span>
      </header>
      {failed ? (
        <p className="text-sm text-red-600">{failed.message}</p>
      ) : series.isLoading ? (
        <p className="h-72 text-sm text-slate-500">Loading…</p>
      ) : lines.length === 0 ? (
        <p className="text-sm text-slate-500">No points of {block.metric} yet in these runs.</p>
      ) : (
        <ComparePanel metric={block.metric} x={block.x} lines={lines} hoveredStep={hoveredStep} onHover={onHover} />
      )}
      <ul aria-label="Runs of this panel" className="mt-1 flex flex-wrap gap-x-4 gap-y-1 text-xs text-slate-600">
        {runData.map((run) => (
          <li key={run.id} className="inline-flex items-center gap-1.5">
            <span className="size-2.5 rounded-full" style={{ backgroundColor: run.color }} aria-hidden />
            {run.name}
          </li>
        ))}
      </ul>
    </section>
  );
}
