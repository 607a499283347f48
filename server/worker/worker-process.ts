/**
 * A worker: registers its device, renews its lease by heartbeat, starts the jobs placed on it and stops those it
 * is asked to. It reaches the scheduler through a `WorkerChannel` (./channel.ts): the server over HTTP, or
 * PostgreSQL directly, in which case it also runs scheduling passes itself, woken by NOTIFY. It holds no state the
 * database does not also have: killed at any moment, its jobs are requeued when its lease runs out and resume from
 * their last checkpoint elsewhere.
 */
import os from "node:os";
import { initBackend, type BackendPreference } from "../runtime";
import { missingRolloutFlags, startedMarkingOnMainThread } from "./gc";
import type { WorkerChannel } from "./channel";
import { workerDevice } from "./devices";
import { runJob, type StopReason } from "./run-job";

export type WorkerOptions = {
  channel: WorkerChannel;
  artifactsDir: string;
  backend: BackendPreference;
  /** Share of the machine's memory and cores this worker offers (local workers split the machine between them). */
  memoryShare?: number;
  /** Compute slots to offer (jobs at once); default one per core of its share, at least one. */
  computeSlots?: number;
  heartbeatMs?: number;
  /**
   * Leave when standard input closes: a local worker's stdin is a pipe from the server that started it, closed by
   * the system when that server exits, however it exits (a SIGKILLed server leaves no one to send SIGTERM).
   */
  exitWithParent?: boolean;
  /** A database worker's scheduling pass when no NOTIFY came (the fallback poll). */
  pollMs?: number;
  log?: (line: string) => void;
};

export async function runWorker(options: WorkerOptions): Promise<never> {
  const log = options.log ?? ((line: string) => console.log(`[worker ${process.pid}] ${line}`));
  const { channel } = options;
  // On fewer than three cores V8 should mark on this thread only, leaving the other core to a custom
  // environment's sandbox (./gc.ts): local workers are started so; one started by hand is told how.
  const mainThreadGc = startedMarkingOnMainThread();
  const missingFlags = missingRolloutFlags();
  if (missingFlags.length > 0) {
    log(
      `this machine has ${os.availableParallelism()} cores: start the worker with \`npx tsx ${missingFlags.join(" ")} bin/tinkerlab.ts worker\` ` +
        "so that V8's garbage collection leaves a core to a custom environment's sandbox during rollouts (docs/SANDBOX.md)",
    );
  }
  const backend = await initBackend({ prefer: options.backend });
  // The machine's share this worker offers (local workers split the machine between them): its memory and one
  // compute slot per core, or the GPU the backend computes on. Jobs placed side by side run here together, taking
  // turns a step at a time on this thread, and LoRA jobs on one base share its weights in memory (./base-models.ts).
  const device = workerDevice({
    id: `${backend.capabilities.gpu ? "gpu" : "cpu"}:${os.hostname()}:${process.pid}`,
    gpu: backend.capabilities.gpu,
    share: options.memoryShare ?? 1,
    slots: options.computeSlots,
  });
  const { workerId } = await channel.register({
    hostname: os.hostname(),
    pid: process.pid,
    backend: backend.capabilities.backend,
    devices: [device],
  });
  log(
    `registered as ${workerId} with ${channel.describe} (backend ${backend.capabilities.backend}, ${device.kind} ${device.memoryMb} MiB, ${device.computeSlots} slot${device.computeSlots === 1 ? "" : "s"}${mainThreadGc ? ", garbage collection marked on the main thread" : ""})`,
  );

  const running = new Map<string, { step: number; stop: StopReason | null }>();
  const leave = async () => {
    await channel.leave(workerId).catch(() => {});
    await channel.close().catch(() => {});
    process.exit(0);
  };
  process.once("SIGTERM", () => void leave());
  process.once("SIGINT", () => void leave());
  if (options.exitWithParent) {
    const parentGone = () => {
      log("the server that started this worker is gone; leaving");
      void leave();
    };
    process.stdin.once("end", parentGone).once("close", parentGone).once("error", parentGone);
    process.stdin.resume(); // read (and drop) whatever comes, so that the end is seen
  }

  // Woken early by a NOTIFY (database workers); otherwise a heartbeat every second and a pass every `pollMs`.
  let wakeUp: (() => void) | null = null;
  let passWanted = true;
  await channel.listen?.(workerId, (why) => {
    if (why === "changed") passWanted = true;
    wakeUp?.();
  });
  let lastPass = 0;
  const pollMs = options.pollMs ?? 5_000;

  for (;;) {
    if (channel.schedule && (passWanted || Date.now() - lastPass >= pollMs)) {
      passWanted = false;
      lastPass = Date.now();
      // A failed pass must not cost the lease: the heartbeat below still goes out.
      await channel.schedule().catch((error: unknown) => log(`scheduling pass failed: ${error instanceof Error ? error.message : String(error)}`));
    }
    try {
      const { assignments, stops } = await channel.heartbeat(workerId);
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
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, options.heartbeatMs ?? 1000);
      function done() {
        clearTimeout(timer);
        wakeUp = null;
        resolve();
      }
      wakeUp = done;
    });
  }

  async function start(jobId: string) {
    const state = running.get(jobId)!;
    let outcome;
    try {
      const spec = await channel.claim(workerId, jobId);
      log(`job ${jobId} (run ${spec.run.id}) started${spec.resume ? ` from step ${spec.resume.step}` : ""}`);
      outcome = await runJob({
        channel,
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
    await channel.finish({ workerId, jobId, ...outcome }).catch((error: unknown) => log(`could not report the end of ${jobId}: ${String(error)}`));
    running.delete(jobId);
    // The device is free: look for the next job now rather than at the next poll.
    passWanted = true;
    wakeUp?.();
  }
}

/** A failure in a few lines: the message (a database error's own cause, not the whole query), cut at 2,000 chars. */
function describeFailure(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : null;
  const message = cause ? cause.message : error instanceof Error ? error.message : String(error);
  return message.length > 2000 ? `${message.slice(0, 2000)}…` : message;
}
