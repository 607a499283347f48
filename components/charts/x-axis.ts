import { scaleLinear } from "d3-scale";
import { formatDuration } from "@/lib/duration";
import type { ValueAxis } from "./value-axis";

/** About this many ticks on an x-axis. */
const TICK_COUNT = 6;

/**
 * A step axis over [from, to]: ticks at whole steps only (d3's round ticks, those between two steps dropped: a range
 * of two steps marks 1, 2, 3 rather than 1, 1.5, 2, 2.5, 3). A single step gets one step either side of it.
 */
export function stepAxis(range: [number, number] | null): ValueAxis {
  let [from, to] = range ?? [0, 1];
  if (from === to) [from, to] = [Math.max(0, from - 1), from + 1];
  const ticks = scaleLinear()
    .domain([from, to])
    .ticks(TICK_COUNT)
    .filter((t) => Number.isInteger(t));
  return { domain: [from, to], ticks, format: (value) => String(value) };
}

/** Tick spacings a wall-time axis may use, in seconds: whole seconds, minutes and hours people count in. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400];

/**
 * A wall-time axis over [from, to] seconds: ticks at the smallest spacing among whole seconds, minutes and hours
 * that gives at most about six of them, written as durations ("1m 30s").
 */
export function secondsAxis(range: [number, number] | null): ValueAxis {
  let [from, to] = range ?? [0, 1];
  if (from === to) [from, to] = [Math.max(0, from - 1), from + 1];
  const spacing = TIME_STEPS.find((s) => (to - from) / s <= TICK_COUNT) ?? Math.ceil((to - from) / TICK_COUNT / 86_400) * 86_400;
  const ticks: number[] = [];
  for (let t = Math.ceil(from / spacing) * spacing; t <= to; t += spacing) ticks.push(t);
  return { domain: [from, to], ticks, format: formatDuration };
}
