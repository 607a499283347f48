"use client";

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

/** At most `max` points, keeping each bucket's first point, so long series draw quickly. */
export function downsample(points: SeriesPoint[], max: number): SeriesPoint[] {
  if (points.length <= max) return points;
  const stride = points.length / max;
  const out: SeriesPoint[] = [];
  for (let i = 0; i < max; i++) out.push(points[Math.floor(i * stride)]!);
  out.push(points.at(-1)!);
  return out;
}

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
const format = (v: number) =>
  Math.abs(v) >= 1000 ? compact.format(v) : Math.abs(v) < 0.001 && v !== 0 ? v.toExponential(1) : Number(v.toFixed(3)).toString();

/** One series; `x` says what SeriesPoint.step holds: the training step, or seconds of wall time. */
export function MetricChart({ name, points, smoothing, x = "step" }: { name: string; points: SeriesPoint[]; smoothing: number; x?: "step" | "time" }) {
  const raw = downsample(points, 2000);
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
    <figure className="rounded-lg border border-slate-200 bg-white p-3" aria-label={`chart ${name}`} data-points={points.length}>
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
}
