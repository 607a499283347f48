/**
 * The scheduler as a service over the database: jobs are rows, workers hold leases renewed by heartbeats, and
 * each pass carries out the placement policy's decisions. The same `SchedulingPolicy` runs here and in the
 * simulator. Any process may run a pass (the server every second, a `tinkerlab worker` started with DATABASE_URL
 * when woken): a pass is one transaction that takes a transaction-level advisory lock (passes see each other's
 * placements, so two never fill one device twice), reads the queue `FOR UPDATE SKIP LOCKED` (it never waits on a
 * job a user is cancelling or a worker is finishing), and changes state with conditional UPDATEs
 * (`… where status = 'queued'`). Placements, new jobs and freed devices are announced with NOTIFY on
 * `JOBS_CHANNEL`, which database workers LISTEN to.
 */
import { and, eq, inArray, isNull, lt, sql } from "drizzle-orm";
import type { Database } from "../db";
import { newId } from "../db/ids";
import { checkpoints, devices, jobs, runLogs, runs, workers } from "../db/schema";
import { describeDevice, slotsInUseByUser, type ClusterState, type RunningJob, type SchedulingPolicy } from "./policy";
import { checkEverFits, estimateFootprint, type DeviceCapacity, type JobResourceSpec } from "./resources";

export const LEASE_SECONDS = 20;
/** The NOTIFY channel of the scheduler: a JSON payload `JobsNotice`. */
export const JOBS_CHANNEL = "tinkerlab_jobs";
// An arbitrary constant: every scheduling pass, in any process, holds this transaction-level advisory lock.
const SCHEDULING_LOCK_KEY = 7_264_502;

/** What changed: a job was queued, a device was freed, or jobs were placed on these workers. */
export type JobsNotice = { queued?: true; freed?: true; placedOn?: string[] };

/** Tells every listening worker (LISTEN `JOBS_CHANNEL`) that the queue or the devices changed; sent at commit. */
export async function notifyJobs(db: Database, notice: JobsNotice): Promise<void> {
  await db.execute(sql`select pg_notify(${JOBS_CHANNEL}, ${JSON.stringify(notice)})`);
}

export class JobRejectedError extends Error {
  override name = "JobRejectedError";
}

export type SubmitJob = {
  runId: string;
  userId: string;
  priority?: number;
  resources: JobResourceSpec & { baseModel: string };
  estimatedSeconds?: number | null;
};

export async function submitJob(db: Database, job: SubmitJob, knownDevices?: DeviceCapacity[]): Promise<string> {
  const footprint = estimateFootprint({ ...job.resources, model: { ...job.resources.model, name: job.resources.baseModel } });
  const capacities = knownDevices ?? (await liveDeviceCapacities(db));
  if (capacities.length > 0) {
    const fit = checkEverFits(footprint, capacities);
    if (!fit.fits) throw new JobRejectedError(`This job can never run here: it ${fit.message}.`);
  }
  const id = newId("job");
  await db.insert(jobs).values({
    id,
    kind: job.resources.kind,
    mode: job.resources.mode,
    runId: job.runId,
    userId: job.userId,
    priority: job.priority ?? 0,
    footprint,
    estimatedSeconds: job.estimatedSeconds ?? null,
  });
  await notifyJobs(db, { queued: true });
  return id;
}

async function liveDeviceCapacities(db: Database): Promise<DeviceCapacity[]> {
  const rows = await db
    .select({ id: devices.id, kind: devices.kind, memoryMb: devices.memoryMb, computeSlots: devices.computeSlots })
    .from(devices)
    .innerJoin(workers, eq(workers.id, devices.workerId))
    .where(eq(workers.status, "alive"));
  return rows;
}

/** Workers whose heartbeat stopped lose their lease: marked dead, their jobs go back to the queue to resume. */
export async function expireLeases(db: Database, now = new Date()): Promise<string[]> {
  const cutoff = new Date(now.getTime() - LEASE_SECONDS * 1000);
  const dead = await db
    .update(workers)
    .set({ status: "dead" })
    .where(and(eq(workers.status, "alive"), lt(workers.heartbeatAt, cutoff)))
    .returning({ id: workers.id, hostname: workers.hostname, pid: workers.pid });
  if (dead.length === 0) return [];
  const requeued = await db
    .update(jobs)
    .set({
      status: "queued",
      workerId: null,
      deviceId: null,
      leaseExpiresAt: null,
      attempts: sql`${jobs.attempts} + 1`,
      reason: sql`'worker lost (no heartbeat for ${sql.raw(String(LEASE_SECONDS))} s); resuming from the last checkpoint'`,
    })
    .where(and(inArray(jobs.workerId, dead.map((w) => w.id)), inArray(jobs.status, ["placing", "running"])))
    .returning({ id: jobs.id, runId: jobs.runId });
  for (const job of requeued) {
    if (!job.runId) continue;
    await db.update(runs).set({ status: "queued" }).where(eq(runs.id, job.runId));
    await db.insert(runLogs).values({ runId: job.runId, level: "warn", message: `Worker lost; job ${job.id} requeued to resume from its last checkpoint.` });
  }
  return requeued.map((j) => j.id);
}

/**
 * The cluster as the policy sees it: live devices, what runs on each, and the queue. With `lockQueue` (inside a
 * transaction) the queued rows are read `FOR UPDATE SKIP LOCKED`: rows another transaction is changing are left
 * out of this pass rather than waited for.
 */
export async function clusterState(db: Database, now = Date.now(), options: { lockQueue?: boolean } = {}): Promise<ClusterState> {
  const capacityRows = await liveDeviceCapacities(db);
  const active = await db
    .select({
      id: jobs.id,
      userId: jobs.userId,
      priority: jobs.priority,
      footprint: jobs.footprint,
      deviceId: jobs.deviceId,
      kind: jobs.kind,
      startedAt: jobs.startedAt,
      estimatedSeconds: jobs.estimatedSeconds,
      stopRequested: jobs.stopRequested,
      checkpointAt: checkpoints.createdAt,
    })
    .from(jobs)
    .leftJoin(checkpoints, eq(checkpoints.id, jobs.lastCheckpointId))
    .where(inArray(jobs.status, ["placing", "running"]));
  const byDevice = new Map<string, RunningJob[]>();
  for (const job of active) {
    if (!job.deviceId) continue;
    const started = job.startedAt?.getTime() ?? now;
    byDevice.set(job.deviceId, [
      ...(byDevice.get(job.deviceId) ?? []),
      {
        id: job.id,
        userId: job.userId,
        priority: job.priority,
        footprint: job.footprint,
        // A job already asked to stop is leaving: preempting it again would free nothing more.
        preemptible: (job.kind === "rl" || job.kind === "sft") && job.stopRequested === null,
        estimatedEndAt: job.estimatedSeconds ? started / 1000 + job.estimatedSeconds : null,
        // What preempting it now would throw away: the time since its last checkpoint (or since it started).
        secondsSinceCheckpoint: Math.max(0, (now - Math.max(job.checkpointAt?.getTime() ?? 0, started)) / 1000),
      },
    ]);
  }
  const deviceStates = capacityRows.map((capacity) => describeDevice(capacity, byDevice.get(capacity.id) ?? []));
  const queuedQuery = db
    .select({
      id: jobs.id,
      userId: jobs.userId,
      priority: jobs.priority,
      submittedAt: jobs.submittedAt,
      kind: jobs.kind,
      mode: jobs.mode,
      footprint: jobs.footprint,
      estimatedSeconds: jobs.estimatedSeconds,
    })
    .from(jobs)
    .where(and(eq(jobs.status, "queued"), isNull(jobs.stopRequested)))
    .orderBy(jobs.submittedAt);
  const queued = options.lockQueue ? await queuedQuery.for("update", { skipLocked: true }) : await queuedQuery;
  return {
    now: now / 1000,
    devices: deviceStates,
    queue: queued.map((job) => ({
      ...job,
      submittedAt: job.submittedAt.getTime() / 1000,
      mode: (job.mode ?? "full") as "lora" | "full",
      estimatedSeconds: job.estimatedSeconds,
    })),
    slotsInUseByUser: slotsInUseByUser(deviceStates),
  };
}

/**
 * One scheduling pass, in one transaction: expire leases, ask the policy, carry out its decisions, and NOTIFY the
 * workers whose jobs were placed (delivered when the transaction commits). Returns what it did.
 */
export async function schedulerTick(db: Database, policy: SchedulingPolicy, now = new Date()) {
  return db.transaction(async (txn) => {
    const tx = txn as unknown as Database;
    await tx.execute(sql`select pg_advisory_xact_lock(${SCHEDULING_LOCK_KEY})`);
    const requeued = await expireLeases(tx, now);
    const state = await clusterState(tx, now.getTime(), { lockQueue: true });
    const decisions = policy.decide(state);
    const placed: string[] = [];
    const preempted: string[] = [];
    const placedOn = new Set<string>();
    const workerOf = new Map<string, string>();
    if (decisions.some((d) => d.type === "place")) {
      for (const row of await tx.select({ id: devices.id, workerId: devices.workerId }).from(devices).where(inArray(devices.id, state.devices.map((d) => d.capacity.id)))) {
        workerOf.set(row.id, row.workerId);
      }
    }
    for (const decision of decisions) {
      if (decision.type === "preempt") {
        const [row] = await tx
          .update(jobs)
          .set({ stopRequested: "preempt", reason: `preempting for higher-priority job ${decision.forJobId}` })
          .where(and(eq(jobs.id, decision.jobId), eq(jobs.status, "running"), isNull(jobs.stopRequested)))
          .returning({ id: jobs.id, workerId: jobs.workerId });
        if (row) {
          preempted.push(row.id);
          if (row.workerId) placedOn.add(row.workerId);
        }
        continue;
      }
      const workerId = workerOf.get(decision.deviceId);
      if (!workerId) continue;
      const [row] = await tx
        .update(jobs)
        .set({
          status: "placing",
          workerId,
          deviceId: decision.deviceId,
          leaseExpiresAt: new Date(now.getTime() + LEASE_SECONDS * 1000),
          reason: decision.backfilled ? "backfilled" : decision.sharesBase ? `shares base ${decision.sharesBase}` : null,
        })
        .where(and(eq(jobs.id, decision.jobId), eq(jobs.status, "queued")))
        .returning({ id: jobs.id });
      if (row) {
        placed.push(row.id);
        placedOn.add(workerId);
      }
    }
    if (requeued.length > 0) await notifyJobs(tx, { freed: true });
    // A NOTIFY payload holds at most 8,000 bytes: 200 worker ids (about 16 characters each) per notice.
    const news = [...placedOn];
    for (let i = 0; i < news.length; i += 200) await notifyJobs(tx, { placedOn: news.slice(i, i + 200) });
    return { requeued, placed, preempted };
  });
}

/** Asks the worker running a job to stop it at its next step (cancel, pause); a queued job stops at once. */
export async function requestStop(db: Database, jobId: string, why: "cancel" | "pause"): Promise<"stopped" | "requested" | "finished"> {
  const finalStatus = why === "cancel" ? "cancelled" : "paused";
  const [queued] = await db
    .update(jobs)
    .set({ status: finalStatus, reason: why === "cancel" ? "cancelled by user" : "paused by user", finishedAt: why === "cancel" ? new Date() : null })
    .where(and(eq(jobs.id, jobId), eq(jobs.status, "queued")))
    .returning({ id: jobs.id });
  if (queued) return "stopped";
  const [active] = await db
    .update(jobs)
    .set({ stopRequested: why })
    .where(and(eq(jobs.id, jobId), inArray(jobs.status, ["placing", "running"])))
    .returning({ id: jobs.id, workerId: jobs.workerId });
  if (active?.workerId) await notifyJobs(db, { placedOn: [active.workerId] });
  return active ? "requested" : "finished";
}
