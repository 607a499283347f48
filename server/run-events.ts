/**
 * Wake-ups for live streams: the worker API says "run R has new data" after each report, and every open stream of
 * R queries the database at once instead of at its next poll. Process-wide (on globalThis, so Next's bundles and
 * the server entry share one emitter). Streams poll too, so a replica that did not take the report still
 * delivers within its poll interval.
 */
import { EventEmitter } from "node:events";

const holder = globalThis as typeof globalThis & { __tinkerlabRunEvents?: EventEmitter; __tinkerlabRunGenerations?: Map<string, number> };
const emitter = (holder.__tinkerlabRunEvents ??= new EventEmitter().setMaxListeners(0));
const generations = (holder.__tinkerlabRunGenerations ??= new Map());

export function announceRunData(runId: string) {
  generations.set(runId, (generations.get(runId) ?? 0) + 1);
  emitter.emit(runId);
}

/** Bumped by every announcement: a cached read of the run taken under an older generation may be stale. */
export function runDataGeneration(runId: string): number {
  return generations.get(runId) ?? 0;
}

/** Resolves when the run has new data, after `timeoutMs`, or when `signal` aborts, whichever comes first. */
export function waitForRunData(runId: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      emitter.off(runId, done);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    emitter.once(runId, done);
    signal?.addEventListener("abort", done, { once: true });
  });
}
