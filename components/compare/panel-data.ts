/**
 * What a compare panel draws, from the series the compare API sends (pure, so it is tested alone): each run's points
 * against the panel's x-axis, paired with the x by step; runs grouped by a config value into a mean with a band;
 * EMA smoothing over each line.
 */
import { downsample, smooth } from "@/lib/series";
import type { Band, Panel } from "./compare-state";

/** A series as columns by step, ascending. */
export type StepSeries = { steps: readonly number[]; values: readonly number[] };

/** A point of a drawn line: its step, where it sits on the panel's x-axis, and its value. */
export type PanelPoint = { step: number; x: number; y: number };

/** A point of a group's line: the mean of its runs at a step, the band around it, and how many runs it holds. */
export type BandPoint = PanelPoint & { low: number; high: number; count: number };

/** The index of the first step at or after `step` (steps.length when there is none). */
function lowerBound(steps: readonly number[], step: number): number {
  let lo = 0;
  let hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid]! < step) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * A series' value at a step: its own where it has a point there, else the straight line between the points either
 * side (a downsampled series skips steps); null before its first point or after its last.
 */
export function valueAtStep(series: StepSeries, step: number): number | null {
  const i = lowerBound(series.steps, step);
  if (i === series.steps.length) return null;
  const after = series.steps[i]!;
  if (after === step) return series.values[i]!;
  if (i === 0) return null;
  const before = series.steps[i - 1]!;
  const t = (step - before) / (after - before);
  return series.values[i - 1]! + t * (series.values[i]! - series.values[i - 1]!);
}

/**
 * A run's points on a panel: each y point with its x at the same step. Without `x` the x is the step itself; else
 * `x`'s value at that step (another metric, the tokens trained so far, the seconds since the start), and a y point
 * with no x there (outside the x series' steps) is left out.
 */
export function pairByStep(y: StepSeries, x: StepSeries | null): PanelPoint[] {
  const points: PanelPoint[] = [];
  for (let i = 0; i < y.steps.length; i++) {
    const step = y.steps[i]!;
    const at = x ? valueAtStep(x, step) : step;
    if (at !== null) points.push({ step, x: at, y: y.values[i]! });
  }
  return points;
}

/** The value at a dotted path of a config (`algorithm.learningRate`), or undefined where the path leads nowhere. */
export function configValue(config: unknown, path: string): unknown {
  let at: unknown = config;
  for (const key of path.split(".")) {
    if (at === null || typeof at !== "object" || Array.isArray(at) || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}

/**
 * Items grouped by a value (compared as JSON, so 0.01 and "0.01" differ), in the order each value first appears;
 * `label` writes the value as the legend shows it ("unset" where the path leads nowhere).
 */
export function groupBy<T>(items: readonly T[], keyOf: (item: T) => unknown): { label: string; members: T[] }[] {
  const groups = new Map<string, { label: string; members: T[] }>();
  for (const item of items) {
    const value = keyOf(item);
    const key = value === undefined ? "" : JSON.stringify(value);
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { label: value === undefined ? "unset" : typeof value === "string" ? value : key, members: [] }));
    group.members.push(item);
  }
  return [...groups.values()];
}

/**
 * A group's line: at every step any of its runs has, the mean of the runs that reach that step (a run between two
 * of its points counts with the straight line between them), with a band of their lowest and highest value, or of
 * the mean ± one standard error (the sample standard deviation over √n; no width for a single run). The x is the
 * mean of the runs' x at that step.
 */
export function groupStatistics(runs: readonly PanelPoint[][], band: Band): BandPoint[] {
  const steps = [...new Set(runs.flatMap((points) => points.map((p) => p.step)))].sort((a, b) => a - b);
  const columns = runs.map((points) => ({
    y: { steps: points.map((p) => p.step), values: points.map((p) => p.y) },
    x: { steps: points.map((p) => p.step), values: points.map((p) => p.x) },
  }));
  const out: BandPoint[] = [];
  for (const step of steps) {
    const ys: number[] = [];
    let xSum = 0;
    for (const column of columns) {
      const y = valueAtStep(column.y, step);
      const x = valueAtStep(column.x, step);
      if (y === null || x === null) continue;
      ys.push(y);
      xSum += x;
    }
    const n = ys.length;
    if (n === 0) continue;
    const mean = ys.reduce((a, b) => a + b, 0) / n;
    let low: number;
    let high: number;
    if (band === "minmax") {
      low = Math.min(...ys);
      high = Math.max(...ys);
    } else {
      const sem = n > 1 ? Math.sqrt(ys.reduce((a, y) => a + (y - mean) ** 2, 0) / (n - 1) / n) : 0;
      low = mean - sem;
      high = mean + sem;
    }
    out.push({ step, x: xSum / n, y: mean, low, high, count: n });
  }
  return out;
}

/** A line smoothed by EMA in step order (W&B's and TensorBoard's, debiased at the start); its x stays as it is. */
export function smoothPoints<P extends PanelPoint>(points: readonly P[], weight: number, keys: readonly ("y" | "low" | "high")[] = ["y"]): P[] {
  if (weight <= 0) return [...points];
  const smoothed = keys.map((key) =>
    smooth(
      points.map((p) => ({ step: p.step, value: (p as Record<string, number>)[key]! })),
      weight,
    ),
  );
  return points.map((p, i) => {
    const out = { ...p };
    keys.forEach((key, k) => {
      (out as Record<string, number>)[key] = smoothed[k]![i]!.value;
    });
    return out;
  });
}

/** The point of a line nearest a step (lines are in step order), or null outside the line's steps. */
export function pointAtStep<P extends PanelPoint>(points: readonly P[], step: number): P | null {
  if (points.length === 0 || step < points[0]!.step || step > points.at(-1)!.step) return null;
  const i = lowerBound(
    points.map((p) => p.step),
    step,
  );
  if (i === 0) return points[0]!;
  return step - points[i - 1]!.step <= points[i]!.step - step ? points[i - 1]! : points[i]!;
}

/** One line of a panel: a run, or a group's mean with its band. `raw` is the unsmoothed line drawn faint behind. */
export type DrawnLine = { id: string; label: string; color: string; points: PanelPoint[] | BandPoint[]; raw: PanelPoint[] | null; band: boolean };

/** A compared run's data as the panels read it: its series by name (with seconds since its start) and its tokens. */
export type RunData = {
  id: string;
  name: string;
  color: string;
  config: unknown;
  series: Record<string, StepSeries & { seconds?: readonly number[] }>;
  tokens: StepSeries | null;
};

/**
 * The compared runs' data in their order: each run's name and config as its own query read them (its id until
 * then), its colour by its place, and its series and tokens from one `compare.series` answer.
 */
export function runDataOf(
  runIds: readonly string[],
  runs: readonly ({ name: string; config: unknown } | undefined)[],
  read: { runs: readonly { runId: string; series: RunData["series"]; tokens: StepSeries | null }[] } | undefined,
  palette: readonly string[],
): RunData[] {
  const byId = new Map((read?.runs ?? []).map((r) => [r.runId, r]));
  return runIds.map((id, i) => {
    const run = runs[i];
    const series = byId.get(id);
    return {
      id,
      name: run?.name ?? id,
      color: palette[i % palette.length]!,
      config: run?.config ?? null,
      series: series?.series ?? {},
      tokens: series?.tokens ?? null,
    };
  });
}

/** Runs grouped by the value at a config path, each group drawn as its mean with a band, coloured by its place. */
export type Grouping = { path: string; band: Band; colors: readonly string[] };

/** A run's points on a panel, or null where it lacks the metric or the x-axis's series. */
function runPoints(panel: Panel, run: RunData): PanelPoint[] | null {
  const y = run.series[panel.metric];
  if (!y) return null;
  if (panel.x === "step") return pairByStep(y, null);
  const x =
    panel.x === "time"
      ? y.seconds
        ? { steps: y.steps, values: y.seconds }
        : null
      : panel.x === "tokens"
        ? run.tokens
        : run.series[panel.x.slice("metric:".length)];
  return x ? pairByStep(y, x) : null;
}

/** A smoothed panel of at most this many runs draws each one's raw curve faint behind it. */
export const MAX_RAW_LINES = 4;

/** The groups of runs by a config path, with their legend label (`seed = 3 · 2 runs`) and colour. */
export function runGroups(runs: readonly RunData[], grouping: Grouping) {
  return groupBy(runs, (run) => configValue(run.config, grouping.path)).map((group, i) => ({
    ...group,
    id: `group:${group.label}`,
    color: grouping.colors[i % grouping.colors.length]!,
    legend: `${grouping.path} = ${group.label} · ${group.members.length} run${group.members.length === 1 ? "" : "s"}`,
  }));
}

/**
 * What a panel draws: each run's line (smoothed, the raw one behind for a few runs), or with a grouping one line
 * per group, the mean of its runs with their band (a group of one run has no band).
 */
export function panelLines(panel: Panel, runs: readonly RunData[], grouping: Grouping | null): DrawnLine[] {
  const lines: DrawnLine[] = [];
  if (!grouping) {
    // Past a few runs the raw curves would bury the smoothed ones (and double what is drawn): only those then.
    const withRaw = panel.smoothing > 0 && runs.length <= MAX_RAW_LINES;
    for (const run of runs) {
      const points = runPoints(panel, run);
      if (!points?.length) continue;
      lines.push({
        id: run.id,
        label: run.name,
        color: run.color,
        points: smoothPoints(points, panel.smoothing),
        raw: withRaw ? points : null,
        band: false,
      });
    }
    return lines;
  }
  for (const group of runGroups(runs, grouping)) {
    const members = group.members.map((run) => runPoints(panel, run)).filter((points): points is PanelPoint[] => !!points?.length);
    if (members.length === 0) continue;
    const stats = groupStatistics(members, grouping.band);
    lines.push({
      id: group.id,
      label: group.legend,
      color: group.color,
      points: smoothPoints(stats, panel.smoothing, ["y", "low", "high"]),
      raw: null,
      band: members.length > 1,
    });
  }
  return lines;
}

/**
 * About `max` of a line's points for drawing: a min/max downsample by value (lib/series), so spikes stay. A chart a
 * few hundred pixels wide shows no more; the hover still reads every point.
 */
export function thinPoints<P extends PanelPoint>(points: P[], max: number): P[] {
  if (points.length <= max) return points;
  return downsample(
    points.map((point) => ({ step: point.step, value: point.y, point })),
    max,
  ).map((kept) => kept.point);
}
