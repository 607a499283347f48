"use client";

import { memo, useMemo, useState } from "react";
import { CartesianGrid, Line, LineChart, ReferenceArea, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { downsample, smooth, type SeriesPoint } from "@/lib/series";

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
const format = (v: number) => (Math.abs(v) >= 1000 ? compact.format(v) : Math.abs(v) < 0.001 && v !== 0 ? v.toExponential(1) : Number(v.toFixed(3)).toString());

/** A range of the x-axis, [from, to], in the chart's x unit (steps or seconds). */
export type XRange = [number, number];

/**
 * One series; `x` says what SeriesPoint.step holds: the training step, or seconds of wall time. `count` is how many
 * points the series really has (the points given may be a downsample of them). Dragging across the chart selects a
 * range to zoom into (`onZoom`); `zoom` is the range shown, and `detail`, when given, the series at full resolution
 * within it (the points held for the whole run may be a coarse downsample there).
 */
export const MetricChart = memo(function MetricChart({
  name,
  points,
  count,
  smoothing,
  x = "step",
  zoom = null,
  detail = null,
  onZoom,
}: {
  name: string;
  points: SeriesPoint[];
  count?: number;
  smoothing: number;
  x?: "step" | "time";
  zoom?: XRange | null;
  detail?: SeriesPoint[] | null;
  onZoom?: (range: XRange | null) => void;
}) {
  const [drag, setDrag] = useState<{ from: number; to: number } | null>(null);
  const shown = useMemo(() => (zoom ? (detail ?? points.filter((p) => p.step >= zoom[0] && p.step <= zoom[1])) : points), [zoom, detail, points]);
  const raw = downsample(shown, 1000);
  const smoothed = smooth(raw, smoothing);
  const data = raw.map((p, i) => ({ step: p.step, raw: p.value, smooth: smoothed[i]!.value }));
  const last = points.at(-1);
  // A constant series gets a symmetric range around its value instead of recharts' arbitrary one.
  const flat = shown.length > 0 && shown.every((p) => p.value === shown[0]!.value) ? shown[0]!.value : null;
  // Ticks carry as many decimals as the range needs, so a narrow band does not print one number five times.
  let low = Infinity;
  let high = -Infinity;
  for (const p of raw) {
    low = Math.min(low, p.value);
    high = Math.max(high, p.value);
  }
  const span = high - low;
  const decimals = span > 0 && span < 1 ? Math.min(6, Math.ceil(-Math.log10(span)) + 1) : 2;
  // Tiny values (a loss near 1e-4) as 9.1e-5, with as many digits as tell the ticks apart: fixed decimals overflow the axis.
  const magnitude = Math.max(Math.abs(low), Math.abs(high));
  const tiny = magnitude > 0 && magnitude < 0.01;
  const digits = span > 0 ? Math.min(4, Math.max(1, Math.ceil(Math.log10(magnitude / span)) + 1)) : 1;
  const tick = (v: number) =>
    Math.abs(v) >= 1000 ? compact.format(v) : tiny && v !== 0 ? Number(v.toExponential(digits)).toExponential() : Number(v.toFixed(decimals)).toString();
  const at = (label: string | number | undefined) => (label === undefined || label === "" ? null : Number(label));
  const endDrag = () => {
    if (drag && drag.from !== drag.to) onZoom?.([Math.min(drag.from, drag.to), Math.max(drag.from, drag.to)]);
    setDrag(null);
  };
  return (
    <figure
      className="rounded-lg border border-slate-200 bg-white p-3"
      aria-label={`chart ${name}`}
      data-points={count ?? points.length}
      data-shown={shown.length}
      data-zoom={zoom ? `${zoom[0]}-${zoom[1]}` : undefined}
      onDoubleClick={() => zoom && onZoom?.(null)}
      title={onZoom ? (zoom ? "drag to zoom further, double-click to zoom out" : "drag across the chart to zoom in") : undefined}
    >
      <figcaption className="mb-1 flex items-baseline justify-between gap-2">
        <span className="font-mono text-xs font-medium text-slate-700">{name}</span>
        {last && <span className="font-mono text-xs tabular-nums text-slate-500">{format(last.value)}</span>}
      </figcaption>
      <div className="h-40 select-none">
        <ResponsiveContainer width="100%" height="100%">
          <LineChart
            data={data}
            margin={{ top: 4, right: 8, bottom: 0, left: -12 }}
            onMouseDown={
              onZoom
                ? (e) => {
                    const v = at(e.activeLabel);
                    if (v !== null) setDrag({ from: v, to: v });
                  }
                : undefined
            }
            onMouseMove={
              drag
                ? (e) => {
                    const v = at(e.activeLabel);
                    if (v !== null) setDrag({ from: drag.from, to: v });
                  }
                : undefined
            }
            onMouseUp={drag ? endDrag : undefined}
            onMouseLeave={drag ? endDrag : undefined}
          >
            <CartesianGrid stroke="#e2e8f0" strokeDasharray="3 3" />
            <XAxis
              dataKey="step"
              type="number"
              domain={zoom ?? ["dataMin", "dataMax"]}
              allowDataOverflow={zoom !== null}
              tick={{ fontSize: 10 }}
              allowDecimals={x === "time"}
              tickFormatter={(v) => (x === "time" ? `${Math.round(v)}s` : String(v))}
            />
            <YAxis tick={{ fontSize: 10 }} tickFormatter={tick} width={tiny ? 68 : 56} domain={flat !== null ? [flat - 1, flat + 1] : ["auto", "auto"]} />
            <Tooltip
              formatter={(v) => format(Number(v))}
              labelFormatter={(s) => (x === "step" ? `step ${s}` : `${Number(s).toFixed(1)} s`)}
              contentStyle={{ fontSize: 12 }}
            />
            {smoothing > 0 && <Line dataKey="raw" stroke="#4f6ef7" strokeOpacity={0.25} dot={false} isAnimationActive={false} />}
            <Line dataKey="smooth" stroke="#3b57e0" strokeWidth={1.75} dot={shown.length < 30} isAnimationActive={false} />
            {drag && drag.from !== drag.to && <ReferenceArea x1={drag.from} x2={drag.to} fill="#3b57e0" fillOpacity={0.12} />}
          </LineChart>
        </ResponsiveContainer>
      </div>
    </figure>
  );
});
