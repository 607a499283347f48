"use client";

import { useSubscription } from "@trpc/tanstack-react-query";
import { useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { downsample, type SeriesPoint } from "./metric-chart";

/** A point with its wall time, in seconds since the run's first point. */
export type TimedPoint = SeriesPoint & { time: number };

/** A series as the page holds it: points to draw (at most KEEP × 2, min/max buckets of older ones) and the true count. */
export type LiveSeries = { points: TimedPoint[]; count: number };

/** Past this many points a series is folded into min/max buckets, so a page left open for days stays light. */
const KEEP = 2000;

/**
 * Every metric point of a run, as a live server-sent event stream (runs.metricStream). The first event is the
 * run's history as a summary (each series downsampled to its minima and maxima, with its true count); after it,
 * every new point. Event ids are sequence numbers: after a dropped connection the client resumes from the last
 * one it saw, so the series has no gap and no duplicate.
 */
export function useMetricStream(runId: string) {
  const trpc = useTRPC();
  const [series, setSeries] = useState<Map<string, LiveSeries>>(new Map());
  // The wall time of the run's first point: times are seconds from it. A ref, as onData may be a stale closure.
  const origin = useRef<number | null>(null);
  const subscription = useSubscription(
    trpc.runs.metricStream.subscriptionOptions(
      { runId },
      {
        onData: ({ data: event }) => {
          const first = Math.min(...event.series.map((b) => b.wallTimes[0] ?? Infinity));
          if (event.summary) origin.current = null;
          origin.current ??= Number.isFinite(first) ? first : 0;
          const start = origin.current;
          setSeries((previous) => {
            // A summary stands for everything so far; other events append. Touched series are new arrays.
            const next = event.summary ? new Map<string, LiveSeries>() : new Map(previous);
            for (const { name, steps, values, wallTimes } of event.series) {
              const before = event.summary ? undefined : previous.get(name);
              let points = before ? [...before.points] : [];
              for (let i = 0; i < steps.length; i++) points.push({ step: steps[i]!, value: values[i]!, time: (wallTimes[i]! - start) / 1000 });
              if (points.length > 2 * KEEP) points = downsample(points, KEEP);
              next.set(name, { points, count: event.summary ? (event.summary.counts[name] ?? steps.length) : (before?.count ?? 0) + steps.length });
            }
            return next;
          });
        },
      },
    ),
  );
  return { series, error: subscription.error?.message ?? null, status: subscription.status };
}
