/**
 * The API workers speak: register with their devices, renew their lease by heartbeat (and hear which jobs to
 * start or stop), claim a job, report metrics and rollouts, record checkpoints, finish. Workers on this machine
 * and on others use the same calls; on the embedded database this is how they reach its tables.
 */
import { timingSafeEqual } from "node:crypto";
import { TRPCError } from "@trpc/server";
import { and, asc, eq, inArray, isNotNull, sql } from "drizzle-orm";
import { z } from "zod";
import { newId } from "../../db/ids";
import { checkpoints, devices, experimentVersions, jobs, metricPoints, rollouts, runLogs, runs, workers } from "../../db/schema";
import { announceRunData } from "../../run-events";
import { LEASE_SECONDS } from "../../scheduler/service";
import { createTRPCRouter, publicProcedure } from "../trpc";

const holder = globalThis as typeof globalThis & { __tinkerlabWorkerToken?: string };

/** The token workers must present; the server sets it at start (from TINKERLAB_WORKER_TOKEN or a fresh one). */
export function setWorkerToken(token: string) {
  holder.__tinkerlabWorkerToken = token;
}

export const WORKER_TOKEN_HEADER = "x-tinkerlab-worker-token";

const workerProcedure = publicProcedure.use(({ ctx, next }) => {
  const expected = holder.__tinkerlabWorkerToken;
  const given = ctx.workerToken;
  const ok = expected !== undefined && given !== undefined && given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
  if (!ok) throw new TRPCError({ code: "UNAUTHORIZED", message: `Workers must send the server's worker token in the ${WORKER_TOKEN_HEADER} header.` });
  return next();
});

async function requireJobOf(ctx: { db: import("../../db").Database }, jobId: string, workerId: string) {
  const [job] = await ctx.db.select({ id: jobs.id, runId: jobs.runId, status: jobs.status, workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, jobId));
  if (!job) throw new TRPCError({ code: "NOT_FOUND", message: `No job with id '${jobId}'` });
  if (job.workerId !== workerId) {
    throw new TRPCError({ code: "CONFLICT", message: `Job '${jobId}' is no longer assigned to worker '${workerId}' (it was requeued or moved).` });
  }
  return job;
}

const metricPointSchema = z.object({ step: z.number().int().min(0), name: z.string().min(1).max(200), value: z.number(), wallTime: z.date().optional() });
const rolloutSchema = z.object({
  step: z.number().int().min(0),
  split: z.enum(["train", "eval"]),
  groupIndex: z.number().int().min(0),
  sampleIndex: z.number().int().min(0),
  prompt: z.string(),
  turns: z.array(z.object({ observation: z.string(), action: z.string(), reward: z.number().optional(), render: z.string().optional(), info: z.record(z.string(), z.unknown()).optional() })),
  rewards: z.record(z.string(), z.number()),
  totalReward: z.number(),
  advantage: z.number().nullable(),
  tokens: z.array(z.number().int()).nullable(),
  tokenLogprobs: z.array(z.number()).nullable(),
});

export const workerRouter = createTRPCRouter({
  register: workerProcedure
    .input(
      z.object({
        hostname: z.string().min(1),
        pid: z.number().int(),
        backend: z.string().min(1),
        devices: z.array(z.object({ kind: z.enum(["cpu", "gpu"]), name: z.string(), memoryMb: z.number().int().positive(), computeSlots: z.number().int().positive() })).min(1),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const workerId = newId("wrk");
      await ctx.db.insert(workers).values({ id: workerId, hostname: input.hostname, pid: input.pid, backend: input.backend });
      const deviceIds = input.devices.map(() => newId("dev"));
      await ctx.db.insert(devices).values(input.devices.map((d, i) => ({ id: deviceIds[i]!, workerId, ...d })));
      return { workerId, deviceIds, leaseSeconds: LEASE_SECONDS };
    }),

  /** Renews the worker's lease and its jobs' leases; answers with jobs to start and jobs to stop. */
  heartbeat: workerProcedure.input(z.object({ workerId: z.string(), running: z.array(z.object({ jobId: z.string(), step: z.number().int() })) })).mutation(async ({ ctx, input }) => {
    const now = new Date();
    const [worker] = await ctx.db.update(workers).set({ heartbeatAt: now }).where(and(eq(workers.id, input.workerId), eq(workers.status, "alive"))).returning({ id: workers.id });
    if (!worker) {
      throw new TRPCError({ code: "PRECONDITION_FAILED", message: `Worker '${input.workerId}' lost its lease; register again.` });
    }
    await ctx.db
      .update(jobs)
      .set({ leaseExpiresAt: new Date(now.getTime() + LEASE_SECONDS * 1000) })
      .where(and(eq(jobs.workerId, input.workerId), inArray(jobs.status, ["placing", "running"])));
    const assignments = await ctx.db
      .select({ jobId: jobs.id })
      .from(jobs)
      .where(and(eq(jobs.workerId, input.workerId), eq(jobs.status, "placing")))
      .orderBy(asc(jobs.submittedAt));
    const stops = await ctx.db
      .select({ jobId: jobs.id, why: jobs.stopRequested })
      .from(jobs)
      .where(and(eq(jobs.workerId, input.workerId), isNotNull(jobs.stopRequested), inArray(jobs.status, ["placing", "running"])));
    return { assignments: assignments.map((a) => a.jobId), stops: stops.map((s) => ({ jobId: s.jobId, why: s.why! })) };
  }),

  /** Takes a placed job: returns everything needed to run it, and where to resume from. */
  claim: workerProcedure.input(z.object({ workerId: z.string(), jobId: z.string() })).mutation(async ({ ctx, input }) => {
    const [job] = await ctx.db
      .update(jobs)
      .set({ status: "running", startedAt: sql`coalesce(${jobs.startedAt}, now())` })
      .where(and(eq(jobs.id, input.jobId), eq(jobs.workerId, input.workerId), eq(jobs.status, "placing")))
      .returning({ id: jobs.id, runId: jobs.runId, kind: jobs.kind, mode: jobs.mode, lastCheckpointId: jobs.lastCheckpointId, attempts: jobs.attempts });
    if (!job || !job.runId) throw new TRPCError({ code: "CONFLICT", message: `Job '${input.jobId}' is not waiting for worker '${input.workerId}'.` });
    const [run] = await ctx.db
      .select({ id: runs.id, config: runs.config, seed: runs.seed, files: experimentVersions.files })
      .from(runs)
      .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
      .where(eq(runs.id, job.runId));
    await ctx.db.update(runs).set({ status: "running", startedAt: sql`coalesce(${runs.startedAt}, now())`, reason: null }).where(eq(runs.id, job.runId));
    const resume = job.lastCheckpointId
      ? (await ctx.db.select({ path: checkpoints.path, step: checkpoints.step }).from(checkpoints).where(eq(checkpoints.id, job.lastCheckpointId)))[0] ?? null
      : null;
    await ctx.db.insert(runLogs).values({
      runId: job.runId,
      level: "info",
      message: resume ? `Resuming from the checkpoint of step ${resume.step} (attempt ${job.attempts + 1}).` : "Started.",
    });
    return { job, run: run!, resume };
  }),

  /** Stores metric points and rollouts; a point or rollout sent twice (after a retry) is stored once. */
  report: workerProcedure
    .input(
      z.object({
        workerId: z.string(),
        jobId: z.string(),
        step: z.number().int().min(0).optional(),
        metrics: z.array(metricPointSchema).max(100_000).default([]),
        rollouts: z.array(rolloutSchema).max(10_000).default([]),
        logs: z.array(z.object({ level: z.enum(["info", "warn", "error"]), message: z.string().max(10_000) })).max(1000).default([]),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const job = await requireJobOf(ctx, input.jobId, input.workerId);
      const runId = job.runId!;
      await ctx.db.transaction(async (tx) => {
        for (let i = 0; i < input.metrics.length; i += 1000) {
          await tx
            .insert(metricPoints)
            .values(input.metrics.slice(i, i + 1000).map((m) => ({ runId, step: m.step, name: m.name, value: m.value, wallTime: m.wallTime ?? new Date() })))
            .onConflictDoNothing();
        }
        for (let i = 0; i < input.rollouts.length; i += 200) {
          await tx
            .insert(rollouts)
            .values(input.rollouts.slice(i, i + 200).map((r) => ({ runId, ...withoutNulCharacters(r) })))
            .onConflictDoNothing();
        }
        if (input.logs.length) await tx.insert(runLogs).values(input.logs.map((l) => ({ runId, ...withoutNulCharacters(l) })));
        if (input.step !== undefined) await tx.update(runs).set({ step: input.step }).where(eq(runs.id, runId));
      });
      announceRunData(runId);
      return { stored: true };
    }),

  checkpoint: workerProcedure
    .input(z.object({ workerId: z.string(), jobId: z.string(), step: z.number().int().min(0), path: z.string().min(1), sizeBytes: z.number().int().min(0) }))
    .mutation(async ({ ctx, input }) => {
      const job = await requireJobOf(ctx, input.jobId, input.workerId);
      const id = newId("ckpt");
      const [row] = await ctx.db
        .insert(checkpoints)
        .values({ id, runId: job.runId!, step: input.step, kind: "state", path: input.path, sizeBytes: input.sizeBytes })
        .onConflictDoUpdate({ target: [checkpoints.runId, checkpoints.step, checkpoints.kind], set: { path: input.path, sizeBytes: input.sizeBytes } })
        .returning({ id: checkpoints.id });
      await ctx.db.update(jobs).set({ lastCheckpointId: row!.id }).where(eq(jobs.id, input.jobId));
      return { checkpointId: row!.id };
    }),

  /** Ends the worker's part in a job: done, failed, stopped as asked, or handed back to the queue. */
  finish: workerProcedure
    .input(z.object({ workerId: z.string(), jobId: z.string(), outcome: z.enum(["completed", "failed", "cancelled", "paused", "preempted"]), reason: z.string().max(10_000).nullable() }))
    .mutation(async ({ ctx, input }) => {
      const job = await requireJobOf(ctx, input.jobId, input.workerId);
      const { outcome } = input;
      const requeue = outcome === "preempted";
      const jobStatus = outcome === "preempted" ? "queued" : outcome;
      const ended = input.outcome === "completed" || input.outcome === "failed" || input.outcome === "cancelled";
      await ctx.db
        .update(jobs)
        .set({
          status: jobStatus,
          reason: input.reason,
          stopRequested: null,
          workerId: ended || input.outcome === "paused" || requeue ? null : undefined,
          deviceId: ended || input.outcome === "paused" || requeue ? null : undefined,
          finishedAt: ended ? new Date() : null,
        })
        .where(eq(jobs.id, input.jobId));
      const runStatus = jobStatus;
      await ctx.db
        .update(runs)
        .set({ status: runStatus, reason: input.reason, finishedAt: ended ? new Date() : null })
        .where(eq(runs.id, job.runId!));
      await ctx.db.insert(runLogs).values({
        runId: job.runId!,
        level: input.outcome === "failed" ? "error" : "info",
        message: `${input.outcome[0]!.toUpperCase()}${input.outcome.slice(1)}${input.reason ? `: ${input.reason}` : "."}`,
      });
      return { ok: true };
    }),

  /** A worker leaving cleanly: its devices go, and jobs it still held go back to the queue. */
  leave: workerProcedure.input(z.object({ workerId: z.string() })).mutation(async ({ ctx, input }) => {
    await ctx.db.update(workers).set({ status: "dead" }).where(eq(workers.id, input.workerId));
    await ctx.db
      .update(jobs)
      .set({ status: "queued", workerId: null, deviceId: null, reason: "worker left; resuming from the last checkpoint" })
      .where(and(eq(jobs.workerId, input.workerId), inArray(jobs.status, ["placing", "running"])));
    return { ok: true };
  }),
});

/**
 * PostgreSQL text and jsonb cannot hold U+0000, and a policy sampling raw bytes can produce it: each NUL becomes
 * U+FFFD (the replacement character) so the rollout is stored, visibly, instead of failing the whole report.
 */
function withoutNulCharacters<T>(value: T): T {
  if (typeof value === "string") return value.replaceAll("\u0000", "\uFFFD") as T;
  if (Array.isArray(value)) return value.map(withoutNulCharacters) as T;
  if (value && typeof value === "object" && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [withoutNulCharacters(k), withoutNulCharacters(v)])) as T;
  }
  return value;
}
