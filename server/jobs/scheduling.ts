/**
 * Scheduling over the database: jobs are rows, workers hold leases renewed by heartbeats, and each pass carries
 * out the placement policy's decisions (the policy itself is pure, server/scheduler; the same one runs in the
 * simulator). Any process may run a pass (the server every second, a `tinkerlab worker` started with DATABASE_URL
 * when woken): a pass is one transaction that takes a transaction-level advisory lock (passes see each other's
 * placements, so two never fill one device twice), reads the queue `FOR UPDATE SKIP LOCKED` (it never waits on a
 * job a user is cancelling or a worker is finishing), and changes state through `moveJobs` (a conditional UPDATE
 * guarded by the state machine). Placements, new jobs and freed devices are announced with NOTIFY on
 * `JOBS_CHANNEL`, which database workers LISTEN to.
 */
import { and, eq, gt, inArray, isNull, sql } from "drizzle-orm";
import { type Database, newId, checkpoints, devices, jobs, workers } from "../db";
import {
  checkEverFits,
  describeDevice,
  estimateFootprint,
  slotsInUseByUser,
  type ClusterState,
  type DeviceCapacity,
  type JobResourceSpec,
  type RunningJob,
  type SchedulingPolicy,
} from "../scheduler";
import { JobRejectedError } from "./errors";
import { expireLeases, LEASE_SECONDS } from "./leases";
import { notifyJobs } from "./notify";
import { inTransaction, moveJobs } from "./transitions";

/** A worker whose last heartbeat is older than this gets no new job (it beats every second). */
const PLACEABLE_WITHIN_SECONDS = 5;
// An arbitrary constant: every scheduling pass, in any process, holds this transaction-level advisory lock.
const SCHEDULING_LOCK_KEY = 7_264_502;

export type SubmitJob = {
  runId: string;
  userId: string;
  priority?: number;
  resources: JobResourceSpec & { baseModel: string };
  estimatedSeconds?: number | null;
};

/** The footprint of a job, checked against the live devices: a job that can never fit is refused now. */
export async function checkedFootprint(db: Database, job: SubmitJob, knownDevices?: DeviceCapacity[]) {
  const footprint = estimateFootprint({ ...job.resources, model: { ...job.resources.model, name: job.resources.baseModel } });
  const capacities = knownDevices ?? (await liveDeviceCapacities(db));
  if (capacities.length > 0) {
    const fit = checkEverFits(footprint, capacities);
    if (!fit.fits) throw new JobRejectedError(`This job can never run here: it ${fit.message}.`);
  }
  return footprint;
}

/** Queues a job for a run that exists (launchRun makes both at once). */
export async function submitJob(db: Database, job: SubmitJob, knownDevices?: DeviceCapacity[]): Promise<string> {
  const footprint = await checkedFootprint(db, job, knownDevices);
  return insertJob(db, job, footprint);
}

export async function insertJob(db: Database, job: SubmitJob, footprint: Awaited<ReturnType<typeof checkedFootprint>>): Promise<string> {
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
export async function schedulerTick(
  db: Database,
  policy: SchedulingPolicy,
  now = new Date(),
  /** graceMs: time the caller lately could not hear heartbeats in (./loop.ts), added to every lease. */
  options: { graceMs?: number } = {},
) {
  return inTransaction(db, async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${SCHEDULING_LOCK_KEY})`);
    const requeued = await expireLeases(tx, now, {}, options.graceMs);
    const state = await clusterState(tx, now.getTime(), { lockQueue: true });
    const decisions = policy.decide(state);
    const placed: string[] = [];
    const preempted: string[] = [];
    const placedOn = new Set<string>();
    const workerOf = new Map<string, string>();
    if (decisions.some((d) => d.type === "place")) {
      // Only workers heard from lately take new work: one whose heartbeats stopped (killed, or its server was)
      // still counts as alive until its lease runs out, and a job placed on it would wait for nothing until then.
      const heardSince = new Date(now.getTime() - PLACEABLE_WITHIN_SECONDS * 1000);
      for (const row of await tx
        .select({ id: devices.id, workerId: devices.workerId })
        .from(devices)
        .innerJoin(workers, eq(workers.id, devices.workerId))
        .where(
          and(
            inArray(
              devices.id,
              state.devices.map((d) => d.capacity.id),
            ),
            gt(workers.heartbeatAt, heardSince),
          ),
        )) {
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
      const [row] = await moveJobs(tx, "placing", eq(jobs.id, decision.jobId), {
        job: {
          workerId,
          deviceId: decision.deviceId,
          leaseExpiresAt: new Date(now.getTime() + LEASE_SECONDS * 1000),
          reason: decision.backfilled ? "backfilled" : decision.sharesBase ? `shares base ${decision.sharesBase}` : null,
        },
      });
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
