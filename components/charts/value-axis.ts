import { scaleLinear } from "d3-scale";

/** A chart's value (y) axis: its range, the values to mark on it, and how they are written. */
export type ValueAxis = { domain: [number, number]; ticks: number[]; format: (value: number) => string };

/** The range of the finite values given, or null when there is none. */
export function extent(values: Iterable<number>): [number, number] | null {
  let low = Infinity;
  let high = -Infinity;
  for (const value of values) {
    if (!Number.isFinite(value)) continue;
    if (value < low) low = value;
    if (value > high) high = value;
  }
  return low > high ? null : [low, high];
}

/** About this many ticks on a value axis; d3 picks round values near it. */
const TICK_COUNT = 5;

/**
 * How far the axis of a series with one value (a single point, or a flat line) reaches on each side of it: a tenth
 * of the value, and at least 0.1, so the point sits in the middle of a range of the same order as itself rather than
 * in recharts' arbitrary one (a single 0.69 drew from −0.31 to 1.69).
 */
export function flatPadding(value: number): number {
  return Math.max(Math.abs(value) * 0.1, 0.1);
}

/**
 * The value axis for the finite values given, from a d3 linear scale: the range widened to round ticks (`nice`), the
 * ticks, and d3-format's tick format, whose precision is what tells neighbouring ticks apart (0.62, 0.64 rather than
 * 0.6, 0.6). Ticks 1,000 apart or more on an axis reaching 10,000 are written with an SI prefix (20k); an axis
 * within ±0.001 in exponent form (5e-5).
 */
export function valueAxis(values: Iterable<number>): ValueAxis {
  let [low, high] = extent(values) ?? [0, 1];
  if (low === high) [low, high] = [low - flatPadding(low), high + flatPadding(high)];
  const scale = scaleLinear().domain([low, high]).nice(TICK_COUNT);
  const [from, to] = scale.domain() as [number, number];
  const magnitude = Math.max(Math.abs(from), Math.abs(to));
  const specifier = magnitude >= 1e4 && to - from >= 1e3 ? "s" : magnitude < 1e-3 ? "e" : ",f";
  const format = scale.tickFormat(TICK_COUNT, specifier);
  // d3 gives every tick the scale's prefix or exponent, zero too ("0k", "0e+0"): zero reads best as itself.
  return { domain: [from, to], ticks: scale.ticks(TICK_COUNT), format: (value) => (value === 0 ? "0" : format(value)) };
}

const standard = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 4 });
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 4 });
const scientific = new Intl.NumberFormat("en-US", { notation: "scientific", maximumSignificantDigits: 3 });

/** One metric value (a tooltip's, a chart's latest) to four significant digits: 0.6931, 12.35K, 9.12e-5. */
export function formatValue(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude >= 1e4) return compact.format(value);
  // Lower-case e, as d3-format writes the axis's ticks.
  if (magnitude !== 0 && magnitude < 1e-3) return scientific.format(value).replace("E", "e");
  return standard.format(value);
}
