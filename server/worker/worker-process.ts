/**
 * A worker: registers its device with the server, renews its lease by heartbeat, starts the jobs placed on it
 * and stops those the server asks it to. It holds no state the server does not also have: killed at any moment,
 * its jobs are requeued when its lease runs out and resume from their last checkpoint elsewhere.
 */
import os from "node:os";
import { initBackend, type BackendPreference } from "../runtime";
import { cpuDevice } from "../scheduler/resources";
import { runJob, type StopReason } from "./run-job";
import { createWorkerApi } from "./worker-api";

export type WorkerOptions = {
  serverUrl: string;
  token: string;
  artifactsDir: string;
  backend: BackendPreference;
  /** Share of the machine's memory this worker offers (local workers split the machine between them). */
  memoryShare?: number;
  heartbeatMs?: number;
  log?: (line: string) => void;
};

export async function runWorker(options: WorkerOptions): Promise<never> {
  const log = options.log ?? ((line: string) => console.log(`[worker ${process.pid}] ${line}`));
  const api = createWorkerApi(options.serverUrl, options.token);
  const backend = await initBackend({ prefer: options.backend });
  // One Node process computes on one thread: it offers one compute slot.
  const device = cpuDevice(`cpu:${os.hostname()}:${process.pid}`, os.totalmem() * (options.memoryShare ?? 1), 1);
  const { workerId } = await api.worker.register.mutate({
    hostname: os.hostname(),
    pid: process.pid,
    backend: backend.capabilities.backend,
    devices: [{ kind: "cpu", name: device.id, memoryMb: device.memoryMb, computeSlots: device.computeSlots }],
  });
  log(`registered as ${workerId} (backend ${backend.capabilities.backend}, ${device.memoryMb} MiB)`);

  const running = new Map<string, { step: number; stop: StopReason | null }>();
  const leave = async () => {
    await api.worker.leave.mutate({ workerId }).catch(() => {});
    process.exit(0);
  };
  process.once("SIGTERM", () => void leave());
  process.once("SIGINT", () => void leave());

  for (;;) {
    try {
      const { assignments, stops } = await api.worker.heartbeat.mutate({
        workerId,
        running: [...running.entries()].map(([jobId, job]) => ({ jobId, step: job.step })),
      });
      for (const { jobId, why } of stops) {
        const job = running.get(jobId);
        if (job && !job.stop) job.stop = why;
      }
      for (const jobId of assignments) {
        if (running.has(jobId)) continue;
        running.set(jobId, { step: 0, stop: null });
        void start(jobId);
      }
    } catch (error) {
      log(`heartbeat failed: ${error instanceof Error ? error.message : String(error)}`);
      if (error instanceof Error && /lost its lease/.test(error.message)) process.exit(3);
    }
    await new Promise((resolve) => setTimeout(resolve, options.heartbeatMs ?? 1000));
  }

  async function start(jobId: string) {
    const state = running.get(jobId)!;
    let outcome;
    try {
      const spec = await api.worker.claim.mutate({ workerId, jobId });
      log(`job ${jobId} (run ${spec.run.id}) started${spec.resume ? ` from step ${spec.resume.step}` : ""}`);
      outcome = await runJob({
        api,
        workerId,
        spec,
        artifactsDir: options.artifactsDir,
        stopRequested: () => state.stop,
        onStep: (step) => (state.step = step),
      });
    } catch (error) {
      outcome = { outcome: "failed" as const, reason: describeFailure(error) };
    }
    log(`job ${jobId} ${outcome.outcome}${outcome.reason ? `: ${outcome.reason}` : ""}`);
    await api.worker.finish.mutate({ workerId, jobId, ...outcome }).catch((error: unknown) => log(`could not report the end of ${jobId}: ${String(error)}`));
    running.delete(jobId);
  }
}

/** A failure in a few lines: the message (a database error's own cause, not the whole query), cut at 2,000 chars. */
function describeFailure(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : null;
  const message = cause ? cause.message : error instanceof Error ? error.message : String(error);
  return message.length > 2000 ? `${message.slice(0, 2000)}…` : message;
}
