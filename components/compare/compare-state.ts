/** The compare view's whole state, read from and written to the URL, so a comparison can be shared or reloaded. */
export type XAxisKind = "step" | "time";
export type CompareState = { runs: string[]; metric: string | null; smoothing: number; x: XAxisKind; differencesOnly: boolean };

export const DEFAULT_METRIC = "reward/mean";
const DEFAULT_SMOOTHING = 0.6;
/** As many runs as the chart has distinct colours. */
export const MAX_COMPARED = 8;

export function parseCompareState(params: URLSearchParams): CompareState {
  const runs = [
    ...new Set(
      (params.get("runs") ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ].slice(0, MAX_COMPARED);
  const smoothing = Number(params.get("smooth"));
  return {
    runs,
    metric: params.get("metric") || null,
    smoothing: params.has("smooth") && Number.isFinite(smoothing) ? Math.min(Math.max(smoothing, 0), 0.99) : DEFAULT_SMOOTHING,
    x: params.get("x") === "time" ? "time" : "step",
    differencesOnly: params.get("diff") === "1",
  };
}

/** The query string of a state; defaults are left out so a plain comparison reads `?runs=a,b`. */
export function compareQuery(state: CompareState): string {
  const entries: [string, string][] = [];
  if (state.runs.length) entries.push(["runs", state.runs.join(",")]);
  if (state.metric) entries.push(["metric", state.metric]);
  if (state.smoothing !== DEFAULT_SMOOTHING) entries.push(["smooth", String(state.smoothing)]);
  if (state.x !== "step") entries.push(["x", state.x]);
  if (state.differencesOnly) entries.push(["diff", "1"]);
  // Commas and slashes stay readable: run ids and metric names hold nothing that needs them escaped.
  return entries.map(([k, v]) => `${k}=${encodeURIComponent(v).replace(/%2C/g, ",").replace(/%2F/g, "/")}`).join("&");
}

export function compareHref(runs: string[]): string {
  return `/compare?${compareQuery({ ...parseCompareState(new URLSearchParams()), runs })}`;
}
