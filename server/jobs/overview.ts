/**
 * What the scheduler page shows of the cluster, and what the health check says of its workers: reads only, for the
 * routers (the lifecycle, scheduling and lease files write these tables).
 */
import { and, asc, desc, eq, gt, inArray, isNull, or } from "drizzle-orm";
import { type Database, devices, jobs, runs, workers } from "../db";
import { createPackingPolicy } from "../scheduler";
import { estimateQueuedStarts } from "./forecast";

/** The policy the server's scheduler runs (server/web-server.ts), here to forecast the queue. */
const policy = createPackingPolicy();

/**
 * Devices and what runs on each, the queue in the order the scheduler considers it with each job's estimated start
 * (the policy run forward in the simulator, see forecast.ts), and the utilisation of the last `windowMinutes`.
 * Jobs of projects outside `visibleProjects` are shown as hidden.
 */
export async function schedulerOverview(db: Database, options: { windowMinutes: number; visibleProjects: string[] }) {
  const deviceRows = await db
    .select({
      id: devices.id,
      name: devices.name,
      kind: devices.kind,
      memoryMb: devices.memoryMb,
      computeSlots: devices.computeSlots,
      workerId: workers.id,
      hostname: workers.hostname,
      pid: workers.pid,
      backend: workers.backend,
      heartbeatAt: workers.heartbeatAt,
    })
    .from(devices)
    .innerJoin(workers, eq(workers.id, devices.workerId))
    .where(eq(workers.status, "alive"))
    .orderBy(asc(workers.startedAt));
  const jobColumns = {
    projectId: runs.projectId,
    id: jobs.id,
    runId: jobs.runId,
    runName: runs.name,
    status: jobs.status,
    priority: jobs.priority,
    mode: jobs.mode,
    kind: jobs.kind,
    footprint: jobs.footprint,
    deviceId: jobs.deviceId,
    reason: jobs.reason,
    submittedAt: jobs.submittedAt,
    startedAt: jobs.startedAt,
    step: runs.step,
    totalSteps: runs.totalSteps,
  };
  const active = await db
    .select(jobColumns)
    .from(jobs)
    .leftJoin(runs, eq(runs.id, jobs.runId))
    .where(inArray(jobs.status, ["placing", "running"]));
  const queue = await db
    .select(jobColumns)
    .from(jobs)
    .leftJoin(runs, eq(runs.id, jobs.runId))
    .where(eq(jobs.status, "queued"))
    .orderBy(desc(jobs.priority), asc(jobs.submittedAt));
  const since = new Date(Date.now() - options.windowMinutes * 60_000);
  const recent = await db
    .select({ startedAt: jobs.startedAt, finishedAt: jobs.finishedAt, slots: jobs.footprint })
    .from(jobs)
    .where(
      and(or(isNull(jobs.finishedAt), gt(jobs.finishedAt, since)), inArray(jobs.status, ["running", "placing", "completed", "failed", "cancelled", "paused"])),
    );
  const totalSlots = deviceRows.reduce((sum, d) => sum + d.computeSlots, 0);
  // Jobs of projects the caller is no member of hold their place on the chart, but say nothing of what they are.
  const visible = new Set(options.visibleProjects);
  let hidden = 0;
  const shown = <J extends (typeof active)[number]>({ projectId, ...job }: J) =>
    projectId !== null && visible.has(projectId)
      ? { ...job, hidden: false }
      : { ...job, id: `hidden_${++hidden}`, runId: null, runName: null, reason: null, hidden: true };
  const estimates = await estimateQueuedStarts(db, policy);
  return {
    devices: deviceRows.map((device) => ({ ...device, jobs: active.filter((job) => job.deviceId === device.id).map(shown) })),
    queue: queue.map((job, position) => ({
      ...shown(job),
      position: position + 1,
      estimatedStartAt: estimates.get(job.id)?.startsAt ?? null,
      workLeftSeconds: estimates.get(job.id)?.workLeftSeconds ?? null,
    })),
    utilization: utilizationSeries(recent, since, totalSlots),
    totalSlots,
  };
}

/** The live workers and the backend each trains with. */
export async function liveWorkers(db: Database) {
  return db.select({ id: workers.id, hostname: workers.hostname, backend: workers.backend }).from(workers).where(eq(workers.status, "alive"));
}

/** Busy compute slots over capacity, per minute of the window (jobs still running count up to now). */
function utilizationSeries(jobRows: { startedAt: Date | null; finishedAt: Date | null; slots: { computeSlots: number } }[], since: Date, totalSlots: number) {
  const now = Date.now();
  const buckets: { minute: string; utilization: number }[] = [];
  for (let start = since.getTime(); start < now; start += 60_000) {
    const end = Math.min(start + 60_000, now);
    let busy = 0;
    for (const job of jobRows) {
      if (!job.startedAt) continue;
      const from = Math.max(start, job.startedAt.getTime());
      const to = Math.min(end, job.finishedAt?.getTime() ?? now);
      if (to > from) busy += ((to - from) / (end - start)) * job.slots.computeSlots;
    }
    buckets.push({ minute: new Date(start).toISOString().slice(11, 16), utilization: totalSlots ? Math.min(1, busy / totalSlots) : 0 });
  }
  return buckets;
}
