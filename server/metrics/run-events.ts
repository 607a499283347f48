/**
 * Wake-ups for live streams: the worker API says "run R has new data" after each report, and the run's feed
 * (server/metrics/feed.ts) reads at once instead of at its next poll. Process-wide (on globalThis, so Next's bundles
 * and the server entry share one emitter). Feeds poll too, so a replica that did not take the report still
 * delivers within its poll interval.
 */
import { EventEmitter } from "node:events";

const holder = globalThis as typeof globalThis & { __tinkerlabRunEvents?: EventEmitter };
const emitter = (holder.__tinkerlabRunEvents ??= new EventEmitter().setMaxListeners(0));

/** The event every announcement also emits (a string, not a Symbol: Next's bundles and the server entry each load this module, and must agree). */
const ANY = "tinkerlab:any-run";

export function announceRunData(runId: string) {
  emitter.emit(runId);
  emitter.emit(ANY, runId);
}

/** Calls `listener` with the run's id whenever any run has new data; returns the function that stops it. */
export function onAnyRunData(listener: (runId: string) => void): () => void {
  emitter.on(ANY, listener);
  return () => emitter.off(ANY, listener);
}

/** Calls `listener` whenever the run has new data; returns the function that stops it. */
export function onRunData(runId: string, listener: () => void): () => void {
  emitter.on(runId, listener);
  return () => emitter.off(runId, listener);
}
