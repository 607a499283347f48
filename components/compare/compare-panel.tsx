"use client";

import { type KeyboardEvent, memo, type MouseEvent, useMemo } from "react";
import {
  CartesianGrid,
  ComposedChart,
  ReferenceDot,
  ReferenceLine,
  ResponsiveContainer,
  usePlotArea,
  useXAxisInverseScale,
  useXAxisScale,
  useYAxisScale,
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
  const steps = useMemo(() => [...new Set(lines.flatMap((line) => line.points.map((p) => p.step)))].sort((a, b) => a - b), [lines]);
  if (!plot || !invert) return null;
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

/** A pixel coordinate to a tenth of a pixel: what an SVG path needs, in a short string. */
const px = (value: number | undefined) => Math.round((value ?? 0) * 10) / 10;

/** A line through points as an SVG path in the chart's scales. */
function linePath(points: readonly { x: number; y: number }[], scaleX: (v: number) => number | undefined, scaleY: (v: number) => number | undefined) {
  let d = "";
  for (let i = 0; i < points.length; i++) d += `${i === 0 ? "M" : "L"}${px(scaleX(points[i]!.x))},${px(scaleY(points[i]!.y))}`;
  return d;
}

/** A band (a group's low to high) as a closed SVG path: along the highs, back along the lows. */
function bandPath(points: readonly BandPoint[], scaleX: (v: number) => number | undefined, scaleY: (v: number) => number | undefined) {
  if (points.length === 0) return "";
  let d = "";
  for (let i = 0; i < points.length; i++) d += `${i === 0 ? "M" : "L"}${px(scaleX(points[i]!.x))},${px(scaleY(points[i]!.high))}`;
  for (let i = points.length - 1; i >= 0; i--) d += `L${px(scaleX(points[i]!.x))},${px(scaleY(points[i]!.low))}`;
  return `${d}Z`;
}

/**
 * Every line of a panel (and a group's band, and a few runs' raw curves behind), each one SVG path in the chart's
 * own scales. Recharts' <Line> registers each line's data in the chart's store and recomputes the chart's selectors
 * on every registration: ten lines of 500 points took most of the compare view's first render. Drawn here, the
 * paths cost one pass; the axes, grid, hover rule and dots stay Recharts'.
 */
function Curves({ lines }: { lines: DrawnLine[] }) {
  const scaleX = useXAxisScale();
  const scaleY = useYAxisScale();
  const paths = useMemo(() => {
    if (!scaleX || !scaleY) return null;
    const x = (v: number) => scaleX(v);
    const y = (v: number) => scaleY(v);
    return lines.map((line) => ({
      line,
      band: line.band ? bandPath(line.points as BandPoint[], x, y) : null,
      raw: line.raw ? linePath(line.raw, x, y) : null,
      curve: linePath(line.points, x, y),
      dots: line.points.length < 30 ? line.points.map((p) => [px(x(p.x)), px(y(p.y))] as const) : [],
    }));
  }, [lines, scaleX, scaleY]);
  if (!paths) return null;
  return (
    <g className="compare-curves">
      {paths.map(
        ({ line, band }) => band && <path key={`${line.id}-band`} className="compare-band" d={band} fill={line.color} fillOpacity={0.18} stroke="none" />,
      )}
      {paths.map(
        ({ line, raw }) =>
          raw && <path key={`${line.id}-raw`} className="compare-raw" d={raw} fill="none" stroke={line.color} strokeOpacity={0.2} strokeWidth={1} />,
      )}
      {paths.map(({ line, curve, dots }) => (
        <g key={line.id} data-line={line.label}>
          <path className="compare-line" d={curve} fill="none" stroke={line.color} strokeWidth={1.75} strokeLinejoin="round" strokeLinecap="round" />
          {dots.map(([cx, cy], i) => (
            <circle key={i} cx={cx} cy={cy} r={2.5} fill="#fff" stroke={line.color} strokeWidth={1} />
          ))}
        </g>
      ))}
    </g>
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
  // The axes depend on the lines alone: a hover (which re-renders every panel) leaves them as they are.
  const xAxis = useMemo(() => xScale(x, lines), [x, lines]);
  const yAxis = useMemo(
    () => valueAxis(lines.flatMap((line) => [...line.points.flatMap((p) => ("low" in p ? [p.low, p.high, p.y] : [p.y])), ...(line.raw ?? []).map((p) => p.y)])),
    [lines],
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
              allowDataOverflow
              // Every tick given is drawn: the axes' own ticks are few and round, and Recharts measures each label
              // in the DOM to thin them otherwise (a tenth of the panels' first render).
              interval={0}
              tick={{ fontSize: 11 }}
              label={{ value: xAxisName(x), position: "insideBottomRight", offset: -12, fontSize: 11, fill: "#64748b" }}
            />
            <YAxis
              allowDataOverflow
              interval={0}
              tick={{ fontSize: 11 }}
              domain={yAxis.domain}
              ticks={yAxis.ticks}
              tickFormatter={yAxis.format}
              width={yWidth}
            />
            <Curves lines={drawn} />
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
