"use client";

import { memo, useMemo, useState } from "react";
import { CartesianGrid, Line, LineChart, ReferenceArea, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { extent, formatValue, secondsAxis, stepAxis, valueAxis } from "@/components/charts";
import { downsample, smooth, type SeriesPoint } from "@/lib/series";

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
  // The value axis over the points drawn (smoothing stays within their range); a single point or a flat series gets
  // a small band around its value.
  const axis = valueAxis(raw.map((p) => p.value));
  // Whole steps or whole seconds over the range shown (the zoom's, else the data's).
  const xAxis = (x === "time" ? secondsAxis : stepAxis)(zoom ?? extent(raw.map((p) => p.step)));
  const axisWidth = Math.max(52, 6 * Math.max(...axis.ticks.map((t) => axis.format(t).length)) + 24);
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
        {last && <span className="font-mono text-xs tabular-nums text-slate-500">{formatValue(last.value)}</span>}
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
              domain={xAxis.domain}
              ticks={xAxis.ticks}
              allowDataOverflow={zoom !== null}
              tick={{ fontSize: 10 }}
              tickFormatter={xAxis.format}
            />
            <YAxis tick={{ fontSize: 10 }} domain={axis.domain} ticks={axis.ticks} tickFormatter={axis.format} width={axisWidth} />
            <Tooltip
              formatter={(v) => formatValue(Number(v))}
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
