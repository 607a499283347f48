"use client";

import { useEffect, useRef, useState } from "react";
import { useTRPCClient } from "@/components/trpc/provider";
import type { AppRouter } from "@/server/api";
import type { inferRouterOutputs } from "@trpc/server";
import type { ProtocolName } from "@/lib/sdk/protocol";

type ValidationReport = inferRouterOutputs<AppRouter>["experiments"]["validate"];

export type LiveValidation =
  | { state: "idle"; report: null; error: null }
  | { state: "pending" | "running"; report: ValidationReport | null; error: null }
  | { state: "done"; report: ValidationReport; error: null }
  | { state: "failed"; report: ValidationReport | null; error: string };

/**
 * How long to wait before asking again when the server said it is busy or the caller is over its validation limit
 * (TOO_MANY_REQUESTS, with the seconds to wait in the error's `data.retryAfterS`), in ms; null for any other error.
 */
export function retryDelayMs(error: unknown): number | null {
  const data = (error as { data?: { code?: unknown; retryAfterS?: unknown } } | null)?.data;
  if (data?.code !== "TOO_MANY_REQUESTS") return null;
  const seconds = typeof data.retryAfterS === "number" && Number.isFinite(data.retryAfterS) ? data.retryAfterS : 1;
  return Math.min(60, Math.max(1, seconds)) * 1000;
}

/** A config's protocol when it names several agents well enough to play them, else null. */
function severalAgents(protocol: unknown): { name: ProtocolName; agents: string[] } | null {
  const { name, agents } = (protocol ?? {}) as { name?: unknown; agents?: unknown };
  if (name !== "turn-based" && name !== "simultaneous") return null;
  if (!Array.isArray(agents) || agents.length < 2 || !agents.every((a) => typeof a === "string" && a.length > 0 && a.length <= 64)) return null;
  return { name, agents: agents as string[] };
}

/**
 * Validates the source `delayMs` after the last edit (compile, type-check, sandbox dry-run). Only the answer for
 * the newest source is kept: an answer that arrives after a later edit would point at lines that have moved.
 */
export function useLiveValidation(
  /** null: the caller may not validate (a viewer), so nothing is asked. */
  experimentId: string | null,
  files: Record<string, string>,
  context: { base?: unknown; maxTokens?: unknown; protocol?: unknown } = {},
  delayMs = 800,
) {
  const client = useTRPCClient();
  const [status, setStatus] = useState<LiveValidation>({ state: "idle", report: null, error: null });
  const latest = useRef(0);
  const key = JSON.stringify(files);
  // The base and the reply's length decide whether the first prompt fits: a change to either validates again.
  const base = typeof context.base === "string" ? context.base : undefined;
  const maxTokens = typeof context.maxTokens === "number" ? context.maxTokens : undefined;
  // Several agents are played as the config names them (its errors are the config form's to show); one agent as before.
  const protocolKey = JSON.stringify(severalAgents(context.protocol) ?? null);

  const run = async (ticket: number) => {
    if (experimentId === null) return;
    setStatus((s) => ({ state: "running", report: s.report, error: null }));
    try {
      const protocol = JSON.parse(protocolKey) as { name: ProtocolName; agents: string[] } | null;
      const report = await client.experiments.validate.mutate({
        experimentId,
        files: JSON.parse(key) as Record<string, string>,
        base,
        maxTokens,
        ...(protocol ? { protocol } : {}),
      });
      if (ticket === latest.current) setStatus({ state: "done", report, error: null });
    } catch (error) {
      if (ticket !== latest.current) return;
      // A busy server or a spent limit says when to ask again: the same source is validated then, unless edited meanwhile.
      const wait = retryDelayMs(error);
      const message = (error as Error).message;
      setStatus((s) => ({ state: "failed", report: s.report, error: wait === null ? message : `${message} (validating again in ${wait / 1000} s)` }));
      if (wait !== null) setTimeout(() => ticket === latest.current && void run(ticket), wait);
    }
  };

  // biome-ignore lint/correctness/useExhaustiveDependencies: `run` reads only `key` and stable refs
  useEffect(() => {
    const ticket = ++latest.current;
    if (experimentId === null || Object.keys(JSON.parse(key)).length === 0) {
      setStatus({ state: "idle", report: null, error: null });
      return;
    }
    setStatus((s) => ({ state: "pending", report: s.report, error: null }));
    const timer = setTimeout(() => void run(ticket), delayMs);
    return () => clearTimeout(timer);
  }, [key, base, maxTokens, protocolKey, delayMs]);

  /** Validates now, without waiting for the debounce. */
  const validateNow = () => {
    if (Object.keys(files).length === 0) return;
    void run(++latest.current);
  };

  return { ...status, validateNow };
}
