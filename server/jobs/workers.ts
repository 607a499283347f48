/**
 * Workers and their leases: a worker registers with its devices and renews its lease (and its jobs' leases) by
 * heartbeat, which also tells it which placed jobs to start and which to stop.
 */
import { and, asc, eq, inArray, isNotNull, notExists, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { type Database, newId, devices, jobs, workers } from "../db";
import { WorkerConflictError } from "./errors";
import { forgiveStarvedLoss, LATE_WINDOW_MS } from "./leases";
import { LEASE_SECONDS } from "./leases";

export type DeviceSpec = { kind: "cpu" | "gpu"; name: string; memoryMb: number; computeSlots: number };
export type StopWhy = "cancel" | "pause" | "preempt";
/** What a worker says of itself with each heartbeat. */
export type WorkerStatus = {
  /** How late its main thread ran its timers since the last heartbeat, ms. */
  lagMs?: number;
  /** The jobs it is running. */
  running?: string[];
};

export async function registerWorker(db: Database, input: { hostname: string; pid: number; backend: string; devices: DeviceSpec[] }) {
  const workerId = newId("wrk");
  const deviceIds = input.devices.map(() => newId("dev"));
  await db.transaction(async (tx) => {
    await tx.insert(workers).values({ id: workerId, hostname: input.hostname, pid: input.pid, backend: input.backend });
    await tx.insert(devices).values(input.devices.map((d, i) => ({ id: deviceIds[i]!, workerId, ...d })));
  });
  return { workerId, deviceIds, leaseSeconds: LEASE_SECONDS };
}

/**
 * Renews the worker's lease and its jobs' leases; answers with the jobs placed on it that it may start, and the
 * jobs it should stop. A job placed on a device where a preempted job is still writing its checkpoint waits until
 * that job has left, so the two never hold the device at once.
 */
export async function heartbeat(db: Database, workerId: string, status: WorkerStatus = {}) {
  const now = new Date();
  // The wait since its last heartbeat arrived: the longest within a minute is kept, so that a lease that runs out
  // after heartbeats came ever later is told apart from one whose worker simply vanished (./lifecycle.ts).
  const gapMs = sql<number>`least(2000000000, floor(extract(epoch from (${now.toISOString()}::timestamptz - ${workers.heartbeatAt})) * 1000))::int`;
  // This gap is the longest of the window when none is kept, the kept one is older than the window, or it is longer.
  const newLongest = sql`(${workers.lateAt} is null or ${workers.lateAt} < ${new Date(now.getTime() - LATE_WINDOW_MS).toISOString()}::timestamptz or ${gapMs} >= ${workers.lateMs})`;
  const [worker] = await db
    .update(workers)
    .set({
      heartbeatAt: now,
      lagMs: Math.max(0, Math.round(status.lagMs ?? 0)),
      lateMs: sql`case when ${newLongest} then ${gapMs} else ${workers.lateMs} end`,
      lateAt: sql`case when ${newLongest} then ${now.toISOString()}::timestamptz else ${workers.lateAt} end`,
    })
    .where(and(eq(workers.id, workerId), eq(workers.status, "alive")))
    .returning({ id: workers.id });
  if (!worker) {
    await forgiveStarvedLoss(db, workerId, status.running ?? []);
    throw new WorkerConflictError(`Worker '${workerId}' lost its lease; register again.`, "PRECONDITION_FAILED");
  }
  await db
    .update(jobs)
    .set({ leaseExpiresAt: new Date(now.getTime() + LEASE_SECONDS * 1000) })
    .where(and(eq(jobs.workerId, workerId), inArray(jobs.status, ["placing", "running"])));
  const leaving = alias(jobs, "leaving");
  const assignments = await db
    .select({ jobId: jobs.id })
    .from(jobs)
    .where(
      and(
        eq(jobs.workerId, workerId),
        eq(jobs.status, "placing"),
        notExists(
          db
            .select({ id: leaving.id })
            .from(leaving)
            .where(and(eq(leaving.deviceId, jobs.deviceId), eq(leaving.status, "running"), eq(leaving.stopRequested, "preempt"))),
        ),
      ),
    )
    .orderBy(asc(jobs.submittedAt));
  const stops = await db
    .select({ jobId: jobs.id, why: jobs.stopRequested })
    .from(jobs)
    .where(and(eq(jobs.workerId, workerId), isNotNull(jobs.stopRequested), inArray(jobs.status, ["placing", "running"])));
  return { assignments: assignments.map((a) => a.jobId), stops: stops.map((s) => ({ jobId: s.jobId, why: s.why! as StopWhy })) };
}
