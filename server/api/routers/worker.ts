/**
 * The API workers speak over HTTP: register with their devices, renew their lease by heartbeat (and hear which
 * jobs to start or stop), claim a job, report metrics and rollouts, record checkpoints, finish. Workers on this
 * machine and on others use the same calls; on the embedded database this is how they reach its tables. Each call
 * is one function of server/jobs, which a worker started with DATABASE_URL calls directly.
 */
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { checkpointKinds } from "../../db";
import { announceRunData } from "../../metrics";
import {
  claimJob,
  exchangeSessionCalls,
  finishJob,
  heartbeat,
  leaveWorker,
  MAX_CALLS_PER_REQUEST,
  recordCheckpoint,
  registerWorker,
  REPORT_LIMITS,
  setAsideCheckpoint,
  storeReport,
} from "../../jobs";
import { WORKER_TOKEN_HEADER } from "../../worker-protocol";
import { isWorkerToken } from "../limits";
import { createTRPCRouter, workerBaseProcedure } from "../trpc";

const holder = globalThis as typeof globalThis & { __tinkerlabWorkerToken?: string };

/** The token workers must present; the server sets it at start (from TINKERLAB_WORKER_TOKEN or a fresh one). */
export function setWorkerToken(token: string) {
  holder.__tinkerlabWorkerToken = token;
}

/**
 * Calls that carry the worker token. What server/jobs refuses (a job taken from this worker, a lease lost, a session
 * job it does not hold) is a WorkerConflictError or RunStateError, answered with its own code (server/api/trpc.ts).
 */
const workerProcedure = workerBaseProcedure.use(({ ctx, next }) => {
  if (!isWorkerToken(ctx.workerToken)) {
    throw new TRPCError({ code: "UNAUTHORIZED", message: `Workers must send the server's worker token in the ${WORKER_TOKEN_HEADER} header.` });
  }
  return next();
});

const metricPointSchema = z.object({ step: z.number().int().min(0), name: z.string().min(1).max(200), value: z.number(), wallTime: z.date().optional() });
const rolloutSchema = z.object({
  step: z.number().int().min(0),
  split: z.enum(["train", "eval"]),
  groupIndex: z.number().int().min(0),
  sampleIndex: z.number().int().min(0),
  prompt: z.string(),
  turns: z.array(
    z.object({
      agent: z.string().max(200).optional(),
      rewards: z.record(z.string(), z.number()).optional(),
      observation: z.string(),
      action: z.string(),
      reward: z.number().optional(),
      advantage: z.number().nullable().optional(),
      render: z.string().optional(),
      legalActions: z.union([z.object({ actions: z.array(z.string()).max(10_000) }), z.object({ pattern: z.string().max(1_000) })]).optional(),
      info: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
  rewards: z.record(z.string(), z.number()),
  totalReward: z.number(),
  advantage: z.number().nullable(),
  tokens: z.array(z.number().int()).nullable(),
  tokenLogprobs: z.array(z.number()).nullable(),
});

/**
 * A worker's answer to one session call: its result as JSON text, or its error. The text is stored and handed to
 * the client as it is, not parsed here: it comes from the worker's own code (answers of up to 64 MiB), behind the
 * worker token.
 */
const sessionAnswerSchema = z.object({
  callId: z.string(),
  resultJson: z.string().optional().describe("the call's result as JSON text, as JSON.stringify writes it (absent: null)"),
  error: z.string().max(100_000).nullable().default(null),
});

export const workerRouter = createTRPCRouter({
  register: workerProcedure
    .input(
      z.object({
        hostname: z.string().min(1),
        pid: z.number().int(),
        backend: z.string().min(1),
        devices: z
          .array(z.object({ kind: z.enum(["cpu", "gpu"]), name: z.string(), memoryMb: z.number().int().positive(), computeSlots: z.number().int().positive() }))
          .min(1),
      }),
    )
    .mutation(({ ctx, input }) => registerWorker(ctx.db, input)),

  /** Renews the worker's lease and its jobs' leases; answers with jobs to start and jobs to stop. */
  heartbeat: workerProcedure
    .input(
      z.object({
        workerId: z.string(),
        running: z.array(z.string()).max(1_000).default([]).describe("the jobs it is running"),
        lagMs: z.number().int().min(0).max(3_600_000).default(0).describe("how late its main thread ran its timers since the last heartbeat"),
      }),
    )
    .mutation(({ ctx, input }) => heartbeat(ctx.db, input.workerId, { lagMs: input.lagMs, running: input.running })),

  /** Takes a placed job: returns everything needed to run it, and where to resume from. */
  claim: workerProcedure
    .input(z.object({ workerId: z.string(), jobId: z.string() }))
    .mutation(({ ctx, input }) => claimJob(ctx.db, input.workerId, input.jobId)),

  /** Stores metric points and rollouts; a point or rollout sent twice (after a retry) is stored once. */
  report: workerProcedure
    .input(
      z.object({
        workerId: z.string(),
        jobId: z.string(),
        step: z.number().int().min(0).optional(),
        metrics: z.array(metricPointSchema).max(REPORT_LIMITS.metrics).default([]),
        rollouts: z.array(rolloutSchema).max(REPORT_LIMITS.rollouts).default([]),
        logs: z
          .array(z.object({ level: z.enum(["info", "warn", "error"]), message: z.string().max(10_000) }))
          .max(REPORT_LIMITS.logs)
          .default([]),
        warnings: z
          .array(z.object({ code: z.string().max(100), step: z.number().int().min(0), message: z.string().max(2_000) }))
          .max(20)
          .default([]),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      announceRunData(await storeReport(ctx.db, input));
      return { stored: true };
    }),

  checkpoint: workerProcedure
    .input(
      z.object({
        workerId: z.string(),
        jobId: z.string(),
        step: z.number().int().min(0),
        path: z.string().min(1),
        sizeBytes: z.number().int().min(0),
        kind: z.enum(checkpointKinds).default("state"),
      }),
    )
    .mutation(({ ctx, input }) => recordCheckpoint(ctx.db, input)),

  /** A checkpoint that failed its checksum when loaded: set aside; answers the run's newest good one before it. */
  setAside: workerProcedure
    .input(z.object({ workerId: z.string(), jobId: z.string(), checkpointId: z.string(), reason: z.string().max(2_000) }))
    .mutation(({ ctx, input }) => setAsideCheckpoint(ctx.db, input)),

  /** Ends the worker's part in a job: done, failed, stopped as asked, or handed back to the queue. */
  finish: workerProcedure
    .input(
      z.object({
        workerId: z.string(),
        jobId: z.string(),
        outcome: z.enum(["completed", "failed", "cancelled", "paused", "preempted"]),
        reason: z.string().max(10_000).nullable(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const { runId } = await finishJob(ctx.db, input);
      announceRunData(runId);
      return { ok: true };
    }),

  /**
   * A session worker's round trip: its answers to the calls it ran (a call keeps its first answer), then, with
   * `take`, the session's next calls in order (up to `max`), waiting up to `waitMs` for one.
   * What a worker sends between calls: one request per batch of calls instead of a take and an answer per call.
   */
  sessionExchange: workerProcedure
    .input(
      z.object({
        workerId: z.string(),
        jobId: z.string(),
        answers: z.array(sessionAnswerSchema).max(MAX_CALLS_PER_REQUEST).default([]),
        take: z
          .object({ waitMs: z.number().int().min(0).max(30_000), max: z.number().int().min(1).max(MAX_CALLS_PER_REQUEST).default(1) })
          .optional()
          .describe("then take the session's next calls"),
      }),
    )
    .mutation(({ ctx, input }) => exchangeSessionCalls(ctx.db, input)),

  /** A worker leaving cleanly: its devices go, and jobs it still held go back to the queue. */
  leave: workerProcedure
    .input(z.object({ workerId: z.string(), why: z.string().max(2_000).optional().describe("why it leaves, for its jobs' logs") }))
    .mutation(({ ctx, input }) => leaveWorker(ctx.db, input.workerId, input.why)),
});
