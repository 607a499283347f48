/**
 * The messages between a worker's main thread and its job host (./job-host.ts), over the child process's IPC
 * channel with structured-clone serialization (dates and typed arrays travel as they are). The host reaches the
 * server only through the worker: each call of its channel is a `call` message answered by a `result`.
 */
import type { BackendPreference } from "../runtime";
import type { WorkerChannel } from "./channel";
import type { JobOutcome, JobSpec, StopReason } from "./run-job";

/** The channel operations a running job makes (the rest belong to the worker's loop). */
export const hostCalls = ["report", "checkpoint", "setAside", "sessionExchange"] as const;
type HostCall = (typeof hostCalls)[number];

/** A failure as it crosses the process boundary: its message, and its cause's (a database error's own words). */
export type CrossedError = { message: string; cause?: string };

export type WorkerMessage =
  | { type: "init"; backend: BackendPreference }
  | { type: "start"; jobId: string; workerId: string; spec: JobSpec; artifactsDir: string }
  | { type: "stop"; jobId: string; why: StopReason }
  | { type: "result"; id: number; value?: unknown; error?: CrossedError };

export type HostMessage =
  | { type: "ready"; backend: string; gpu: boolean }
  | { type: "call"; id: number; method: HostCall; input: unknown }
  | { type: "step"; jobId: string; step: number }
  | { type: "done"; jobId: string; outcome?: JobOutcome; error?: CrossedError };

export function crossedError(error: unknown): CrossedError {
  if (!(error instanceof Error)) return { message: String(error) };
  return { message: error.message, ...(error.cause instanceof Error ? { cause: error.cause.message } : {}) };
}

export function revivedError(crossed: CrossedError): Error {
  return new Error(crossed.message, crossed.cause ? { cause: new Error(crossed.cause) } : undefined);
}

/** The host's channel: each job call goes to the worker as a message and resolves with its answer. */
export function hostChannel(send: (message: HostMessage) => void): WorkerChannel & { settle(result: Extract<WorkerMessage, { type: "result" }>): void } {
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  const call =
    (method: HostCall) =>
    (input: unknown): Promise<never> =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        send({ type: "call", id, method, input });
      });
  const refuse = () => Promise.reject(new Error("the job host runs jobs; the worker's loop makes this call"));
  return {
    describe: "the worker's job host",
    register: refuse,
    heartbeat: refuse,
    claim: refuse,
    finish: refuse,
    leave: refuse,
    report: call("report"),
    checkpoint: call("checkpoint"),
    setAside: call("setAside"),
    sessionExchange: call("sessionExchange"),
    close: async () => {},
    settle({ id, value, error }) {
      const waiting = pending.get(id);
      if (!waiting) return;
      pending.delete(id);
      if (error) waiting.reject(revivedError(error));
      else waiting.resolve(value);
    },
  };
}
