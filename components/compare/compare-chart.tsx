"use client";

import { CartesianGrid, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { formatValue, valueAxis } from "@/components/charts";
import { formatDuration } from "@/components/ui/time";
import { downsample, type SeriesPoint, smooth } from "@/lib/series";
import type { XAxisKind } from "./compare-state";

export type ChartSeries = { id: string; name: string; color: string; points: SeriesPoint[] };

/** Several runs' curves of one metric on shared axes, each smoothed the same way; the raw values stay faint behind. */
export function CompareChart({ metric, series, smoothing, x }: { metric: string; series: ChartSeries[]; smoothing: number; x: XAxisKind }) {
  const drawn = series.map((s) => {
    const raw = downsample(s.points, 1500);
    const smoothed = smooth(raw, smoothing);
    return { ...s, data: raw.map((p, i) => ({ x: p.step, raw: p.value, y: smoothed[i]!.value })) };
  });
  // One value axis over every run's drawn points; a single point or constant curves get a small band around their value.
  const axis = valueAxis(drawn.flatMap((s) => s.data.map((p) => p.raw)));
  const formatX = x === "time" ? formatDuration : (v: number) => String(v);
  return (
    <figure aria-label={`chart ${metric}`} className="h-96">
      <ResponsiveContainer width="100%" height="100%">
        <LineChart margin={{ top: 8, right: 16, bottom: 8, left: 0 }}>
          <CartesianGrid stroke="#e2e8f0" strokeDasharray="3 3" />
          <XAxis
            dataKey="x"
            type="number"
            domain={["dataMin", "dataMax"]}
            allowDuplicatedCategory={false}
            allowDecimals={false}
            tick={{ fontSize: 11 }}
            tickFormatter={formatX}
            label={{ value: x === "time" ? "wall time" : "step", position: "insideBottomRight", offset: -4, fontSize: 11, fill: "#64748b" }}
          />
          <YAxis tick={{ fontSize: 11 }} domain={axis.domain} ticks={axis.ticks} tickFormatter={axis.format} width={56} />
          <Tooltip
            formatter={(value, name) => [formatValue(Number(value)), name]}
            labelFormatter={(label) => (x === "time" ? formatDuration(Number(label)) : `step ${label}`)}
            contentStyle={{ fontSize: 12 }}
          />
          {smoothing > 0 &&
            drawn.map((s) => (
              <Line
                key={`${s.id}-raw`}
                data={s.data}
                dataKey="raw"
                name={`${s.name} (raw)`}
                stroke={s.color}
                strokeOpacity={0.2}
                dot={false}
                isAnimationActive={false}
                tooltipType="none"
                legendType="none"
              />
            ))}
          {drawn.map((s) => (
            <Line key={s.id} data={s.data} dataKey="y" name={s.name} stroke={s.color} strokeWidth={1.75} dot={s.data.length < 30} isAnimationActive={false} />
          ))}
        </LineChart>
      </ResponsiveContainer>
    </figure>
  );
}
