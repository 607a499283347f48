"use client";

import { useSubscription } from "@trpc/tanstack-react-query";
import { useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import type { FeedEvent } from "@/lib/series";
import { downsample, type SeriesPoint } from "@/lib/series";

/** A point with its wall time, in seconds since the run's first point. */
type TimedPoint = SeriesPoint & { time: number };

/** A series as the page holds it: points to draw (at most KEEP × 2, min/max buckets of older ones) and the true count. */
export type LiveSeries = { points: TimedPoint[]; count: number };

/** The stream's first event, rendered with the page's HTML: the history up to event `id`. */
export type InitialMetrics = { id: string; event: FeedEvent } | null;

/** Past this many points a series is folded into min/max buckets, so a page left open for days stays light. */
const KEEP = 2000;

/**
 * One event applied to the series: a summary stands for everything up to it (it replaces what was there), other
 * events append. Touched series get new arrays; the rest stay as React last saw them.
 */
function apply(previous: Map<string, LiveSeries>, event: FeedEvent, origin: number): Map<string, LiveSeries> {
  const next = event.summary ? new Map<string, LiveSeries>() : new Map(previous);
  for (const { name, steps, values, wallTimes } of event.series) {
    const before = event.summary ? undefined : previous.get(name);
    let points = before ? [...before.points] : [];
    for (let i = 0; i < steps.length; i++) points.push({ step: steps[i]!, value: values[i]!, time: (wallTimes[i]! - origin) / 1000 });
    if (points.length > 2 * KEEP) points = downsample(points, KEEP);
    next.set(name, { points, count: event.summary ? (event.summary.counts[name] ?? steps.length) : (before?.count ?? 0) + steps.length });
  }
  return next;
}

const firstWallTime = (event: FeedEvent) => {
  const first = Math.min(...event.series.map((b) => b.wallTimes[0] ?? Infinity));
  return Number.isFinite(first) ? first : null;
};

/**
 * Every metric point of a run, as a live server-sent event stream (runs.metricStream). The first event is the
 * run's history as a summary (each series downsampled to its minima and maxima, with its true count), unless the
 * page brought it as `initial`; after it, every new point. Event ids are sequence numbers: after a dropped
 * connection the client resumes from the last one it saw, so the series has no gap and no duplicate.
 */
export function useMetricStream(runId: string, initial: InitialMetrics = null) {
  const trpc = useTRPC();
  // The wall time of the run's first point: times are seconds from it. A ref, as onData may be a stale closure.
  const origin = useRef<number | null>(initial ? firstWallTime(initial.event) : null);
  const [series, setSeries] = useState<Map<string, LiveSeries>>(() => (initial ? apply(new Map(), initial.event, origin.current ?? 0) : new Map()));
  const subscription = useSubscription(
    trpc.runs.metricStream.subscriptionOptions(
      { runId, lastEventId: initial?.id ?? null },
      {
        onData: ({ data: event }) => {
          if (event.summary) origin.current = null;
          origin.current ??= firstWallTime(event) ?? 0;
          const start = origin.current;
          setSeries((previous) => apply(previous, event, start));
        },
      },
    ),
  );
  // origin: the wall time (ms) that the points' `time` counts from, so points fetched later line up with them.
  return { series, origin: origin.current, error: subscription.error?.message ?? null, status: subscription.status };
}
