"use client";

import { useEffect, useRef, useState } from "react";
import { useTRPCClient } from "@/components/trpc/provider";
import type { SeriesPoint } from "./metric-chart";

/**
 * Every metric point of a run, fetched incrementally: each poll asks only for points after the last sequence
 * number it has, so a reconnect resumes where it left off, with no gap and no duplicate.
 */
export function useMetricStream(runId: string, live: boolean, intervalMs = 1500) {
  const client = useTRPCClient();
  const [series, setSeries] = useState<Map<string, SeriesPoint[]>>(new Map());
  const lastSeq = useRef(0);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        for (;;) {
          const { points, lastSeq: seq } = await client.runs.metrics.query({ runId, afterSeq: lastSeq.current });
          if (cancelled) return;
          if (points.length > 0) {
            lastSeq.current = seq;
            setSeries((previous) => {
              // Copy each touched series once, then append: earlier arrays stay as React last saw them.
              const next = new Map(previous);
              const copied = new Set<string>();
              for (const p of points) {
                if (!copied.has(p.name)) {
                  next.set(p.name, [...(previous.get(p.name) ?? [])]);
                  copied.add(p.name);
                }
                next.get(p.name)!.push({ step: p.step, value: p.value });
              }
              return next;
            });
          }
          setError(null);
          if (points.length < 50_000) break; // a full page means more are waiting
        }
      } catch (e) {
        setError(e instanceof Error ? e.message : String(e));
      }
      if (!cancelled && live) timer = setTimeout(poll, intervalMs);
    };
    void poll();
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [client, runId, live, intervalMs]);

  return { series, error };
}
