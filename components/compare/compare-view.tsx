"use client";

import { useQueries, useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { usePathname, useSearchParams } from "next/navigation";
import { useEffect, useMemo, useState } from "react";
import type { SeriesPoint } from "@/lib/series";
import { formatValue } from "@/components/charts";
import { useTRPC } from "@/components/trpc/provider";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { RadioGroup } from "@/components/ui/radio-group";
import { StatusBadge } from "@/components/ui/status-badge";
import { CompareChart } from "./compare-chart";
import { type CompareState, compareQuery, DEFAULT_METRIC, MAX_COMPARED, parseCompareState } from "./compare-state";
import { ConfigDiff } from "./config-diff";
import { ShareButton } from "@/components/share/share-button";

/** One colour per compared run (MAX_COMPARED of them). */
const PALETTE = ["#3b57e0", "#e8590c", "#0ca678", "#d6336c", "#7048e8", "#1098ad", "#f59f00", "#495057"];

const X_AXES = [
  ["step", "Step"],
  ["time", "Wall time"],
] as const;

type RunSeries = Map<string, { step: number; time: number; value: number }[]>;

/** `shared`: seen through a share link, the runs are fixed and nothing links into the workbench. */
export function CompareView({ shared = false }: { shared?: boolean }) {
  const trpc = useTRPC();
  const pathname = usePathname();
  const params = useSearchParams();
  // The view answers a click at once from its own state; the URL follows, and a URL change (back, a link) wins.
  const urlKey = params.toString();
  const [state, setState] = useState(() => parseCompareState(new URLSearchParams(urlKey)));
  useEffect(() => setState(parseCompareState(new URLSearchParams(urlKey))), [urlKey]);
  const update = (patch: Partial<CompareState>) => {
    const next = { ...state, ...patch };
    setState(next);
    const query = compareQuery(next);
    // The History API (which Next.js syncs into useSearchParams) changes the URL without a server round trip.
    window.history.replaceState(null, "", query ? `${pathname}?${query}` : pathname);
  };

  const runQueries = useQueries({ queries: state.runs.map((id) => ({ ...trpc.runs.byId.queryOptions({ id }), retry: false })) });
  const metricQueries = useQueries({
    queries: state.runs.map((runId) => ({
      ...trpc.runs.metrics.queryOptions({ runId, afterSeq: 0 }),
      // A run still training keeps drawing; a finished one is fetched once.
      refetchInterval: (["queued", "running", "placing"] as string[]).includes(runQueries[state.runs.indexOf(runId)]?.data?.status ?? "") ? 5000 : false,
    })),
  });
  const recent = useQuery({ ...trpc.runs.list.queryOptions({ limit: 50 }), enabled: !shared });

  // biome-ignore lint/correctness/useExhaustiveDependencies: the query results are new objects only when their data changes
  const series = useMemo(
    () =>
      metricQueries.map((query) => {
        const bySeries: RunSeries = new Map();
        const points = query.data?.points ?? [];
        const start = points.length ? Math.min(...points.map((p) => new Date(p.wallTime).getTime())) : 0;
        for (const p of points) {
          const list = bySeries.get(p.name) ?? [];
          list.push({ step: p.step, time: (new Date(p.wallTime).getTime() - start) / 1000, value: p.value });
          bySeries.set(p.name, list);
        }
        for (const list of bySeries.values()) list.sort((a, b) => a.step - b.step);
        return bySeries;
      }),
    [metricQueries.map((q) => q.dataUpdatedAt).join(",")],
  );
  const metricNames = [...new Set(series.flatMap((s) => [...s.keys()]))].sort();
  const metric = state.metric ?? (metricNames.includes(DEFAULT_METRIC) ? DEFAULT_METRIC : (metricNames[0] ?? DEFAULT_METRIC));

  const runs = state.runs.map((id, i) => ({ id, color: PALETTE[i]!, query: runQueries[i]!, series: series[i] ?? new Map() }));
  const chartSeries = runs.map((run) => ({
    id: run.id,
    name: run.query.data?.name ?? run.id,
    color: run.color,
    points: (run.series.get(metric) ?? []).map((p): SeriesPoint => ({ step: state.x === "time" ? p.time : p.step, value: p.value })),
  }));
  const addable = (recent.data?.items ?? []).filter((r) => !state.runs.includes(r.id));
  const loadingMetrics = metricQueries.some((q) => q.isLoading);

  return (
    <div className="space-y-6">
      <Card
        title="Runs"
        actions={
          !shared &&
          state.runs.length > 0 &&
          runQueries.every((q) => q.data && q.data.role !== null) && (
            <ShareButton kind="compare" runIds={state.runs} canCreate={runQueries.every((q) => q.data?.role === "editor" || q.data?.role === "owner")} />
          )
        }
      >
        <ul className="divide-y divide-slate-100" aria-label="Compared runs">
          {runs.map((run) => {
            const last = run.series.get(metric)?.at(-1);
            return (
              <li key={run.id} className="flex items-center gap-3 px-4 py-2 text-sm">
                <span className="size-3 shrink-0 rounded-full" style={{ backgroundColor: run.color }} aria-hidden />
                {run.query.error ? (
                  <span className="flex-1 text-red-600">{run.query.error.message}</span>
                ) : (
                  <>
                    {shared ? (
                      <span className="min-w-0 flex-1 truncate font-medium text-slate-800">{run.query.data?.name ?? run.id}</span>
                    ) : (
                      <Link href={`/runs/${run.id}`} className="min-w-0 flex-1 truncate font-medium text-slate-800 hover:text-brand-700 hover:underline">
                        {run.query.data?.name ?? run.id}
                      </Link>
                    )}
                    {run.query.data && <StatusBadge status={run.query.data.status} />}
                    <span className="w-24 text-right tabular-nums text-slate-500">
                      {run.query.data ? `${run.query.data.step} / ${run.query.data.totalSteps}` : ""}
                    </span>
                    <span className="w-28 text-right font-mono text-xs tabular-nums text-slate-700" title={`last ${metric}`}>
                      {last ? formatValue(last.value) : "—"}
                    </span>
                  </>
                )}
                {!shared && (
                  <button
                    type="button"
                    className="rounded px-1.5 text-slate-400 hover:bg-slate-100 hover:text-red-600"
                    aria-label={`Remove ${run.query.data?.name ?? run.id}`}
                    onClick={() => update({ runs: state.runs.filter((id) => id !== run.id) })}
                  >
                    ×
                  </button>
                )}
              </li>
            );
          })}
        </ul>
        {!shared && (
          <div className="flex items-center gap-2 border-t border-slate-100 px-4 py-2.5">
            <select
              aria-label="Add a run"
              className="min-w-0 max-w-md flex-1 rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm disabled:text-slate-400"
              value=""
              disabled={state.runs.length >= MAX_COMPARED || addable.length === 0}
              onChange={(event) => event.target.value && update({ runs: [...state.runs, event.target.value] })}
            >
              <option value="">{state.runs.length >= MAX_COMPARED ? `At most ${MAX_COMPARED} runs` : addable.length ? "Add a run…" : "No other runs"}</option>
              {addable.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.name} · {r.status}
                </option>
              ))}
            </select>
          </div>
        )}
      </Card>

      {state.runs.length === 0 ? (
        <Card>
          <EmptyState title="Pick runs to compare">
            Choose runs above, or tick them in the{" "}
            <Link className="text-brand-700 hover:underline" href="/runs">
              runs list
            </Link>{" "}
            and press Compare.
          </EmptyState>
        </Card>
      ) : (
        <>
          <Card
            title="Curves"
            actions={
              <div className="flex flex-wrap items-center gap-4 text-sm">
                <label className="flex items-center gap-2">
                  <span className="text-slate-500">Metric</span>
                  <select
                    aria-label="Metric"
                    className="max-w-56 rounded-md border border-slate-300 bg-white px-2 py-1 font-mono text-xs"
                    value={metric}
                    onChange={(event) => update({ metric: event.target.value === DEFAULT_METRIC ? null : event.target.value })}
                  >
                    {(metricNames.includes(metric) ? metricNames : [metric, ...metricNames]).map((name) => (
                      <option key={name} value={name}>
                        {name}
                      </option>
                    ))}
                  </select>
                </label>
                <label className="flex items-center gap-2">
                  <span className="text-slate-500">Smoothing</span>
                  <input
                    aria-label="Smoothing"
                    type="range"
                    min={0}
                    max={0.99}
                    step={0.01}
                    value={state.smoothing}
                    onChange={(event) => update({ smoothing: Number(event.target.value) })}
                    className="w-28 accent-brand-600"
                  />
                  <span className="w-8 tabular-nums text-slate-600">{state.smoothing.toFixed(2)}</span>
                </label>
                <RadioGroup
                  label="X axis"
                  options={X_AXES}
                  value={state.x}
                  onChange={(x) => update({ x })}
                  className="overflow-hidden rounded-md border border-slate-300 bg-white"
                  optionClassName="px-2.5 py-1 text-xs font-medium"
                />
              </div>
            }
          >
            <div className="p-4">
              {chartSeries.some((s) => s.points.length > 0) ? (
                <CompareChart metric={metric} series={chartSeries.filter((s) => s.points.length > 0)} smoothing={state.smoothing} x={state.x} />
              ) : (
                <p className="grid h-96 place-items-center text-sm text-slate-500">
                  {loadingMetrics ? "Loading metrics…" : `No ${metric} points yet in these runs.`}
                </p>
              )}
            </div>
          </Card>

          <Card
            title="Config"
            actions={
              <label className="flex items-center gap-2 text-sm text-slate-600">
                <input
                  type="checkbox"
                  className="size-4 accent-brand-600"
                  checked={state.differencesOnly}
                  onChange={(event) => update({ differencesOnly: event.target.checked })}
                />
                Differences only
              </label>
            }
          >
            <ConfigDiff
              differencesOnly={state.differencesOnly}
              columns={runs
                .filter((run) => run.query.data)
                .map((run) => ({ id: run.id, name: run.query.data!.name, color: run.color, config: run.query.data!.config }))}
            />
          </Card>
        </>
      )}
    </div>
  );
}
