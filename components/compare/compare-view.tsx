"use client";

import { keepPreviousData, useQueries, useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { usePathname, useSearchParams } from "next/navigation";
import { useCallback, useEffect, useMemo, useState } from "react";
import { formatValue } from "@/components/charts";
import { ShareButton } from "@/components/share/share-button";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { RadioGroup } from "@/components/ui/radio-group";
import { StatusBadge } from "@/components/ui/status-badge";
import { ComparePanel } from "./compare-panel";
import {
  type Band,
  type CompareState,
  compareQuery,
  DEFAULT_METRIC,
  DEFAULT_SMOOTHING,
  MAX_COMPARED,
  MAX_PANELS,
  type Panel,
  parseCompareState,
  seriesInput,
  type XAxisKind,
} from "./compare-state";
import { ConfigDiff, diffConfigs } from "./config-diff";
import { configValue, type Grouping, panelLines, type RunData, runDataOf, runGroups } from "./panel-data";
import { SourceDiff } from "./source-diff";

/** One colour per compared run, or per group (MAX_COMPARED of them). */
export const PALETTE = ["#3b57e0", "#e8590c", "#0ca678", "#d6336c", "#7048e8", "#1098ad", "#f59f00", "#495057", "#74b816", "#ae3ec9", "#8d6e63", "#e03131"];

/** The metric that holds each step's trained tokens (server/runs/compare.ts), which a tokens axis needs. */
const TOKENS_METRIC = "train/tokens";

const BANDS = [
  ["minmax", "Min–max"],
  ["sem", "Std. error"],
] as const;

const ACTIVE = new Set(["queued", "placing", "running"]);

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
  const setPanel = (index: number, patch: Partial<Panel>) => update({ panels: state.panels.map((p, i) => (i === index ? { ...p, ...patch } : p)) });

  const runQueries = useQueries({ queries: state.runs.map((id) => ({ ...trpc.runs.byId.queryOptions({ id }), retry: false })) });
  const active = runQueries.some((q) => ACTIVE.has(q.data?.status ?? ""));
  // One request for every series the panels draw.
  const input = useMemo(() => seriesInput(state), [state]);
  const series = useQuery({
    ...trpc.compare.series.queryOptions(input),
    enabled: state.runs.length > 0,
    placeholderData: keepPreviousData,
    // A run still training keeps drawing; finished ones are read once.
    refetchInterval: active ? 5000 : false,
  });
  const sources = useQuery({ ...trpc.compare.sources.queryOptions({ runIds: state.runs }), enabled: state.runs.length > 0 });
  const recent = useQuery({ ...trpc.runs.list.queryOptions({ limit: 50 }), enabled: !shared });

  const runsKey = runQueries.map((q) => q.dataUpdatedAt).join(",");
  // biome-ignore lint/correctness/useExhaustiveDependencies: the run queries' results are new objects only when runsKey changes
  const runData = useMemo(
    (): RunData[] =>
      runDataOf(
        state.runs,
        runQueries.map((q) => q.data),
        series.data,
        PALETTE,
      ),
    [state.runs, series.data, runsKey],
  );
  const metricNames = useMemo(() => [...new Set((series.data?.runs ?? []).flatMap((r) => r.names))].sort(), [series.data]);

  const grouping: Grouping | null = useMemo(() => (state.group ? { path: state.group, band: state.band, colors: PALETTE } : null), [state.group, state.band]);
  const lines = useMemo(() => state.panels.map((panel) => panelLines(panel, runData, grouping)), [state.panels, runData, grouping]);
  const groups = grouping ? runGroups(runData, grouping) : null;
  const groupFieldMissing = grouping !== null && runData.every((run) => run.config !== null && configValue(run.config, grouping.path) === undefined);

  const [hoveredStep, setHoveredStep] = useState<number | null>(null);
  const onHover = useCallback((step: number | null) => setHoveredStep(step), []);

  const configColumns = runData.filter((run) => run.config !== null).map((run) => ({ id: run.id, name: run.name, color: run.color, config: run.config }));
  const configPaths = diffConfigs(configColumns.map((c) => c.config)).sort((a, b) => Number(b.differs) - Number(a.differs));
  // Whether the runs' source files differ (versions may differ in their config alone).
  const sourceDiffers =
    new Set((sources.data?.runs ?? []).map((r) => JSON.stringify(r.versionId ? sources.data?.versions[r.versionId]?.files : null))).size > 1;
  const addable = (recent.data?.items ?? []).filter((r) => !state.runs.includes(r.id));
  const addPanel = () => {
    const shown = new Set(state.panels.map((p) => p.metric));
    const metric = metricNames.find((name) => !shown.has(name)) ?? DEFAULT_METRIC;
    update({ panels: [...state.panels, { metric, x: "step", smoothing: DEFAULT_SMOOTHING }] });
  };

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
          {runData.map((run, i) => {
            const query = runQueries[i]!;
            const reward = run.series[state.panels[0]!.metric];
            const last = reward?.values.at(-1);
            return (
              <li key={run.id} className="flex items-center gap-3 px-4 py-2 text-sm">
                <span className="size-3 shrink-0 rounded-full" style={{ backgroundColor: run.color }} aria-hidden />
                {query.error ? (
                  <span className="flex-1 text-red-600">{query.error.message}</span>
                ) : (
                  <>
                    {shared ? (
                      <span className="min-w-0 flex-1 truncate font-medium text-slate-800">{run.name}</span>
                    ) : (
                      // Not prefetched: ten run pages rendered on the server at once would slow the charts being drawn.
                      <Link
                        href={`/runs/${run.id}`}
                        prefetch={false}
                        className="min-w-0 flex-1 truncate font-medium text-slate-800 hover:text-brand-700 hover:underline"
                      >
                        {run.name}
                      </Link>
                    )}
                    {grouping && <span className="font-mono text-xs text-slate-500">{JSON.stringify(configValue(run.config, grouping.path)) ?? "unset"}</span>}
                    {query.data && <StatusBadge status={query.data.status} />}
                    <span className="w-24 text-right tabular-nums text-slate-500">{query.data ? `${query.data.step} / ${query.data.totalSteps}` : ""}</span>
                    <span className="w-28 text-right font-mono text-xs tabular-nums text-slate-700" title={`last ${state.panels[0]!.metric}`}>
                      {last === undefined ? "—" : formatValue(last)}
                    </span>
                  </>
                )}
                {!shared && (
                  <button
                    type="button"
                    className="rounded px-1.5 text-slate-400 hover:bg-slate-100 hover:text-red-600"
                    aria-label={`Remove ${run.name}`}
                    onClick={() => update({ runs: state.runs.filter((id) => id !== run.id), baseline: state.baseline === run.id ? null : state.baseline })}
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
                  <span className="text-slate-500">Group by</span>
                  <input
                    aria-label="Group by"
                    list="compare-config-paths"
                    placeholder="a config field, e.g. seed"
                    className="w-56 rounded-md border border-slate-300 bg-white px-2 py-1 font-mono text-xs"
                    value={state.group ?? ""}
                    onChange={(event) => update({ group: event.target.value.trim() || null })}
                  />
                  <datalist id="compare-config-paths">
                    {configPaths.map((row) => (
                      <option key={row.path} value={row.path} />
                    ))}
                  </datalist>
                </label>
                {grouping && (
                  <RadioGroup
                    label="Band"
                    options={BANDS}
                    value={state.band}
                    onChange={(band: Band) => update({ band })}
                    className="overflow-hidden rounded-md border border-slate-300 bg-white"
                    optionClassName="px-2.5 py-1 text-xs font-medium"
                  />
                )}
                <Button variant="secondary" onClick={addPanel} disabled={state.panels.length >= MAX_PANELS}>
                  Add panel
                </Button>
              </div>
            }
          >
            <div className="space-y-3 p-4">
              {groupFieldMissing && (
                <p role="alert" className="text-sm text-red-600">
                  No compared run's config has a field "{grouping.path}": group by a dotted path of the config, such as seed or algorithm.learningRate.
                </p>
              )}
              <ul aria-label="Legend" className="flex flex-wrap gap-x-4 gap-y-1 text-xs text-slate-700">
                {(groups ?? runData.map((run) => ({ id: run.id, legend: run.name, color: run.color }))).map((item) => (
                  <li key={item.id} className="inline-flex items-center gap-1.5">
                    <span className="h-0.5 w-4 rounded" style={{ backgroundColor: item.color }} aria-hidden />
                    {item.legend}
                  </li>
                ))}
              </ul>
              <div className="grid gap-4 xl:grid-cols-2">
                {state.panels.map((panel, index) => (
                  <section key={index} aria-label={`Panel ${index + 1}`} className="min-w-0 rounded-lg border border-slate-200 p-3">
                    <PanelControls
                      index={index}
                      panel={panel}
                      metricNames={metricNames}
                      onChange={(patch) => setPanel(index, patch)}
                      onRemove={state.panels.length > 1 ? () => update({ panels: state.panels.filter((_, i) => i !== index) }) : null}
                    />
                    {lines[index]!.length > 0 ? (
                      <ComparePanel metric={panel.metric} x={panel.x} lines={lines[index]!} hoveredStep={hoveredStep} onHover={onHover} />
                    ) : (
                      <p className="grid h-72 place-items-center text-center text-sm text-slate-500">
                        {series.isLoading || series.isPlaceholderData
                          ? "Loading metrics…"
                          : panel.x === "tokens" && !metricNames.includes(TOKENS_METRIC)
                            ? `These runs record no ${TOKENS_METRIC}, which the tokens axis needs.`
                            : `No ${panel.metric} points yet in these runs${panel.x.startsWith("metric:") ? ` at steps with ${panel.x.slice("metric:".length)}` : ""}.`}
                      </p>
                    )}
                  </section>
                ))}
              </div>
              {series.error && <p className="text-sm text-red-600">{series.error.message}</p>}
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
            <ConfigDiff differencesOnly={state.differencesOnly} columns={configColumns} sourceDiffers={sourceDiffers} />
          </Card>

          <Card title="Source">
            {sources.data ? (
              <SourceDiff
                columns={runData}
                sources={sources.data}
                baseline={state.baseline && state.runs.includes(state.baseline) ? state.baseline : state.runs[0]!}
                onBaseline={(baseline) => update({ baseline: baseline === state.runs[0] ? null : baseline })}
              />
            ) : (
              <p className="px-4 py-6 text-center text-sm text-slate-500">{sources.error ? sources.error.message : "Loading sources…"}</p>
            )}
          </Card>
        </>
      )}
    </div>
  );
}

/** A panel's own settings: its metric, its x-axis, its smoothing, and removing it. */
function PanelControls({
  index,
  panel,
  metricNames,
  onChange,
  onRemove,
}: {
  index: number;
  panel: Panel;
  metricNames: string[];
  onChange: (patch: Partial<Panel>) => void;
  onRemove: (() => void) | null;
}) {
  const n = index + 1;
  const names = metricNames.includes(panel.metric) ? metricNames : [panel.metric, ...metricNames];
  const xMetric = panel.x.startsWith("metric:") ? panel.x.slice("metric:".length) : null;
  const xNames = xMetric && !metricNames.includes(xMetric) ? [xMetric, ...metricNames] : metricNames;
  return (
    <div className="mb-2 flex flex-wrap items-center gap-3 text-sm">
      <select
        aria-label={`Metric of panel ${n}`}
        className="max-w-56 rounded-md border border-slate-300 bg-white px-2 py-1 font-mono text-xs"
        value={panel.metric}
        onChange={(event) => onChange({ metric: event.target.value })}
      >
        {names.map((name) => (
          <option key={name} value={name}>
            {name}
          </option>
        ))}
      </select>
      <label className="flex items-center gap-1.5">
        <span className="text-xs text-slate-500">x</span>
        <select
          aria-label={`X axis of panel ${n}`}
          className="max-w-48 rounded-md border border-slate-300 bg-white px-2 py-1 text-xs"
          value={panel.x}
          onChange={(event) => onChange({ x: event.target.value as XAxisKind })}
        >
          <option value="step">Step</option>
          <option value="time">Wall time</option>
          <option value="tokens">Tokens</option>
          <optgroup label="Another metric">
            {xNames
              .filter((name) => name !== panel.metric)
              .map((name) => (
                <option key={name} value={`metric:${name}`}>
                  {name}
                </option>
              ))}
          </optgroup>
        </select>
      </label>
      <label className="flex items-center gap-1.5">
        <span className="text-xs text-slate-500">Smoothing</span>
        <input
          aria-label={`Smoothing of panel ${n}`}
          type="range"
          min={0}
          max={0.99}
          step={0.01}
          value={panel.smoothing}
          onChange={(event) => onChange({ smoothing: Number(event.target.value) })}
          className="w-24 accent-brand-600"
        />
        <span className="w-8 text-xs tabular-nums text-slate-600">{panel.smoothing.toFixed(2)}</span>
      </label>
      {onRemove && (
        <button
          type="button"
          className="ml-auto rounded px-1.5 text-slate-400 hover:bg-slate-100 hover:text-red-600"
          aria-label={`Remove panel ${n}`}
          onClick={onRemove}
        >
          ×
        </button>
      )}
    </div>
  );
}
