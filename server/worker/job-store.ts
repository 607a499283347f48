/**
 * What a worker does to the database: register with its devices, renew its lease, claim a placed job, store
 * metrics and rollouts, record checkpoints, finish, leave. The `worker` tRPC router calls these for workers that
 * reach the server over HTTP (and, on the embedded database, the local workers); a `tinkerlab worker` started with
 * DATABASE_URL calls them directly. One implementation, so both kinds keep the same lease and requeue rules.
 */
import { and, asc, eq, inArray, isNotNull, notExists, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import type { Database } from "../db";
import { newId } from "../db/ids";
import { checkpoints, devices, experimentVersions, jobs, metricPoints, rollouts, runLogs, runs, workers } from "../db/schema";
import { LEASE_SECONDS, notifyJobs } from "../scheduler/service";

export type DeviceSpec = { kind: "cpu" | "gpu"; name: string; memoryMb: number; computeSlots: number };
export type MetricPointInput = { step: number; name: string; value: number; wallTime?: Date };
export type RolloutInput = {
  step: number;
  split: "train" | "eval";
  groupIndex: number;
  sampleIndex: number;
  prompt: string;
  turns: { observation: string; action: string; reward?: number; advantage?: number | null; render?: string; info?: Record<string, unknown> }[];
  rewards: Record<string, number>;
  totalReward: number;
  advantage: number | null;
  tokens: number[] | null;
  tokenLogprobs: number[] | null;
};
export type ReportInput = {
  workerId: string;
  jobId: string;
  step?: number;
  metrics?: MetricPointInput[];
  rollouts?: RolloutInput[];
  logs?: { level: "info" | "warn" | "error"; message: string }[];
};
export type FinishOutcome = "completed" | "failed" | "cancelled" | "paused" | "preempted";
export type StopWhy = "cancel" | "pause" | "preempt";

/** A refusal the caller should surface as is: the job was taken from this worker, or the worker lost its lease. */
export class WorkerConflictError extends Error {
  override name = "WorkerConflictError";
  constructor(
    message: string,
    readonly code: "NOT_FOUND" | "CONFLICT" | "PRECONDITION_FAILED",
  ) {
    super(message);
  }
}

export async function registerWorker(db: Database, input: { hostname: string; pid: number; backend: string; devices: DeviceSpec[] }) {
  const workerId = newId("wrk");
  await db.insert(workers).values({ id: workerId, hostname: input.hostname, pid: input.pid, backend: input.backend });
  const deviceIds = input.devices.map(() => newId("dev"));
  await db.insert(devices).values(input.devices.map((d, i) => ({ id: deviceIds[i]!, workerId, ...d })));
  return { workerId, deviceIds, leaseSeconds: LEASE_SECONDS };
}

/**
 * Renews the worker's lease and its jobs' leases; answers with the jobs placed on it that it may start, and the
 * jobs it should stop. A job placed on a device where a preempted job is still writing its checkpoint waits until
 * that job has left, so the two never hold the device at once.
 */
export async function heartbeat(db: Database, workerId: string) {
  const now = new Date();
  const [worker] = await db.update(workers).set({ heartbeatAt: now }).where(and(eq(workers.id, workerId), eq(workers.status, "alive"))).returning({ id: workers.id });
  if (!worker) throw new WorkerConflictError(`Worker '${workerId}' lost its lease; register again.`, "PRECONDITION_FAILED");
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

/** Takes a job placed on this worker: returns everything needed to run it, and the checkpoint to resume from. */
export async function claimJob(db: Database, workerId: string, jobId: string) {
  const [job] = await db
    .update(jobs)
    .set({ status: "running", startedAt: sql`coalesce(${jobs.startedAt}, now())` })
    .where(and(eq(jobs.id, jobId), eq(jobs.workerId, workerId), eq(jobs.status, "placing")))
    .returning({ id: jobs.id, runId: jobs.runId, kind: jobs.kind, mode: jobs.mode, lastCheckpointId: jobs.lastCheckpointId, attempts: jobs.attempts });
  if (!job || !job.runId) throw new WorkerConflictError(`Job '${jobId}' is not waiting for worker '${workerId}'.`, "CONFLICT");
  const [run] = await db
    .select({ id: runs.id, config: runs.config, seed: runs.seed, files: experimentVersions.files })
    .from(runs)
    .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
    .where(eq(runs.id, job.runId));
  await db.update(runs).set({ status: "running", startedAt: sql`coalesce(${runs.startedAt}, now())`, reason: null }).where(eq(runs.id, job.runId));
  const resume = job.lastCheckpointId
    ? ((await db.select({ path: checkpoints.path, step: checkpoints.step }).from(checkpoints).where(eq(checkpoints.id, job.lastCheckpointId)))[0] ?? null)
    : null;
  await db.insert(runLogs).values({
    runId: job.runId,
    level: "info",
    message: resume ? `Resuming from the checkpoint of step ${resume.step} (attempt ${job.attempts + 1}).` : "Started.",
  });
  return { job, run: run!, resume };
}

export type ClaimedJob = Awaited<ReturnType<typeof claimJob>>;

async function requireJobOf(db: Database, jobId: string, workerId: string) {
  const [job] = await db.select({ id: jobs.id, runId: jobs.runId, status: jobs.status, workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, jobId));
  if (!job) throw new WorkerConflictError(`No job with id '${jobId}'`, "NOT_FOUND");
  if (job.workerId !== workerId) {
    throw new WorkerConflictError(`Job '${jobId}' is no longer assigned to worker '${workerId}' (it was requeued or moved).`, "CONFLICT");
  }
  return job;
}

/**
 * Stores metric points, rollouts and log lines, and the run's step, in one statement; a point or rollout sent twice
 * (after a retry) is stored once. Returns the run.
 *
 * One statement rather than a transaction of several: the rows go as JSON, one parameter per table, which the
 * database takes apart (jsonb_to_recordset), and the check that the job is still this worker's is part of it. Each
 * round trip to the embedded database costs the web server about half a millisecond of CPU besides the work, and a
 * training step's report (26 points, 16 rollouts) took six of them, plus one bound parameter per column per row.
 */
export async function storeReport(db: Database, input: ReportInput): Promise<string> {
  const now = new Date().toISOString();
  const metrics = (input.metrics ?? []).map((m) => ({ step: m.step, name: storable(m.name), value: float(m.value), wallTime: m.wallTime?.toISOString() ?? now }));
  const rolloutRows = (input.rollouts ?? []).map((r) => {
    const clean = storable(r);
    return { ...clean, totalReward: float(clean.totalReward), advantage: clean.advantage === null ? null : float(clean.advantage) };
  });
  const logs = (input.logs ?? []).map((l) => storable(l));
  // Data-modifying parts of a WITH run once, to completion, whether or not the final select reads them.
  const result = await db.execute(sql`
    with job as (
      select run_id from ${jobs} where id = ${input.jobId} and worker_id = ${input.workerId} and run_id is not null
    ), points as (
      insert into ${metricPoints} (run_id, step, name, value, wall_time)
      select job.run_id, r.step, r.name, r.value, r."wallTime"
      from job, jsonb_to_recordset(${JSON.stringify(metrics)}::jsonb) as r(step integer, name text, value double precision, "wallTime" timestamptz)
      on conflict do nothing
    ), samples as (
      insert into ${rollouts} (run_id, step, split, group_index, sample_index, prompt, turns, rewards, total_reward, advantage, tokens, token_logprobs)
      select job.run_id, r.step, r.split, r."groupIndex", r."sampleIndex", r.prompt, r.turns, r.rewards, r."totalReward", r.advantage,
             nullif(r.tokens, 'null'), nullif(r."tokenLogprobs", 'null')
      from job, jsonb_to_recordset(${JSON.stringify(rolloutRows)}::jsonb)
        as r(step integer, split text, "groupIndex" integer, "sampleIndex" integer, prompt text, turns jsonb, rewards jsonb,
             "totalReward" double precision, advantage double precision, tokens jsonb, "tokenLogprobs" jsonb)
      on conflict do nothing
    ), lines as (
      insert into ${runLogs} (run_id, level, message)
      select job.run_id, r.level, r.message from job, jsonb_to_recordset(${JSON.stringify(logs)}::jsonb) as r(level text, message text)
    ), progress as (
      update ${runs} set step = ${input.step ?? null}::integer from job where ${runs.id} = job.run_id and ${input.step ?? null}::integer is not null
    )
    select run_id from job`);
  const [row] = (result as unknown as { rows: { run_id: string }[] }).rows;
  if (!row) {
    await requireJobOf(db, input.jobId, input.workerId); // says why: no such job, or another worker's now
    throw new WorkerConflictError(`Job '${input.jobId}' has no run to report to.`, "CONFLICT");
  }
  return row.run_id;
}

/** A float column's value in JSON: NaN and ±Infinity as the strings PostgreSQL reads for them (JSON has no such numbers). */
const float = (value: number): number | string => (Number.isFinite(value) ? value : String(value));

export async function recordCheckpoint(db: Database, input: { workerId: string; jobId: string; step: number; path: string; sizeBytes: number }) {
  const job = await requireJobOf(db, input.jobId, input.workerId);
  const [row] = await db
    .insert(checkpoints)
    .values({ id: newId("ckpt"), runId: job.runId!, step: input.step, kind: "state", path: input.path, sizeBytes: input.sizeBytes })
    .onConflictDoUpdate({ target: [checkpoints.runId, checkpoints.step, checkpoints.kind], set: { path: input.path, sizeBytes: input.sizeBytes } })
    .returning({ id: checkpoints.id });
  await db.update(jobs).set({ lastCheckpointId: row!.id }).where(eq(jobs.id, input.jobId));
  return { checkpointId: row!.id };
}

/**
 * Ends the worker's part in a job: done, failed, stopped as asked, or handed back to the queue (preempted). The
 * device it held is free again, so the schedulers are woken.
 */
export async function finishJob(db: Database, input: { workerId: string; jobId: string; outcome: FinishOutcome; reason: string | null }) {
  const job = await requireJobOf(db, input.jobId, input.workerId);
  const { outcome } = input;
  const jobStatus = outcome === "preempted" ? "queued" : outcome;
  const ended = outcome === "completed" || outcome === "failed" || outcome === "cancelled";
  const releases = ended || outcome === "paused" || outcome === "preempted";
  await db
    .update(jobs)
    .set({
      status: jobStatus,
      reason: input.reason,
      stopRequested: null,
      workerId: releases ? null : undefined,
      deviceId: releases ? null : undefined,
      attempts: outcome === "preempted" ? sql`${jobs.attempts} + 1` : undefined,
      finishedAt: ended ? new Date() : null,
    })
    .where(eq(jobs.id, input.jobId));
  await db
    .update(runs)
    .set({ status: jobStatus, reason: input.reason, finishedAt: ended ? new Date() : null })
    .where(eq(runs.id, job.runId!));
  await db.insert(runLogs).values({
    runId: job.runId!,
    level: outcome === "failed" ? "error" : "info",
    message: `${outcome[0]!.toUpperCase()}${outcome.slice(1)}${input.reason ? `: ${input.reason}` : "."}`,
  });
  await notifyJobs(db, { freed: true });
  return { ok: true, runId: job.runId! };
}

/** A worker leaving cleanly: it is marked gone, and jobs it still held go back to the queue. */
export async function leaveWorker(db: Database, workerId: string) {
  await db.update(workers).set({ status: "dead" }).where(eq(workers.id, workerId));
  const requeued = await db
    .update(jobs)
    .set({ status: "queued", workerId: null, deviceId: null, stopRequested: null, reason: "worker left; resuming from the last checkpoint" })
    .where(and(eq(jobs.workerId, workerId), inArray(jobs.status, ["placing", "running"])))
    .returning({ runId: jobs.runId });
  const runIds = requeued.flatMap((job) => (job.runId ? [job.runId] : []));
  if (runIds.length) await db.update(runs).set({ status: "queued" }).where(inArray(runs.id, runIds));
  await notifyJobs(db, { freed: true });
  return { ok: true };
}

/**
 * PostgreSQL text and jsonb cannot hold U+0000, nor jsonb a lone UTF-16 surrogate, and a policy sampling raw bytes
 * can produce them: each becomes U+FFFD (the replacement character) so the rollout is stored, visibly, instead of
 * failing the whole report.
 */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function storable<T>(value: T): T {
  if (typeof value === "string") return value.replace(UNSTORABLE, "\uFFFD") as T;
  if (Array.isArray(value)) return value.map(storable) as T;
  if (value && typeof value === "object" && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storable(k), storable(v)])) as T;
  }
  return value;
}
