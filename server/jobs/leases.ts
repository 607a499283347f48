/**
 * Leases: a worker holds its jobs while its heartbeats arrive. When they stop, its jobs go back to the queue, and
 * each run's log says what the server saw: a starved worker (late heartbeats; no loss counted) or a gone one.
 */
import { and, eq, inArray, lt, max, sql } from "drizzle-orm";
import { type Database, jobs, metricPoints, runLogs, runs, workers } from "../db";
import { serverEnv } from "../env";
import { notifyJobs } from "./notify";
import { inTransaction, moveJobs } from "./transitions";

export const LEASE_SECONDS = 20;

/** Losses allowed in a row: what the caller says, else TINKERLAB_MAX_WORKER_LOSSES (default 3). */
export type LossPolicy = { maxWorkerLosses?: number };

/** A worker whose heartbeats came this far apart within the minute before its lease ran out was starved, not gone. */
const STARVED_HEARTBEAT_MS = 5_000;
/** How long the longest wait between a worker's heartbeats is remembered (workers.lateMs, ./workers.ts). */
export const LATE_WINDOW_MS = 60_000;

/**
 * Workers whose heartbeat stopped lose their lease: marked dead, their jobs go back to the queue to resume. Each
 * run's log says which of two things the server saw: heartbeats that came ever later before they stopped (the
 * machine is too busy to run the worker: the loss does not count toward the run's limit, so a run starved by load
 * waits rather than fails), or heartbeats that simply stopped (the worker's process, machine or network is gone).
 */
export async function expireLeases(db: Database, now = new Date(), policy: LossPolicy = {}, graceMs = 0): Promise<string[]> {
  const cutoff = new Date(now.getTime() - LEASE_SECONDS * 1000 - graceMs);
  return inTransaction(db, async (tx) => {
    const dead = await tx
      .update(workers)
      .set({ status: "dead" })
      .where(and(eq(workers.status, "alive"), lt(workers.heartbeatAt, cutoff)))
      .returning({ id: workers.id, lateMs: workers.lateMs, lateAt: workers.lateAt, lagMs: workers.lagMs });
    const requeued: { id: string }[] = [];
    for (const worker of dead) {
      const recent = worker.lateAt !== null && worker.lateAt.getTime() >= now.getTime() - LEASE_SECONDS * 1000 - LATE_WINDOW_MS;
      const lateMs = Math.max(recent ? worker.lateMs : 0, worker.lagMs);
      const starved = lateMs >= STARVED_HEARTBEAT_MS;
      const why = starved
        ? `the machine starved worker ${worker.id}: its heartbeats came up to ${(lateMs / 1000).toFixed(1)} s late, then none for ${LEASE_SECONDS} s; this does not count as a loss`
        : `worker ${worker.id} stopped answering: no heartbeat for ${LEASE_SECONDS} s (its process, machine or network is gone)`;
      requeued.push(...(await requeueJobsOf(tx, [worker.id], why, policy, { countsAsLoss: !starved })));
    }
    return requeued.map((job) => job.id);
  });
}

/**
 * A worker leaving: it is marked gone, and jobs it still held go back to the queue. `why` says why it left; a
 * worker that was stopped or whose job process died counts as a loss of its jobs (a job that keeps crashing its
 * process ends failed, saying so).
 */
export async function leaveWorker(db: Database, workerId: string, why = "the worker left", policy: LossPolicy = {}) {
  await inTransaction(db, async (tx) => {
    await tx.update(workers).set({ status: "dead" }).where(eq(workers.id, workerId));
    await requeueJobsOf(tx, [workerId], why, policy, { countsAsLoss: true });
    await notifyJobs(tx, { freed: true });
  });
  return { ok: true };
}

/** A worker process on `hostname` ended (its parent saw it): each live worker it registered leaves, saying how. */
export async function workerProcessEnded(db: Database, input: { hostname: string; pid: number; how: string }) {
  const alive = await db
    .select({ id: workers.id })
    .from(workers)
    .where(and(eq(workers.hostname, input.hostname), eq(workers.pid, input.pid), eq(workers.status, "alive")));
  for (const { id } of alive) await leaveWorker(db, id, `worker ${id}'s process ${input.how}`);
}

/**
 * A heartbeat from a worker whose lease had run out: it was alive all along, only too slow to answer (a starved
 * machine, a stalled network). The loss counted against the jobs it was still running is taken back, and their
 * runs' logs say so.
 */
export async function forgiveStarvedLoss(db: Database, workerId: string, runningJobIds: string[]) {
  if (runningJobIds.length === 0) return;
  await inTransaction(db, async (tx) => {
    const forgiven = await tx
      .update(jobs)
      .set({ workerLosses: sql`greatest(${jobs.workerLosses} - 1, 0)`, lostWorkerId: null })
      .where(and(inArray(jobs.id, runningJobIds), eq(jobs.lostWorkerId, workerId)))
      .returning({ id: jobs.id, runId: jobs.runId });
    for (const job of forgiven) {
      if (!job.runId) continue;
      await tx.insert(runLogs).values({
        runId: job.runId,
        level: "info",
        message: `Worker ${workerId} was not gone but too slow to answer (the machine is busy): that loss no longer counts toward the limit.`,
      });
    }
  });
}

/**
 * The jobs of workers that are gone: each goes back to the queue to resume from its last checkpoint, unless it has
 * now lost its worker `maxWorkerLosses` times in a row without its run getting past the step of the loss before
 * (a job that kills its worker, or never gets a step done before its lease runs out, would otherwise loop
 * forever): that one fails, saying so. A loss that does not count (a starved worker) requeues the job and leaves
 * its count as it was. Returns the requeued jobs.
 */
async function requeueJobsOf(tx: Database, workerIds: string[], why: string, policy: LossPolicy, options: { countsAsLoss: boolean }) {
  const limit = policy.maxWorkerLosses ?? serverEnv().TINKERLAB_MAX_WORKER_LOSSES;
  const held = await tx
    .select({
      id: jobs.id,
      runId: jobs.runId,
      workerId: jobs.workerId,
      status: jobs.status,
      losses: jobs.workerLosses,
      lostAtStep: jobs.lostAtStep,
      step: runs.step,
    })
    .from(jobs)
    .leftJoin(runs, eq(runs.id, jobs.runId))
    .where(and(inArray(jobs.workerId, workerIds), inArray(jobs.status, ["placing", "running"])));
  const requeued: { id: string; runId: string | null }[] = [];
  for (const job of held) {
    const step = job.step ?? 0;
    // A job only placed on the worker never ran there: it goes back to the queue without counting a loss.
    const ran = job.status === "running";
    const counted = ran && options.countsAsLoss;
    const losses = !counted ? job.losses : job.lostAtStep !== null && step <= job.lostAtStep ? job.losses + 1 : 1;
    const lost = {
      workerId: null,
      deviceId: null,
      leaseExpiresAt: null,
      stopRequested: null,
      workerLosses: losses,
      lostAtStep: counted ? step : job.lostAtStep,
      lostWorkerId: counted ? job.workerId : null,
    };
    if (counted && losses >= limit) {
      // The run's step goes back when its job starts over, while the metrics of the steps it had reached stay.
      const [metrics] = job.runId
        ? await tx
            .select({ step: max(metricPoints.step) })
            .from(metricPoints)
            .where(eq(metricPoints.runId, job.runId))
        : [];
      const reached = Math.max(step, metrics?.step ?? 0);
      const reason = `lost its worker ${losses} times in a row without getting past step ${reached}; the last time, ${why}`;
      const finishedAt = new Date();
      const [failed] = await moveJobs(tx, "failed", eq(jobs.id, job.id), { job: { ...lost, reason, finishedAt }, run: { reason, finishedAt } });
      if (failed?.runId) await tx.insert(runLogs).values({ runId: failed.runId, level: "error", message: `Failed: ${reason}.` });
      continue;
    }
    const reason = `worker lost (${why}); resuming from the last checkpoint`;
    const [moved] = await moveJobs(tx, "queued", eq(jobs.id, job.id), { job: { ...lost, attempts: sql`${jobs.attempts} + 1` as unknown as number, reason } });
    if (!moved) continue;
    requeued.push(moved);
    if (moved.runId) {
      await tx.insert(runLogs).values({
        runId: moved.runId,
        level: "warn",
        message: !ran
          ? `Job ${moved.id} was placed on a worker that is gone (${why}) before it started there; requeued.`
          : counted
            ? `Worker lost: ${why}. Job ${moved.id} requeued to resume from its last checkpoint (${losses} of ${limit} losses in a row allowed before it fails).`
            : `Worker lost: ${why}. Job ${moved.id} requeued to resume from its last checkpoint.`,
      });
    }
  }
  return requeued;
}
