/** The compare view's whole state, read from and written to the URL, so a comparison can be shared or reloaded. */

/** What a panel's x-axis is: the step, wall time, tokens trained so far, or another metric (paired by step). */
export type XAxisKind = "step" | "time" | "tokens" | `metric:${string}`;

/** One chart: a metric, its x-axis, and its EMA smoothing (0 = raw, up to 0.99). */
export type Panel = { metric: string; x: XAxisKind; smoothing: number };

/** How a group's spread is drawn around its mean: its lowest and highest run, or ± one standard error of the mean. */
export type Band = "minmax" | "sem";

export type CompareState = {
  runs: string[];
  panels: Panel[];
  /** A config field (dotted path, e.g. `algorithm.learningRate`) whose value groups runs into one mean line each. */
  group: string | null;
  band: Band;
  differencesOnly: boolean;
  /** The run every other run's source is diffed against (the first run when null). */
  baseline: string | null;
};

export const DEFAULT_METRIC = "reward/mean";
export const DEFAULT_SMOOTHING = 0.6;
/** As many runs as the compare API reads at once (server/api/routers/compare.ts), each a colour of its own. */
export const MAX_COMPARED = 12;
export const MAX_PANELS = 8;
/** Points per series a panel set asks for: about one a pixel column of a panel. */
export const MAX_POINTS = 500;
const DEFAULT_PANEL: Panel = { metric: DEFAULT_METRIC, x: "step", smoothing: DEFAULT_SMOOTHING };

/** Panels in the URL: `metric~x~smoothing`, separated by `;` (`reward/mean~step~0.6;loss/policy~metric:reward/mean~0`). */
const PANEL_FIELDS = "~";
const PANEL_SEPARATOR = ";";

function clampSmoothing(value: number): number {
  return Math.min(Math.max(value, 0), 0.99);
}

function parseX(text: string | null): XAxisKind | null {
  if (text === "step" || text === "time" || text === "tokens") return text;
  if (text?.startsWith("metric:") && text.length > "metric:".length) return text as XAxisKind;
  return null;
}

/** One panel of the URL's `panels`, or null when it does not read as one (it is then left out). */
export function parsePanel(text: string): Panel | null {
  const fields = text.split(PANEL_FIELDS);
  if (fields.length < 3) return null;
  const smoothing = Number(fields.pop());
  const x = parseX(fields.pop()!);
  const metric = fields.join(PANEL_FIELDS);
  if (!metric || !x || !Number.isFinite(smoothing)) return null;
  return { metric, x, smoothing: clampSmoothing(smoothing) };
}

function formatPanel(panel: Panel): string {
  return [panel.metric, panel.x, String(panel.smoothing)].join(PANEL_FIELDS);
}

export function parseCompareState(params: URLSearchParams): CompareState {
  const runs = [
    ...new Set(
      (params.get("runs") ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ].slice(0, MAX_COMPARED);
  let panels = (params.get("panels") ?? "")
    .split(PANEL_SEPARATOR)
    .filter(Boolean)
    .map(parsePanel)
    .filter((p): p is Panel => p !== null)
    .slice(0, MAX_PANELS);
  if (panels.length === 0) {
    // A link from before panels: one chart of `metric`, with `smooth` and `x`.
    const smoothing = Number(params.get("smooth"));
    panels = [
      {
        metric: params.get("metric") || DEFAULT_METRIC,
        x: parseX(params.get("x")) ?? "step",
        smoothing: params.has("smooth") && Number.isFinite(smoothing) ? clampSmoothing(smoothing) : DEFAULT_SMOOTHING,
      },
    ];
  }
  return {
    runs,
    panels,
    group: params.get("group")?.trim() || null,
    band: params.get("band") === "sem" ? "sem" : "minmax",
    differencesOnly: params.get("diff") === "1",
    baseline: params.get("base") || null,
  };
}

/** The query string of a state; defaults are left out so a plain comparison reads `?runs=a,b`. */
export function compareQuery(state: CompareState): string {
  const entries: [string, string][] = [];
  if (state.runs.length) entries.push(["runs", state.runs.join(",")]);
  const onlyDefault = state.panels.length === 1 && formatPanel(state.panels[0]!) === formatPanel(DEFAULT_PANEL);
  if (!onlyDefault) entries.push(["panels", state.panels.map(formatPanel).join(PANEL_SEPARATOR)]);
  if (state.group) entries.push(["group", state.group]);
  if (state.band !== "minmax") entries.push(["band", state.band]);
  if (state.differencesOnly) entries.push(["diff", "1"]);
  if (state.baseline) entries.push(["base", state.baseline]);
  // Commas, slashes, colons and semicolons stay readable: run ids and metric names hold nothing that needs them escaped.
  return entries.map(([k, v]) => `${k}=${encodeURIComponent(v).replace(/%2C/g, ",").replace(/%2F/g, "/").replace(/%3A/g, ":").replace(/%3B/g, ";")}`).join("&");
}

export function compareHref(runs: string[]): string {
  return `/compare?${compareQuery({ ...parseCompareState(new URLSearchParams()), runs })}`;
}

/**
 * What `compare.series` is asked for a state: every panel's metric and any metric a panel takes as x, seconds when a
 * panel's x is wall time, tokens when one's is tokens. The page prefetches with it and the view reads with it, so
 * both name the same query.
 */
export function seriesInput(state: CompareState) {
  const metrics = [...new Set(state.panels.flatMap((p) => [p.metric, ...(p.x.startsWith("metric:") ? [p.x.slice("metric:".length)] : [])]))].sort();
  return {
    runIds: state.runs,
    metrics,
    // Only the metrics drawn against wall time need each point's seconds.
    time: [...new Set(state.panels.filter((p) => p.x === "time").map((p) => p.metric))].sort(),
    tokens: state.panels.some((p) => p.x === "tokens"),
    maxPoints: MAX_POINTS,
  };
}
