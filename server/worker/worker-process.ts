/**
 * A worker: registers its device, renews its lease by heartbeat, starts the jobs placed on it and stops those it
 * is asked to. Its jobs compute in child processes, job hosts (./job-host.ts), so that nothing they do delays a
 * heartbeat: this process's main thread only talks to the server. It reaches the scheduler through a `WorkerChannel` (./channel.ts): the server over HTTP, or
 * PostgreSQL directly, in which case it also runs scheduling passes itself, woken by NOTIFY. It holds no state the
 * database does not also have: killed at any moment, its jobs are requeued when its lease runs out and resume from
 * their last checkpoint elsewhere.
 */
import os from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { BackendPreference } from "../runtime";
import type { WorkerChannel } from "./channel";
import { workerDevice } from "./devices";
import { hostKey, type JobHost, JobHostExit, JobHosts, startJobHost } from "./host-process";
import type { JobOutcome, StopReason } from "./run-job";

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
  let current: { workerId: string; hosts: JobHosts } | null = null;
  const leave = async () => {
    current?.hosts.killAll();
    if (current) await channel.leave(current.workerId, "the worker was stopped").catch(() => {});
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

  // A job host that dies takes the worker's jobs with it: they go back to the queue, saying why, and new hosts take over.
  for (;;) {
    const hosts = new JobHosts(() => startJobHost({ channel, backend: options.backend, log }));
    let backend: { backend: string; gpu: boolean };
    try {
      backend = await hosts.first.ready;
    } catch (error) {
      throw new Error(`the worker's job process could not start: ${error instanceof Error ? error.message : String(error)}`);
    }
    // The machine's share this worker offers (local workers split the machine between them): its memory and one
    // compute slot per core, or the GPU the backend computes on. Jobs placed side by side compute in hosts of
    // their own, one per base they load (JobHosts), so the system shares the cores between them.
    const device = workerDevice({
      id: `${backend.gpu ? "gpu" : "cpu"}:${os.hostname()}:${process.pid}`,
      gpu: backend.gpu,
      share: options.memoryShare ?? 1,
      slots: options.computeSlots,
    });
    const { workerId } = await channel.register({ hostname: os.hostname(), pid: process.pid, backend: backend.backend, devices: [device] });
    current = { workerId, hosts };
    log(
      `registered as ${workerId} with ${channel.describe} (backend ${backend.backend}, ${device.kind} ${device.memoryMb} MiB, ${device.computeSlots} slot${device.computeSlots === 1 ? "" : "s"}; jobs compute in child processes, the first ${hosts.first.pid})`,
    );
    const why = await serve(workerId, hosts);
    hosts.killAll();
    log(`${why}; its jobs go back to the queue and a new job process starts`);
    await channel.leave(workerId, why).catch((error: unknown) => log(`could not hand back its jobs: ${String(error)}`));
  }

  /** Heartbeats, job starts and stops for one registration, until its job host exits or its lease is lost; says which. */
  async function serve(workerId: string, hosts: JobHosts): Promise<string> {
    const running = new Map<string, { stop: StopReason | null; host: JobHost | null }>();
    let ended: string | null = null;
    // Woken early by a NOTIFY (database workers), a job's end or a host's exit; otherwise a heartbeat every
    // second and a pass every `pollMs`.
    let wakeUp: (() => void) | null = null;
    let passWanted = true;
    hosts.onExit((exit) => {
      ended ??= exit.message;
      wakeUp?.();
    });
    await channel.listen?.(workerId, (why) => {
      if (why === "changed") passWanted = true;
      wakeUp?.();
    });
    let lastPass = 0;
    const pollMs = options.pollMs ?? 5_000;
    const heartbeatMs = options.heartbeatMs ?? 1000;
    // How late this thread runs its timers: the heartbeat says so, and the server tells a starved worker from a dead one.
    const delay = monitorEventLoopDelay({ resolution: 20 });
    delay.enable();

    while (!ended) {
      if (channel.schedule && (passWanted || Date.now() - lastPass >= pollMs)) {
        passWanted = false;
        lastPass = Date.now();
        // A failed pass must not cost the lease: the heartbeat below still goes out.
        await channel.schedule().catch((error: unknown) => log(`scheduling pass failed: ${error instanceof Error ? error.message : String(error)}`));
      }
      try {
        const lagMs = Math.round(delay.max / 1e6);
        delay.reset();
        const { assignments, stops } = await channel.heartbeat(workerId, { lagMs, running: [...running.keys()] });
        for (const { jobId, why } of stops) {
          const job = running.get(jobId);
          if (job && !job.stop) {
            job.stop = why;
            job.host?.stop(jobId, why);
          }
        }
        for (const jobId of assignments) {
          if (running.has(jobId)) continue;
          running.set(jobId, { stop: null, host: null });
          void start(jobId);
        }
      } catch (error) {
        log(`heartbeat failed: ${error instanceof Error ? error.message : String(error)}`);
        // The server gave this worker's jobs to others: those still computing here must stop, and it starts anew.
        if (error instanceof Error && /lost its lease/.test(error.message)) ended = "this worker lost its lease";
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, heartbeatMs);
        function done() {
          clearTimeout(timer);
          wakeUp = null;
          resolve();
        }
        wakeUp = done;
      });
    }
    delay.disable();
    return ended;

    async function start(jobId: string) {
      let outcome: JobOutcome;
      const key = { current: null as string | null };
      try {
        const spec = await channel.claim(workerId, jobId);
        key.current = hostKey(jobId, spec);
        const host = await hosts.take(key.current);
        const job = running.get(jobId);
        if (job) {
          job.host = host;
          // A stop that came while its host was starting.
          if (job.stop) host.stop(jobId, job.stop);
        }
        log(`job ${jobId} (run ${spec.run.id}) started${spec.resume ? ` from step ${spec.resume.step}` : ""} in process ${host.pid}`);
        outcome = await host.run({ jobId, workerId, spec, artifactsDir: options.artifactsDir });
      } catch (error) {
        // The host died with the job: the worker hands its jobs back together (above), not one by one.
        if (error instanceof JobHostExit) return;
        outcome = { outcome: "failed", reason: describeFailure(error) };
      } finally {
        if (key.current !== null) hosts.release(key.current);
      }
      log(`job ${jobId} ${outcome.outcome}${outcome.reason ? `: ${outcome.reason}` : ""}`);
      await channel.finish({ workerId, jobId, ...outcome }).catch((error: unknown) => log(`could not report the end of ${jobId}: ${String(error)}`));
      running.delete(jobId);
      // The device is free: look for the next job now rather than at the next poll.
      passWanted = true;
      wakeUp?.();
    }
  }
}

/** A failure in a few lines: the message (a database error's own cause, not the whole query), cut at 2,000 chars. */
function describeFailure(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : null;
  const message = cause ? cause.message : error instanceof Error ? error.message : String(error);
  return message.length > 2000 ? `${message.slice(0, 2000)}…` : message;
}
