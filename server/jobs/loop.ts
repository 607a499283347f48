import type { Database } from "../db";
import type { SchedulingPolicy } from "../scheduler";
import { LEASE_SECONDS } from "./leases";
import { schedulerTick } from "./scheduling";

/**
 * Runs a scheduling pass every `intervalMs` (and at once when `wake` is called); returns a stop function.
 *
 * A server too busy to run its timers (a long request, a starved machine) could not read the heartbeats waiting
 * on its sockets either, and its next timer runs before it reads them: the pass would expire leases whose
 * heartbeats sit unread. So each pass gives leases the time this process lately spent unable to run its timers.
 */
export function startSchedulerLoop(db: Database, policy: SchedulingPolicy, options: { intervalMs?: number; onError?: (error: unknown) => void } = {}) {
  const intervalMs = options.intervalMs ?? 1000;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let stopped = false;
  const stalls = stallClock();
  const pass = async () => {
    if (running || stopped) return;
    running = true;
    try {
      await schedulerTick(db, policy, new Date(), { graceMs: stalls.recentMs() });
    } catch (error) {
      options.onError?.(error);
    } finally {
      running = false;
    }
  };
  let due = performance.now() + intervalMs;
  timer = setInterval(() => {
    stalls.record(performance.now() - due);
    due = performance.now() + intervalMs;
    void pass();
  }, intervalMs);
  void pass();
  return {
    wake: () => void pass(),
    stop() {
      stopped = true;
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/** Stalls worth counting: a timer this late means the process could not read its sockets either. */
const STALL_MS = 250;

/** This process's recent stalls: how late its timers ran, summed over the last lease (server/jobs/scheduling.ts). */
export function stallClock(windowMs = LEASE_SECONDS * 1000) {
  const stalls: { at: number; ms: number }[] = [];
  return {
    record(lateMs: number, at = performance.now()) {
      if (lateMs >= STALL_MS) stalls.push({ at, ms: lateMs });
    },
    recentMs(at = performance.now()) {
      while (stalls.length > 0 && stalls[0]!.at < at - windowMs) stalls.shift();
      return stalls.reduce((sum, stall) => sum + stall.ms, 0);
    },
  };
}
