import type { Database } from "../db";
import type { SchedulingPolicy } from "../scheduler";
import { schedulerTick } from "./scheduling";

/** Runs a scheduling pass every `intervalMs` (and at once when `wake` is called); returns a stop function. */
export function startSchedulerLoop(db: Database, policy: SchedulingPolicy, options: { intervalMs?: number; onError?: (error: unknown) => void } = {}) {
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let stopped = false;
  const pass = async () => {
    if (running || stopped) return;
    running = true;
    try {
      await schedulerTick(db, policy);
    } catch (error) {
      options.onError?.(error);
    } finally {
      running = false;
    }
  };
  timer = setInterval(() => void pass(), options.intervalMs ?? 1000);
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
