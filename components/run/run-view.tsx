"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useEffect, useMemo, useState } from "react";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { StatusBadge } from "@/components/ui/status-badge";
import { formatDuration } from "@/components/ui/time";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";
import type { SeriesPoint } from "@/lib/series";
import { DerivedRuns } from "./derived-runs";
import { EvaluateForm } from "./evaluate-form";
import { LeaguePanel } from "./league-panel";
import type { XRange } from "./metric-chart";
import { RolloutsPanel } from "./rollouts-panel";
import { useMetricStream, type InitialMetrics } from "./use-metric-stream";
import { numberParam, useViewParams } from "./view-params";
import { ShareButton } from "@/components/share/share-button";
import { ZoomableChart } from "./zoomable-chart";

const HEADLINE = ["reward/mean", "eval/score", "loss/policy", "entropy", "kl", "train/clip_frac", "episode/length", "perf/tokens_per_s", "loss", "grad_norm"];
/** A league run's curves, drawn again beside its league table: the learner's win rates and its newest snapshot's Elo. */
const LEAGUE_CHARTS = ["league/win_rate/all", "league/win_rate/latest", "league/elo/latest"];
const ACTIVE = new Set(["queued", "running"]);

export function RunView({ runId, initialMetrics = null }: { runId: string; initialMetrics?: InitialMetrics }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const run = useQuery({
    ...trpc.runs.byId.queryOptions({ id: runId }),
    refetchInterval: (q) => (q.state.data && !ACTIVE.has(q.state.data.status) ? false : 2000),
  });
  const live = run.data ? ACTIVE.has(run.data.status) : true;
  const { series, origin, error } = useMetricStream(runId, initialMetrics);
  const logs = useQuery({ ...trpc.runs.logs.queryOptions({ runId }), refetchInterval: live ? 3000 : false });
  const checkpoints = useQuery({ ...trpc.checkpoints.ofRun.queryOptions({ runId }), refetchInterval: live ? 5000 : false });
  // The run's last checkpoint and log lines land as it ends: read both once more when its state changes.
  const status = run.data?.status;
  useEffect(() => {
    if (!status) return;
    void queryClient.invalidateQueries({ queryKey: trpc.checkpoints.ofRun.queryKey({ runId }) });
    void queryClient.invalidateQueries({ queryKey: trpc.runs.logs.queryKey({ runId }) });
  }, [status, runId, queryClient, trpc]);
  // Where the run's base came from, asked once (a run's base never changes); one whose checkpoint is gone is named as given.
  const baseName = (run.data?.config as { agent?: { base?: string } } | undefined)?.agent?.base;
  const lineage = useQuery({
    ...trpc.checkpoints.lineage.queryOptions({ runId }),
    enabled: Boolean(baseName),
    staleTime: Infinity,
    retry: false,
  });
  const baseLineage = lineage.data?.lineage ?? (lineage.isError ? baseName : null);
  // An evaluation or export belongs to the run whose checkpoint it took: its page links back there.
  const trainsNothing = run.data !== undefined && run.data.totalSteps === 0;
  const source = useQuery({ ...trpc.derived.sourceOf.queryOptions({ runId }), enabled: trainsNothing, staleTime: Infinity });
  // An evaluation or export is a run of its own, listed on this page (DerivedRuns) with its score or download: the
  // page stays here and lists it at once.
  const listDerived = () => queryClient.invalidateQueries({ queryKey: trpc.derived.ofRun.queryKey({ runId }) });
  // The checkpoint whose evaluation is being set up: Evaluate asks for episodes and temperature before it starts.
  const [evaluating, setEvaluating] = useState<string | null>(null);
  const evaluateCheckpoint = useKeyedMutation(
    trpc.runs.evaluate.mutationOptions({
      onSuccess: () => {
        setEvaluating(null);
        return listDerived();
      },
    }),
  );
  const exportCheckpoint = useKeyedMutation(trpc.runs.export.mutationOptions({ onSuccess: listDerived }));
  const control = useMutation(
    trpc.runs.control.mutationOptions({ onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.runs.byId.queryKey({ id: runId }) }) }),
  );
  // The view (smoothing, x-axis, zoom, the open "All metrics" section) lives in the URL: a reload, a copied
  // address or a share link opens the same view.
  const [view, setView] = useViewParams();
  const smoothing = numberParam(view, "smooth", 0.6, 0, 0.99);
  const setSmoothing = (value: number) => setView({ smooth: value === 0.6 ? null : String(value) });
  const xAxis: "step" | "time" = view.get("x") === "time" ? "time" : "step";
  const setXAxis = (value: "step" | "time") => setView({ x: value === "step" ? null : value, zoom: null });
  // One zoom for every chart, as the x-axes are shared: drag across any chart to set it, double-click to clear.
  const zoom = parseZoom(view.get("zoom"));
  const setZoom = (range: XRange | null) => setView({ zoom: range ? `${+range[0].toFixed(3)},${+range[1].toFixed(3)}` : null });
  // Charts of the closed "All metrics" section are drawn once it opens.
  const showRest = view.get("all") === "1";
  const setShowRest = (open: boolean) => setView({ all: open ? "1" : null });
  // Per series, the points on the chosen x-axis: the same arrays from render to render until new points come.
  const plottedSeries = useMemo(() => {
    const out = new Map<string, SeriesPoint[]>();
    for (const [name, s] of series) out.set(name, xAxis === "step" ? s.points : s.points.map((p) => ({ step: p.time, value: p.value })));
    return out;
  }, [series, xAxis]);
  const chart = (name: string) => (
    <ZoomableChart
      key={name}
      runId={runId}
      name={name}
      series={series.get(name)!}
      points={plottedSeries.get(name)!}
      origin={origin}
      smoothing={smoothing}
      x={xAxis}
      zoom={zoom}
      onZoom={setZoom}
    />
  );
  // When the run ends, fetch logs and rollouts once more: polling stops, and the last ones came after it.
  useEffect(() => {
    if (!live) {
      void queryClient.invalidateQueries({ queryKey: trpc.runs.logs.queryKey({ runId }) });
      void queryClient.invalidateQueries({ queryKey: trpc.runs.rollouts.pathKey() });
    }
  }, [live, queryClient, trpc, runId]);

  const metricStep = useMemo(() => Math.max(0, ...[...series.values()].map((s) => s.points.at(-1)?.step ?? 0)), [series]);
  const names = useMemo(() => {
    const all = [...series.keys()].sort();
    return { headline: HEADLINE.filter((n) => series.has(n)), rest: all.filter((n) => !HEADLINE.includes(n)) };
  }, [series]);

  if (!run.data) return <p className="text-sm text-slate-500">{run.error ? run.error.message : "Loading…"}</p>;
  const r = run.data;
  // What the caller may do: editors and owners control the run; viewers and a share link's holder (role null) only look.
  const canEdit = r.role === "editor" || r.role === "owner";
  // A remote training session (a script's calls on a worker) has no environment: nothing to evaluate or play.
  const session = (r.config as { environment?: string }).environment === "remote-session";
  // A serving run (server/jobs/serving.ts): an inference job that answers /v1 requests with its base's weights.
  const serving = (r.config as { environment?: string }).environment === "serving";
  const servedBase = (r.config as { agent?: { base?: string } }).agent?.base;
  // The run's recorded step goes back when its job starts over (from a checkpoint, or from scratch without one), while
  // the metrics of the steps it had reached stay on the charts: the page shows the furthest step either shows.
  const step = Math.max(r.step, r.totalSteps > 0 ? Math.min(metricStep, r.totalSteps) : metricStep);
  const stepSeconds = series.get("perf/step_seconds")?.points;
  const meanStep = stepSeconds?.length ? stepSeconds.slice(-10).reduce((a, p) => a + p.value, 0) / Math.min(10, stepSeconds.length) : null;
  const eta = r.status === "running" && meanStep ? Math.round((r.totalSteps - step) * meanStep) : null;
  const tokensPerSecond = series.get("perf/tokens_per_s")?.points.at(-1)?.value;
  const evaluatedCheckpoint = checkpoints.data?.find((c) => c.id === evaluating);
  // A run's stored config has every default written down (server/experiments/launch.ts parses it).
  const evaluationDefaults = (r.config as { evaluation: { episodes: number; temperature: number } }).evaluation;

  return (
    <div className="space-y-6">
      <div className="flex flex-wrap items-center justify-between gap-4">
        <div className="flex items-center gap-3">
          <StatusBadge status={r.status} />
          <span className="text-sm tabular-nums text-slate-600">
            {session ? (
              `a remote training session: ${step} optimizer step${step === 1 ? "" : "s"}`
            ) : serving ? (
              `serves ${servedBase ?? "its base"} and adapters on it at /v1 (OpenAI-compatible); no training steps`
            ) : r.totalSteps > 0 ? (
              `step ${step} of ${r.totalSteps}${r.resumedFromStep !== null ? ` · resumed from step ${r.resumedFromStep}` : ""}`
            ) : source.data ? (
              <>
                {source.data.kind === "eval" ? "an evaluation" : "an export"} of step {source.data.checkpointStep} of{" "}
                <Link className="text-brand-700 hover:underline" href={`/runs/${source.data.runId}`}>
                  {source.data.name}
                </Link>
              </>
            ) : (
              "no training steps: it evaluates or exports its base"
            )}
            {eta !== null && ` · ETA ${formatDuration(eta)}`}
            {tokensPerSecond !== undefined && ` · ${Math.round(tokensPerSecond).toLocaleString("en-US")} tokens/s`}
          </span>
          {r.reason && (
            <span className="text-sm text-slate-500">
              · {r.reason}
              {r.status === "failed" && (
                <>
                  {" · "}
                  <a href="#run-log" className="text-brand-700 hover:underline">
                    the log below
                  </a>{" "}
                  says more
                </>
              )}
            </span>
          )}
        </div>
        <div className="flex items-center gap-2">
          {r.role !== null && <ShareButton kind="run" runIds={[runId]} canCreate={canEdit} />}
          {canEdit && (r.status === "running" || r.status === "queued") && (
            <>
              <Button variant="secondary" onClick={() => control.mutate({ id: runId, action: "pause" })}>
                Pause
              </Button>
              <Button variant="secondary" onClick={() => control.mutate({ id: runId, action: "cancel" })}>
                Cancel
              </Button>
            </>
          )}
          {canEdit && r.status === "paused" && <Button onClick={() => control.mutate({ id: runId, action: "resume" })}>Resume</Button>}
        </div>
      </div>
      {control.error && <p className="text-sm text-red-600">{control.error.message}</p>}
      {r.warnings.length > 0 && (
        <div role="alert" aria-label="Run health" className="rounded-md border border-amber-300 bg-amber-50 px-4 py-3 text-sm text-amber-900">
          <p className="font-medium">This run may not be learning</p>
          <ul className="mt-1 list-disc space-y-1 pl-5">
            {r.warnings.map((warning) => (
              <li key={warning.code} data-code={warning.code}>
                {warning.message}
              </li>
            ))}
          </ul>
        </div>
      )}
      {baseLineage && (
        <p role="note" className="text-xs text-slate-500" aria-label="Base">
          base: <span className="font-mono">{baseLineage}</span>
        </p>
      )}
      <div className="h-1.5 overflow-hidden rounded-full bg-slate-200">
        <div className="h-full bg-brand-500 transition-all" style={{ width: `${r.totalSteps ? (100 * step) / r.totalSteps : 0}%` }} />
      </div>

      <section aria-label="Charts">
        <div className="mb-2 flex items-center justify-between">
          <h2 className="text-sm font-semibold text-slate-800">Metrics</h2>
          <div className="flex items-center gap-4">
            <label className="flex items-center gap-2 text-xs text-slate-600">
              x-axis
              <select
                value={xAxis}
                onChange={(e) => setXAxis(e.target.value as "step" | "time")}
                className="rounded border border-slate-300 bg-white px-1 py-0.5"
              >
                <option value="step">step</option>
                <option value="time">wall time</option>
              </select>
            </label>
            {zoom && (
              <button
                type="button"
                onClick={() => setZoom(null)}
                className="rounded border border-slate-300 bg-white px-2 py-0.5 text-xs text-slate-700 hover:bg-slate-50"
              >
                {xAxis === "step" ? `steps ${Math.round(zoom[0])}–${Math.round(zoom[1])}` : `${zoom[0].toFixed(0)}–${zoom[1].toFixed(0)} s`} · reset zoom
              </button>
            )}
            <label className="flex items-center gap-2 text-xs text-slate-600">
              Smoothing
              <input type="range" min={0} max={0.99} step={0.01} value={smoothing} onChange={(e) => setSmoothing(Number(e.target.value))} />
              <span className="w-8 tabular-nums">{smoothing.toFixed(2)}</span>
            </label>
          </div>
        </div>
        {error && <p className="text-sm text-red-600">Metrics: {error}</p>}
        {series.size === 0 ? (
          <p className="rounded-lg border border-dashed border-slate-300 px-4 py-8 text-center text-sm text-slate-500">
            {live ? "Waiting for the first metric points…" : "This run reported no metrics."}
          </p>
        ) : (
          <div className="grid gap-3 sm:grid-cols-2 xl:grid-cols-4">{names.headline.map(chart)}</div>
        )}
        {names.rest.length > 0 && (
          <details className="mt-3" open={showRest} onToggle={(e) => setShowRest((e.target as HTMLDetailsElement).open)}>
            <summary className="cursor-pointer text-sm text-slate-600">All metrics ({names.rest.length} more)</summary>
            <div className="mt-3 grid gap-3 sm:grid-cols-2 xl:grid-cols-4">{showRest && names.rest.map(chart)}</div>
          </details>
        )}
      </section>

      {(r.config as { algorithm?: { league?: unknown } }).algorithm?.league ? (
        <LeaguePanel runId={runId} live={live}>
          {LEAGUE_CHARTS.filter((name) => series.has(name)).map(chart)}
        </LeaguePanel>
      ) : null}

      <RolloutsPanel
        runId={runId}
        live={live}
        config={r.config}
        initialSplit={r.totalSteps > 0 ? "train" : "eval"}
        shared={r.role === null}
        canShare={canEdit}
      />

      <div className="grid gap-6 lg:grid-cols-2">
        <Card title="Config">
          <pre className="max-h-96 overflow-auto px-4 py-3 font-mono text-xs text-slate-700">{JSON.stringify(r.config, null, 2)}</pre>
        </Card>
        <Card title="Checkpoints">
          <ol className="max-h-96 overflow-auto px-4 py-3 text-xs" aria-label="Checkpoints">
            {(checkpoints.data ?? []).length === 0 && (
              <li className="text-slate-500">
                {session
                  ? "None yet: a session saves one when its script calls saveState, saveWeightsForSampler or close, and when it goes quiet."
                  : r.totalSteps > 0
                    ? "None yet: a run saves one every config.checkpointEvery steps and at its end."
                    : "None: this run trains nothing."}
              </li>
            )}
            {(checkpoints.data ?? []).map((c) =>
              c.kind === "export" ? (
                <li key={c.id} className="flex items-baseline justify-between gap-3 py-0.5">
                  <span className="tabular-nums text-slate-700">step {c.step}</span>
                  <span className="text-slate-600">
                    {(r.config as { protocol?: { policies?: string } }).protocol?.policies === "separate"
                      ? "exported models (tar: a safetensors per agent)"
                      : "exported model (safetensors)"}
                  </span>
                  <span className="tabular-nums text-slate-400">{(c.sizeBytes / 1024).toFixed(0)} KiB</span>
                  {r.role !== null && (
                    <a className="text-brand-700 hover:underline" href={`/api/exports/${c.id}`} download>
                      Download
                    </a>
                  )}
                </li>
              ) : (
                <li key={c.id} className="flex items-baseline justify-between gap-3 py-0.5">
                  <span className="tabular-nums text-slate-700">
                    step {c.step}
                    {c.kind === "sampler" && (
                      <span
                        className="ml-1 text-slate-500"
                        title="Saved by saveWeightsForSampler: the weights alone, without the optimizer. A base, not a point to resume from."
                      >
                        (weights)
                      </span>
                    )}
                  </span>
                  {c.setAsideReason ? (
                    <span className="text-amber-700" title={c.setAsideReason}>
                      set aside: damaged
                    </span>
                  ) : (
                    r.role !== null && (
                      <span className="font-mono text-slate-600" title="Name it as agent.base to start a run from here">
                        {c.id}
                      </span>
                    )
                  )}
                  <span className="tabular-nums text-slate-400">{(c.sizeBytes / 1024).toFixed(0)} KiB</span>
                  {r.role !== null && !c.setAsideReason && (
                    <span className="flex gap-2">
                      {canEdit && (
                        <>
                          {!session && (
                            <button
                              type="button"
                              className="text-brand-700 hover:underline"
                              aria-expanded={evaluating === c.id}
                              onClick={() => setEvaluating(evaluating === c.id ? null : c.id)}
                              title="Play this run's held-out episodes with the policy of this checkpoint, as a run of its own"
                            >
                              Evaluate
                            </button>
                          )}
                          <CheckpointAction
                            label="Export"
                            title="Write this checkpoint's model (an adapter merged into its base) as one safetensors file to download"
                            action={exportCheckpoint}
                            checkpointId={c.id}
                          />
                        </>
                      )}
                      <a
                        className="text-brand-700 hover:underline"
                        href={`/api/models/${c.id}.onnx`}
                        download
                        title="This checkpoint's model (an adapter merged into its base) as ONNX, with its key/value cache as inputs and outputs"
                      >
                        ONNX
                      </a>
                      <a
                        className="text-brand-700 hover:underline"
                        href={`/playground?model=${c.id}&run=${runId}`}
                        title="Sample from this checkpoint in your browser"
                      >
                        Try
                      </a>
                      {!session && (
                        <a
                          className="text-brand-700 hover:underline"
                          href={`/playground?mode=episode&model=${c.id}&run=${runId}`}
                          title="Play an episode of this run's environment with this checkpoint in your browser, or take a side yourself"
                        >
                          Play
                        </a>
                      )}
                    </span>
                  )}
                </li>
              ),
            )}
          </ol>
          {evaluatedCheckpoint && (
            <div className="px-4 pb-3 text-xs">
              <EvaluateForm
                key={evaluatedCheckpoint.id}
                step={evaluatedCheckpoint.step}
                defaults={evaluationDefaults}
                pending={evaluateCheckpoint.isPending}
                onStart={(settings) => evaluateCheckpoint.mutate({ checkpointId: evaluatedCheckpoint.id, ...settings })}
                onCancel={() => setEvaluating(null)}
              />
            </div>
          )}
          <p className="border-t border-slate-100 px-4 py-2 text-xs text-slate-500">
            {r.role !== null && "Any checkpoint can be a base: pick it in an experiment's base field."}
            {evaluateCheckpoint.error && <span className="block text-red-700">Evaluate: {evaluateCheckpoint.error.message}</span>}
            {exportCheckpoint.error && <span className="block text-red-700">Export: {exportCheckpoint.error.message}</span>}
          </p>
        </Card>
        {(r.totalSteps > 0 || session) && <DerivedRuns runId={runId} mayDownload={r.role !== null} />}
        <Card title="Log">
          <ol id="run-log" aria-label="Log" className="max-h-96 scroll-mt-4 overflow-auto px-4 py-3 font-mono text-xs">
            {(logs.data ?? []).map((line) => (
              <li key={line.seq} className={line.level === "error" ? "text-red-700" : line.level === "warn" ? "text-amber-700" : "text-slate-700"}>
                <span className="text-slate-400">{line.createdAt.toISOString().slice(11, 19)}</span> {line.message}
              </li>
            ))}
          </ol>
        </Card>
      </div>
    </div>
  );
}

/** A zoom from the URL ("from,to"), or null. */
function parseZoom(text: string | null): XRange | null {
  const [from, to] = (text ?? "").split(",").map(Number);
  return from !== undefined && to !== undefined && Number.isFinite(from) && Number.isFinite(to) && to > from ? [from, to] : null;
}

/** A job started from one checkpoint (an evaluation, an export); the run it makes opens when it is queued. */
function CheckpointAction({
  label,
  title,
  action,
  checkpointId,
}: {
  label: string;
  title: string;
  action: { isPending: boolean; mutate(input: { checkpointId: string }): void };
  checkpointId: string;
}) {
  return (
    <button
      type="button"
      className="text-brand-700 hover:underline disabled:text-slate-400"
      disabled={action.isPending}
      onClick={() => action.mutate({ checkpointId })}
      title={title}
    >
      {label}
    </button>
  );
}
