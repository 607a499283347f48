"use client";

import { type KeyboardEvent, memo, type MouseEvent, useMemo } from "react";
import {
  Area,
  CartesianGrid,
  ComposedChart,
  Line,
  ReferenceDot,
  ReferenceLine,
  ResponsiveContainer,
  usePlotArea,
  useXAxisInverseScale,
  XAxis,
  YAxis,
} from "recharts";
import { extent, formatValue, secondsAxis, stepAxis, type ValueAxis, valueAxis } from "@/components/charts";
import { formatDuration } from "@/components/ui/time";
import type { XAxisKind } from "./compare-state";
import { type BandPoint, type DrawnLine, type PanelPoint, pointAtStep, thinPoints } from "./panel-data";

/** At most this many points of a line are drawn: about one a pixel column of a panel. */
const DRAWN_POINTS = 500;

/** What a panel's x-axis is called. */
export function xAxisName(x: XAxisKind): string {
  if (x === "step") return "step";
  if (x === "time") return "wall time";
  if (x === "tokens") return "tokens";
  return x.slice("metric:".length);
}

function xScale(x: XAxisKind, lines: DrawnLine[]): ValueAxis {
  const xs = lines.flatMap((line) => line.points.map((p) => p.x));
  if (x === "step") return stepAxis(extent(xs));
  if (x === "time") return secondsAxis(extent(xs));
  return valueAxis(xs);
}

/**
 * Catches the pointer over the plot and reports the step of the point nearest it along x, so every panel can show
 * that step (the shared hover). Drawn last, over the lines. From the keyboard it is a slider over the steps drawn:
 * the arrow keys, Home and End move the step read.
 */
function HoverLayer({ lines, hoveredStep, onHover }: { lines: DrawnLine[]; hoveredStep: number | null; onHover: (step: number | null) => void }) {
  const plot = usePlotArea();
  const invert = useXAxisInverseScale();
  if (!plot || !invert) return null;
  const steps = [...new Set(lines.flatMap((line) => line.points.map((p) => p.step)))].sort((a, b) => a - b);
  const move = (event: MouseEvent<SVGRectElement>) => {
    const svg = event.currentTarget.ownerSVGElement;
    if (!svg) return;
    const at = Number(invert(event.clientX - svg.getBoundingClientRect().left));
    let best: PanelPoint | null = null;
    for (const line of lines) {
      for (const p of line.points) if (!best || Math.abs(p.x - at) < Math.abs(best.x - at)) best = p;
    }
    onHover(best ? best.step : null);
  };
  const key = (event: KeyboardEvent<SVGRectElement>) => {
    const i = hoveredStep === null ? -1 : steps.findIndex((s) => s >= hoveredStep);
    const next =
      event.key === "ArrowRight" || event.key === "ArrowUp"
        ? steps[Math.min(steps.length - 1, i + 1)]
        : event.key === "ArrowLeft" || event.key === "ArrowDown"
          ? steps[Math.max(0, i - 1)]
          : event.key === "Home"
            ? steps[0]
            : event.key === "End"
              ? steps.at(-1)
              : undefined;
    if (next === undefined) return;
    event.preventDefault();
    onHover(next);
  };
  return (
    <rect
      x={plot.x}
      y={plot.y}
      width={plot.width}
      height={plot.height}
      fill="transparent"
      role="slider"
      tabIndex={0}
      aria-label="Step read in every panel"
      aria-valuemin={steps[0] ?? 0}
      aria-valuemax={steps.at(-1) ?? 0}
      aria-valuenow={hoveredStep ?? steps[0] ?? 0}
      data-hover-layer=""
      onMouseMove={move}
      onMouseLeave={() => onHover(null)}
      onKeyDown={key}
    />
  );
}

/**
 * One compare panel: every line of one metric against the panel's x-axis, groups with their band, and at the
 * hovered step (from any panel) a dot on each line and their values below the chart.
 */
export const ComparePanel = memo(function ComparePanel({
  metric,
  x,
  lines,
  hoveredStep,
  onHover,
}: {
  metric: string;
  x: XAxisKind;
  lines: DrawnLine[];
  hoveredStep: number | null;
  onHover: (step: number | null) => void;
}) {
  // What is drawn is thinned to about a point a pixel column; the hover reads `lines` at full resolution.
  const drawn = useMemo(
    () => lines.map((line) => ({ ...line, points: thinPoints(line.points, DRAWN_POINTS), raw: line.raw && thinPoints(line.raw, DRAWN_POINTS) })),
    [lines],
  );
  const xAxis = xScale(x, lines);
  const yAxis = valueAxis(
    lines.flatMap((line) => [...line.points.flatMap((p) => ("low" in p ? [p.low, p.high, p.y] : [p.y])), ...(line.raw ?? []).map((p) => p.y)]),
  );
  const hovered = hoveredStep === null ? [] : lines.map((line) => ({ line, point: pointAtStep(line.points, hoveredStep) }));
  // A vertical rule where x grows with the step; another metric as x may not, so only the dots mark it there.
  const ruleAt = x.startsWith("metric:") ? null : (hovered.find((h) => h.point)?.point?.x ?? null);
  const yWidth = Math.max(52, 6 * Math.max(...yAxis.ticks.map((t) => yAxis.format(t).length)) + 24);
  return (
    <figure aria-label={`chart ${metric}`} data-x={x} data-lines={lines.length} className="min-w-0">
      <div className="h-72">
        <ResponsiveContainer width="100%" height="100%">
          <ComposedChart margin={{ top: 8, right: 16, bottom: 16, left: 0 }}>
            <CartesianGrid stroke="#e2e8f0" strokeDasharray="3 3" />
            <XAxis
              dataKey="x"
              type="number"
              domain={xAxis.domain}
              ticks={xAxis.ticks}
              tickFormatter={xAxis.format}
              allowDuplicatedCategory={false}
              tick={{ fontSize: 11 }}
              label={{ value: xAxisName(x), position: "insideBottomRight", offset: -12, fontSize: 11, fill: "#64748b" }}
            />
            <YAxis tick={{ fontSize: 11 }} domain={yAxis.domain} ticks={yAxis.ticks} tickFormatter={yAxis.format} width={yWidth} />
            {drawn.map(
              (line) =>
                line.band && (
                  <Area
                    key={`${line.id}-band`}
                    className="compare-band"
                    data={(line.points as BandPoint[]).map((p) => ({ x: p.x, band: [p.low, p.high] }))}
                    dataKey="band"
                    stroke="none"
                    fill={line.color}
                    fillOpacity={0.18}
                    isAnimationActive={false}
                    legendType="none"
                  />
                ),
            )}
            {drawn.map(
              (line) =>
                line.raw && (
                  <Line
                    key={`${line.id}-raw`}
                    data={line.raw}
                    dataKey="y"
                    stroke={line.color}
                    strokeOpacity={0.2}
                    dot={false}
                    isAnimationActive={false}
                    legendType="none"
                  />
                ),
            )}
            {drawn.map((line) => (
              <Line
                key={line.id}
                className="compare-line"
                data={line.points}
                dataKey="y"
                name={line.label}
                stroke={line.color}
                strokeWidth={1.75}
                dot={line.points.length < 30 ? { r: 2.5 } : false}
                activeDot={false}
                isAnimationActive={false}
              />
            ))}
            {ruleAt !== null && <ReferenceLine x={ruleAt} stroke="#94a3b8" strokeDasharray="4 3" />}
            {hovered.map(
              ({ line, point }) =>
                point && <ReferenceDot key={`${line.id}-hover`} x={point.x} y={point.y} r={4} fill={line.color} stroke="#fff" strokeWidth={1.5} />,
            )}
            <HoverLayer lines={lines} hoveredStep={hoveredStep} onHover={onHover} />
          </ComposedChart>
        </ResponsiveContainer>
      </div>
      <figcaption className="min-h-10 px-1 text-xs text-slate-600">
        {hoveredStep === null ? (
          <span className="text-slate-400">Hover a chart to read every panel at one step.</span>
        ) : (
          <span className="flex flex-wrap gap-x-3 gap-y-0.5">
            <span className="font-medium text-slate-700">step {hoveredStep}</span>
            {hovered.map(({ line, point }) => (
              <span key={line.id} className="inline-flex items-center gap-1 font-mono tabular-nums" data-series={line.label}>
                <span className="size-2 rounded-full" style={{ backgroundColor: line.color }} aria-hidden />
                <span className="max-w-48 truncate font-sans text-slate-500">{line.label}</span>
                {point ? (
                  <>
                    {formatValue(point.y)}
                    {"low" in point && (point as BandPoint).high > (point as BandPoint).low && (
                      <span className="text-slate-400">
                        [{formatValue((point as BandPoint).low)}, {formatValue((point as BandPoint).high)}]
                      </span>
                    )}
                    {x !== "step" && <span className="text-slate-400">@ {x === "time" ? formatDuration(point.x) : formatValue(point.x)}</span>}
                  </>
                ) : (
                  "—"
                )}
              </span>
            ))}
          </span>
        )}
      </figcaption>
    </figure>
  );
});
