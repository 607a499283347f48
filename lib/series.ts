/** Metric series as charts draw them: EMA smoothing and a min/max downsample (pure; the server uses them too). */

export type SeriesPoint = { step: number; value: number };

/** One column set per metric name, as a live metric stream sends them. */
export type SeriesBatch = { name: string; steps: number[]; values: number[]; wallTimes: number[] }[];

/**
 * What a metric stream's event carries. `summary` events stand for the run's history up to their id (a
 * downsample, with each series' true point count in `counts`); other events hold every new point.
 */
export type FeedEvent = { series: SeriesBatch; summary?: { counts: Record<string, number> } };

/** Exponential moving average, the way W&B and TensorBoard smooth: debiased so the start is not pulled to 0. */
export function smooth(points: SeriesPoint[], weight: number): SeriesPoint[] {
  if (weight <= 0) return points;
  let last = 0;
  return points.map((p, i) => {
    last = last * weight + (1 - weight) * p.value;
    return { step: p.step, value: last / (1 - weight ** (i + 1)) };
  });
}

/**
 * About `max` points: the series cut into max/2 runs of consecutive points, each giving its lowest and highest
 * point (in order), plus the last point, so spikes survive and long series draw quickly.
 */
export function downsample<P extends SeriesPoint>(points: P[], max: number): P[] {
  if (points.length <= max) return points;
  const buckets = Math.max(1, Math.floor(max / 2));
  const width = points.length / buckets;
  const out: P[] = [];
  for (let b = 0; b < buckets; b++) {
    const from = Math.floor(b * width);
    const to = Math.min(points.length, Math.floor((b + 1) * width));
    let lo = from;
    let hi = from;
    for (let i = from + 1; i < to; i++) {
      if (points[i]!.value < points[lo]!.value) lo = i;
      if (points[i]!.value > points[hi]!.value) hi = i;
    }
    out.push(points[Math.min(lo, hi)]!);
    if (lo !== hi) out.push(points[Math.max(lo, hi)]!);
  }
  if (out.at(-1) !== points.at(-1)) out.push(points.at(-1)!);
  return out;
}
