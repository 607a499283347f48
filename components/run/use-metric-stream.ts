"use client";

import { useSubscription } from "@trpc/tanstack-react-query";
import { useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import type { SeriesPoint } from "./metric-chart";

/** A point with its wall time, in seconds since the run's first point. */
export type TimedPoint = SeriesPoint & { time: number };

/**
 * Every metric point of a run, as a live server-sent event stream (runs.metricStream). The stream's event ids are
 * sequence numbers: after a dropped connection the client resumes from the last one it saw, so the series has
 * no gap and no duplicate.
 */
export function useMetricStream(runId: string) {
  const trpc = useTRPC();
  const [series, setSeries] = useState<Map<string, TimedPoint[]>>(new Map());
  // The wall time of the run's first point: times are seconds from it. A ref, as onData may be a stale closure.
  const origin = useRef<number | null>(null);
  const subscription = useSubscription(
    trpc.runs.metricStream.subscriptionOptions(
      { runId },
      {
        onData: ({ data: batch }) => {
          const first = Math.min(...batch.map((b) => b.wallTimes[0] ?? Infinity));
          origin.current ??= Number.isFinite(first) ? first : 0;
          const start = origin.current;
          setSeries((previous) => {
            // Copy each touched series once, then append: earlier arrays stay as React last saw them.
            const next = new Map(previous);
            for (const { name, steps, values, wallTimes } of batch) {
              const list = [...(previous.get(name) ?? [])];
              for (let i = 0; i < steps.length; i++) list.push({ step: steps[i]!, value: values[i]!, time: (wallTimes[i]! - start) / 1000 });
              next.set(name, list);
            }
            return next;
          });
        },
      },
    ),
  );
  return { series, error: subscription.error?.message ?? null, status: subscription.status };
}
