"use client";

import { memo } from "react";
import { CartesianGrid, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";

export type SeriesPoint = { step: number; value: number };

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

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
const format = (v: number) =>
  Math.abs(v) >= 1000 ? compact.format(v) : Math.abs(v) < 0.001 && v !== 0 ? v.toExponential(1) : Number(v.toFixed(3)).toString();

/**
 * One series; `x` says what SeriesPoint.step holds: the training step, or seconds of wall time. `count` is how many
 * points the series really has (the points given may be a downsample of them).
 */
export const MetricChart = memo(function MetricChart({ name, points, count, smoothing, x = "step" }: { name: string; points: SeriesPoint[]; count?: number; smoothing: number; x?: "step" | "time" }) {
  const raw = downsample(points, 1000);
  const smoothed = smooth(raw, smoothing);
  const data = raw.map((p, i) => ({ step: p.step, raw: p.value, smooth: smoothed[i]!.value }));
  const last = points.at(-1);
  // A constant series gets a symmetric range around its value instead of recharts' arbitrary one.
  const flat = points.length > 0 && points.every((p) => p.value === points[0]!.value) ? points[0]!.value : null;
  // Ticks carry as many decimals as the range needs, so a narrow band does not print one number five times.
  let low = Infinity;
  let high = -Infinity;
  for (const p of raw) {
    low = Math.min(low, p.value);
    high = Math.max(high, p.value);
  }
  const span = high - low;
  const decimals = span > 0 && span < 1 ? Math.min(6, Math.ceil(-Math.log10(span)) + 1) : 2;
  const tick = (v: number) => (Math.abs(v) >= 1000 ? compact.format(v) : Number(v.toFixed(decimals)).toString());
  return (
    <figure className="rounded-lg border border-slate-200 bg-white p-3" aria-label={`chart ${name}`} data-points={count ?? points.length}>
      <figcaption className="mb-1 flex items-baseline justify-between gap-2">
        <span className="font-mono text-xs font-medium text-slate-700">{name}</span>
        {last && <span className="font-mono text-xs tabular-nums text-slate-500">{format(last.value)}</span>}
      </figcaption>
      <div className="h-40">
        <ResponsiveContainer width="100%" height="100%">
          <LineChart data={data} margin={{ top: 4, right: 8, bottom: 0, left: -12 }}>
            <CartesianGrid stroke="#e2e8f0" strokeDasharray="3 3" />
            <XAxis dataKey="step" type="number" domain={["dataMin", "dataMax"]} tick={{ fontSize: 10 }} allowDecimals={x === "time"} tickFormatter={(v) => (x === "time" ? `${Math.round(v)}s` : String(v))} />
            <YAxis tick={{ fontSize: 10 }} tickFormatter={tick} width={56} domain={flat !== null ? [flat - 1, flat + 1] : ["auto", "auto"]} />
            <Tooltip formatter={(v) => format(Number(v))} labelFormatter={(s) => (x === "step" ? `step ${s}` : `${Number(s).toFixed(1)} s`)} contentStyle={{ fontSize: 12 }} />
            {smoothing > 0 && <Line dataKey="raw" stroke="#4f6ef7" strokeOpacity={0.25} dot={false} isAnimationActive={false} />}
            <Line dataKey="smooth" stroke="#3b57e0" strokeWidth={1.75} dot={points.length < 30} isAnimationActive={false} />
          </LineChart>
        </ResponsiveContainer>
      </div>
    </figure>
  );
});
