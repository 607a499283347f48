import { Rng } from "@/lib/model/rng";

/** Timing for benchmarks: a few warm-up calls, then as many calls as fit in a time budget. */
export async function throughput(
  fn: () => Promise<unknown> | unknown,
  tokensPerCall: number,
  options: { seconds: number; warmup?: number },
): Promise<{ tokensPerSecond: number; callsPerSecond: number; calls: number }> {
  for (let i = 0; i < (options.warmup ?? 2); i++) await fn();
  let calls = 0;
  const start = performance.now();
  while (performance.now() - start < options.seconds * 1000 || calls < 2) {
    await fn();
    calls++;
  }
  const elapsed = (performance.now() - start) / 1000;
  return { tokensPerSecond: (calls * tokensPerCall) / elapsed, callsPerSecond: calls / elapsed, calls };
}

/** Peak resident set size of this process so far, in MiB. */
export function peakRssMb(): number {
  return process.resourceUsage().maxRSS / 1024;
}

/** A plain-text table with right-aligned numbers. */
export function formatTable(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (typeof c === "number" ? formatNumber(c) : c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(cells[0]), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join("\n");
}

function formatNumber(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2);
}

/** The value at fraction `q` (0 to 1) of the way through `values` sorted (nearest rank, rounding down). */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) throw new Error("quantile of no values");
  if (!(q >= 0 && q <= 1)) throw new Error(`quantile must be from 0 to 1; got ${q}`);
  return [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))]!;
}

/**
 * The ratio of two variants' 10th percentiles (e.g. ms per episode step): how they compare in the runs the machine
 * left alone, which a shared VM's bursts move far less than the median of per-round ratios (docs/SANDBOX.md).
 */
export function quietRatio(values: number[], baseline: number[]): number {
  return quantile(values, 0.1) / quantile(baseline, 0.1);
}

/** The arithmetic mean; 0 of no values. */
export function mean(values: number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / Math.max(values.length, 1);
}

/** The median (of an even count, the lower of the two middle values). */
export function median(values: number[]): number {
  return quantile(values, 0.5);
}

/**
 * A 90% interval for `statistic` of `items` (a bench's rounds): the 5th and 95th percentiles of the statistic of
 * `resamples` resamples with replacement (a bootstrap), drawn from a fixed seed so that the same items give the
 * same interval.
 */
export function bootstrapInterval<T>(items: T[], statistic: (sample: T[]) => number, resamples = 1_000): [number, number] {
  if (items.length === 0) throw new Error("interval of no values");
  const rng = new Rng(0x5eed);
  const values: number[] = [];
  for (let r = 0; r < resamples; r++) values.push(statistic(items.map(() => items[Math.floor(rng.uniform() * items.length)]!)));
  values.sort((a, b) => a - b);
  return [values[Math.floor(resamples * 0.05)]!, values[Math.ceil(resamples * 0.95) - 1]!];
}

/** `bootstrapInterval` of the median of `values`. */
export function medianInterval(values: number[], resamples = 1_000): [number, number] {
  return bootstrapInterval(values, median, resamples);
}

/**
 * How far the 90% interval of the median of `ratios` reaches from it, in percentage points (the larger side): how
 * precise a bench's "% added" is (bench:sandbox plays rounds until this is small enough, see --precision).
 */
export function medianReachPoints(ratios: number[]): number {
  const [low, high] = medianInterval(ratios);
  const middle = median(ratios);
  return 100 * Math.max(middle - low, high - middle);
}
