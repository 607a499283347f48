"use client";

import { useSubscription } from "@trpc/tanstack-react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import type { SeriesPoint } from "./metric-chart";

/**
 * Every metric point of a run, as a live server-sent event stream (runs.metricStream). The stream's event ids are
 * sequence numbers: after a dropped connection the client resumes from the last one it saw, so the series has
 * no gap and no duplicate.
 */
export function useMetricStream(runId: string) {
  const trpc = useTRPC();
  const [series, setSeries] = useState<Map<string, SeriesPoint[]>>(new Map());
  const subscription = useSubscription(
    trpc.runs.metricStream.subscriptionOptions(
      { runId },
      {
        onData: ({ data: batch }) => {
          setSeries((previous) => {
            // Copy each touched series once, then append: earlier arrays stay as React last saw them.
            const next = new Map(previous);
            for (const { name, steps, values } of batch) {
              const list = [...(previous.get(name) ?? [])];
              for (let i = 0; i < steps.length; i++) list.push({ step: steps[i]!, value: values[i]! });
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
