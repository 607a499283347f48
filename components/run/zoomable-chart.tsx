"use client";

import { useQuery } from "@tanstack/react-query";
import { useMemo } from "react";
import { useTRPC } from "@/components/trpc/provider";
import type { SeriesPoint } from "@/lib/series";
import { MetricChart, type XRange } from "./metric-chart";
import type { LiveSeries } from "./use-metric-stream";

/**
 * The steps that cover an x range: itself on the step axis; on the wall-time axis, from the last held point at or
 * before its start to the first at or after its end (held points may be sparse there, so the range is widened to
 * the points around it, and the fetched points are cut to the times afterwards).
 */
function stepsCovering(series: LiveSeries, x: "step" | "time", zoom: XRange): [number, number] {
  if (x === "step") return [Math.max(0, Math.floor(zoom[0])), Math.max(0, Math.ceil(zoom[1]))];
  const points = series.points;
  let from = points[0]?.step ?? 0;
  let to = points.at(-1)?.step ?? 0;
  for (const p of points) {
    if (p.time <= zoom[0]) from = p.step;
    if (p.time >= zoom[1]) {
      to = p.step;
      break;
    }
  }
  return [from, Math.max(from, to)];
}

/**
 * A run page chart that can be zoomed: while zoomed, the range is fetched at full resolution (runs.metricRange),
 * and live points that arrive after the fetched ones join them.
 */
export function ZoomableChart(props: {
  runId: string;
  name: string;
  series: LiveSeries;
  points: SeriesPoint[];
  origin: number | null;
  smoothing: number;
  x: "step" | "time";
  zoom: XRange | null;
  onZoom: (range: XRange | null) => void;
}) {
  const { runId, name, series, points, origin, smoothing, x, zoom, onZoom } = props;
  const trpc = useTRPC();
  const [fromStep, toStep] = zoom ? stepsCovering(series, x, zoom) : [0, 0];
  const range = useQuery({ ...trpc.runs.metricRange.queryOptions({ runId, name, fromStep, toStep }), enabled: zoom !== null, staleTime: 60_000 });
  const detail = useMemo(() => {
    if (!zoom || !range.data) return null;
    const fetched: SeriesPoint[] = range.data.points.map((p) => ({ step: x === "step" ? p.step : (p.wallTime - (origin ?? 0)) / 1000, value: p.value }));
    const lastFetchedStep = range.data.points.at(-1)?.step ?? -1;
    const live = series.points.filter((p) => p.step > lastFetchedStep).map((p) => ({ step: x === "step" ? p.step : p.time, value: p.value }));
    return [...fetched, ...live].filter((p) => p.step >= zoom[0] && p.step <= zoom[1]);
  }, [zoom, range.data, series.points, origin, x]);
  return <MetricChart name={name} points={points} count={series.count} smoothing={smoothing} x={x} zoom={zoom} detail={detail} onZoom={onZoom} />;
}
