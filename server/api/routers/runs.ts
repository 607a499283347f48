import { type TRPCError, tracked } from "@trpc/server";
import { z } from "zod";
import { runStatus } from "../../db";
import { cloneRunAsVersion, launchExperiment, queueFromCheckpoint, relaunchRun, validateAhead } from "../../experiments";
import { EVALUATION_LIMITS } from "@/lib/trpc/limits";
import { deleteRun, renameRun, resumeRun, setRunArchived, setRunNotes, stopRun, tagRun } from "../../jobs";
import { CONDITION_OPS, DEFAULT_COLUMNS, MAX_TAGS, tagProblem } from "@/lib/runs-table";
import { watchRunAccess } from "../../auth";
import { metricStreamInput } from "../../metrics";
import {
  listRuns,
  logsAfter,
  metricFrames,
  metricPointsAfter,
  metricRange,
  metricSummary,
  playableRows,
  playableRun,
  promptAcrossSteps,
  requireRun,
  rolloutsOfStep,
  configAsSeen,
  runsTable,
  tableChoices,
} from "../../runs";
import { idempotencyKeyField, idempotently } from "../idempotency";
import { createTRPCRouter, projectProcedure, protectedProcedure, sharedRunProcedure } from "../trpc";

export const runsRouter = createTRPCRouter({
  /** Runs, newest first, with optional filters; `cursor` is the createdAt of the last run of the previous page. */
  list: protectedProcedure
    .input(
      z
        .object({
          experimentId: z.string().optional(),
          status: z.array(z.enum(runStatus.enumValues)).optional(),
          search: z.string().trim().max(200).optional(),
          limit: z.number().int().min(1).max(200).default(50),
          cursor: z.date().optional(),
          includeArchived: z.boolean().default(false).describe("archived runs too (hidden by default, as in the runs table)"),
        })
        .default({ limit: 50, includeArchived: false }),
    )
    .query(async ({ ctx, input }) => listRuns(ctx.db, await ctx.access.visibleProjects(), input)),

  /**
   * One project's runs as the runs table shows them (server/runs/table.ts): any built-in, metric-summary
   * (`metric:last|max|min|at<step>:<name>`) or config (`config:<dotted.path>`) column, sorted by any of them,
   * filtered by status, tags, text and conditions on column values, grouped by a config field with each group's
   * count and means, a page at a time. Evaluations and exports are left out unless `includeDerived`, archived runs
   * unless `includeArchived`.
   */
  table: projectProcedure("viewer", "project", "projectId")
    .input(
      z.object({
        projectId: z.string().min(1),
        columns: z
          .array(z.string().min(1).max(300))
          .max(40)
          .default([...DEFAULT_COLUMNS]),
        sort: z.object({ column: z.string().min(1).max(300), order: z.enum(["asc", "desc"]).default("desc") }).optional(),
        status: z.array(z.enum(runStatus.enumValues)).optional(),
        tags: z.array(z.string().min(1).max(40)).max(MAX_TAGS).optional(),
        text: z.string().trim().max(200).optional(),
        where: z
          .array(z.object({ column: z.string().min(1).max(300), op: z.enum(CONDITION_OPS), value: z.string().trim().min(1).max(200) }))
          .max(20)
          .optional(),
        groupBy: z.string().min(1).max(300).optional().describe("a config field's dotted path"),
        includeDerived: z.boolean().default(false).describe("list evaluations and exports too"),
        includeArchived: z.boolean().default(false),
        limit: z.number().int().min(1).max(1000).default(100),
        offset: z.number().int().min(0).max(1_000_000).default(0),
      }),
    )
    .query(({ ctx, input }) => runsTable(ctx.db, input)),

  /** What the runs table's pickers offer for a project: its runs' metric names, config fields and tags. */
  tableChoices: projectProcedure("viewer", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1) }))
    .query(({ ctx, input }) => tableChoices(ctx.db, input.projectId)),

  /** Adds and removes a run's tags; answers its tags. */
  tag: projectProcedure("editor", "run", "id")
    .input(
      z.object({
        id: z.string().min(1),
        add: z
          .array(z.string().refine((tag) => tagProblem(tag) === null, { error: (issue) => tagProblem(String(issue.input)) ?? "not a tag" }))
          .max(MAX_TAGS)
          .default([]),
        remove: z.array(z.string().max(40)).max(100).default([]),
      }),
    )
    .mutation(async ({ ctx, input }) => ({ tags: await tagRun(ctx.db, input.id, input) })),

  /** Sets a run's notes (free text). */
  setNotes: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), notes: z.string().max(10_000) }))
    .mutation(async ({ ctx, input }) => {
      await setRunNotes(ctx.db, input.id, input.notes);
      return { notes: input.notes };
    }),

  /** Renames a run; a name another run of its project has is refused (names are unique in a project). */
  rename: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), name: z.string().trim().min(1, "a run's name cannot be empty").max(200) }))
    .mutation(({ ctx, input }) => renameRun(ctx.db, input.id, input.name)),

  /** Archives a run (the runs table hides it unless asked for archived runs), or brings it back. */
  archive: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), archived: z.boolean() }))
    .mutation(async ({ ctx, input }) => {
      await setRunArchived(ctx.db, input.id, input.archived);
      return { archived: input.archived };
    }),

  /**
   * Deletes a run and all it recorded, once `confirmName` repeats its name. Refused, saying what, while the run is
   * queued, running or paused, or while a run starts from its checkpoint, an imported model was made from one, or a
   * share link shows it.
   */
  delete: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), confirmName: z.string().max(200).describe("the run's name, exactly, to confirm") }))
    .mutation(({ ctx, input }) => deleteRun(ctx.db, input.id, input.confirmName)),

  /** Saves a run's exact source and config as its experiment's next version, to edit and launch again. */
  clone: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), idempotencyKey: idempotencyKeyField }))
    .mutation(({ ctx, input }) => idempotently(ctx, "runs.clone", input, (ctx) => cloneRunAsVersion(ctx.db, input.id))),

  /**
   * Launches the run's experiment version again, source and config as they were, with another seed (`seed`, else
   * one past the highest seed of that version's runs). Refused for an evaluation, an export or a remote session.
   */
  rerun: projectProcedure("editor", "run", "id")
    .input(
      z.object({
        id: z.string().min(1),
        seed: z
          .number()
          .int()
          .min(0)
          .max(2 ** 31 - 1)
          .optional(),
        priority: z.number().int().min(-100).max(100).default(0),
        idempotencyKey: idempotencyKeyField,
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (input.idempotencyKey) await validateAhead(ctx, { runId: input.id });
      return idempotently(ctx, "runs.rerun", input, (ctx) => relaunchRun(ctx, input.id, input.seed, input.priority));
    }),

  /**
   * Launches a run of an experiment's latest version: snapshots its source and config into the run, and queues a
   * training job for the scheduler. What the editor refuses to launch is refused here too, in its words
   * (server/validation/browser.ts): a config with errors, and a custom environment whose source has errors in its
   * validation (the editor's, reused when the source, base and reply length are the same, else run now) or lacks
   * the demonstrator its SFT imitates. The answer carries that validation's other diagnostics (warnings).
   */
  launch: projectProcedure("editor", "experiment", "experimentId")
    .input(z.object({ experimentId: z.string().min(1), priority: z.number().int().min(-100).max(100).default(0), idempotencyKey: idempotencyKeyField }))
    .mutation(async ({ ctx, input }) => {
      // A keyed launch's transaction would hold PGlite's one connection through a validation: validate first.
      if (input.idempotencyKey) await validateAhead(ctx, { experimentId: input.experimentId });
      return idempotently(ctx, "runs.launch", input, (ctx) => launchExperiment(ctx, input.experimentId, input.priority));
    }),

  /**
   * Evaluates a checkpoint of a run: a new run (an evaluation job) whose base is that checkpoint plays the source
   * run's held-out episodes once, with its environment, protocol and sampling, and reports the score and rollouts.
   */
  evaluate: projectProcedure("editor", "checkpoint", "checkpointId")
    .input(
      z.object({
        checkpointId: z.string().min(1).max(200),
        episodes: z
          .number()
          .int()
          .min(1)
          .max(EVALUATION_LIMITS.episodes)
          .optional()
          .describe("held-out episodes (default: the source run's evaluation.episodes)"),
        temperature: z.number().min(0).max(EVALUATION_LIMITS.temperature).optional().describe("sampling temperature (default: the source run's, 0 = greedy)"),
        idempotencyKey: idempotencyKeyField,
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (input.idempotencyKey) await validateAhead(ctx, { checkpointId: input.checkpointId });
      return idempotently(ctx, "runs.evaluate", input, async (ctx) => {
        const runId = await queueFromCheckpoint(ctx, input.checkpointId, "eval", (evaluation) => ({
          ...evaluation,
          ...(input.episodes !== undefined ? { episodes: input.episodes } : {}),
          ...(input.temperature !== undefined ? { temperature: input.temperature } : {}),
        }));
        return { runId };
      });
    }),

  /**
   * Exports a checkpoint of a run as one safetensors file (a LoRA adapter merged into its base; the model's config
   * and tokenizer in the header): an export job, whose run lists the file to download (GET /api/exports/<id>).
   */
  export: projectProcedure("editor", "checkpoint", "checkpointId")
    .input(z.object({ checkpointId: z.string().min(1).max(200), idempotencyKey: idempotencyKeyField }))
    .mutation(({ ctx, input }) =>
      idempotently(ctx, "runs.export", input, async (ctx) => ({ runId: await queueFromCheckpoint(ctx, input.checkpointId, "export") })),
    ),

  /** Cancel, pause or resume a run: a running job stops at its next step (pause saves a checkpoint first). */
  control: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), action: z.enum(["cancel", "pause", "resume"]) }))
    .mutation(async ({ ctx, input }) => {
      if (input.action === "resume") {
        await resumeRun(ctx.db, input.id);
        return { state: "queued" as const };
      }
      return { state: await stopRun(ctx.db, input.id, input.action) };
    }),

  /** Metric points after a sequence number (0 = from the start): the run page polls or streams from here. */
  metrics: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1), afterSeq: z.number().int().min(0).default(0), limit: z.number().int().min(1).max(200_000).default(50_000) }))
    .query(({ ctx, input }) => metricPointsAfter(ctx.db, input.runId, input.afterSeq, input.limit)),

  /**
   * One series between two steps (inclusive), at full resolution when the range holds at most `maxPoints` points,
   * else as a min/max downsample of them: what a chart zoomed into a range draws, where the stream's summary has
   * only a few buckets. `count` is how many points the range really holds.
   */
  metricRange: sharedRunProcedure()
    .input(
      z
        .object({
          runId: z.string().min(1),
          name: z.string().min(1).max(200),
          fromStep: z.number().int().min(0),
          toStep: z.number().int().min(0),
          maxPoints: z.number().int().min(2).max(20_000).default(4_000),
        })
        .refine((r) => r.fromStep <= r.toStep, { message: "fromStep must not be after toStep", path: ["toStep"] }),
    )
    .query(({ ctx, input }) => metricRange(ctx.db, input)),

  /**
   * Every metric point of a run as a server-sent event stream, from the run's shared feed (server/metrics/feed.ts):
   * the history as a downsampled summary, then each new batch as workers report it. Each event's id is the last
   * point's sequence number, so a client that reconnects resumes right after the last event it received: no gap,
   * no duplicate. The stream ends once the run has ended and everything is sent, or with the error a fresh call
   * would get once the caller's right to the run is gone (its link, key or session revoked, its membership removed).
   * Over HTTP the same events come from server/metrics/stream-sse.ts, which sends each as one set of bytes to every
   * viewer.
   */
  metricStream: sharedRunProcedure()
    .input(metricStreamInput)
    .subscription(async function* ({ ctx, input, signal }) {
      const revoked = new AbortController();
      const unwatch = watchRunAccess(ctx.db, ctx.access.principal, input.runId, (error) => revoked.abort(error));
      const stop = signal ? AbortSignal.any([signal, revoked.signal]) : revoked.signal;
      try {
        for await (const frame of metricFrames(ctx.db, input.runId, input.lastEventId, stop)) {
          if (revoked.signal.aborted) break;
          yield tracked(frame.id, frame.data);
        }
      } finally {
        unwatch();
      }
      if (revoked.signal.aborted) throw revoked.signal.reason as TRPCError;
    }),

  /**
   * The run's metrics so far as the stream's first event would give them (a min/max summary per series with true
   * counts), and that event's id: the run page renders it with its HTML and subscribes after it.
   */
  metricSummary: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1) }))
    .query(({ ctx, input }) => metricSummary(ctx.db, input.runId)),

  /**
   * The rollouts of one step (the latest when none is named), by group and sample, with the steps before and after
   * it that have rollouts (for stepping through them).
   */
  rollouts: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1), split: z.enum(["train", "eval"]).default("train"), step: z.number().int().min(0).optional() }))
    .query(({ ctx, input }) => rolloutsOfStep(ctx.db, input)),

  /**
   * One prompt across training steps: every sample of the run whose prompt and first observation (the task) are
   * these, step by step (at most `limit` steps, the latest ones).
   */
  promptAcrossSteps: sharedRunProcedure()
    .input(
      z.object({
        runId: z.string().min(1),
        split: z.enum(["train", "eval"]).default("train"),
        prompt: z.string().max(100_000),
        observation: z.string().max(100_000),
        limit: z.number().int().min(1).max(1000).default(200),
      }),
    )
    .query(({ ctx, input }) => promptAcrossSteps(ctx.db, input)),

  logs: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1), afterSeq: z.number().int().min(0).default(0) }))
    .query(({ ctx, input }) => logsAfter(ctx.db, input.runId, input.afterSeq)),

  /**
   * What the playground's episode player needs to play the run's environment in the browser (server/playable.ts):
   * the environment (built in, or the experiment's own compiled for the sandbox), the protocol and the run's sampling.
   */
  playable: projectProcedure("viewer", "run", "runId")
    .input(z.object({ runId: z.string().min(1) }))
    .query(({ ctx, input }) => playableRun(ctx.db, input.runId)),

  /** Held-out rows of a dataset the run's environment reads (as a run splits it), for the episode player. */
  playableRows: projectProcedure("viewer", "run", "runId")
    .input(z.object({ runId: z.string().min(1), dataset: z.string().min(1).max(200) }))
    .query(({ ctx, input }) => playableRows(ctx.db, input.runId, input.dataset)),

  /**
   * A run with its config, and the caller's role in its project (null for a share link's holder): what the page lets
   * it do. It names no other run the caller may not read: a base that is such a run's checkpoint reads "a checkpoint
   * of another run".
   */
  byId: sharedRunProcedure("id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const run = await requireRun(ctx.db, input.id);
      return { ...run, config: await configAsSeen(ctx.db, run.config, ctx.access.mayReadRun), role: await ctx.access.roleIn(run.projectId) };
    }),
});
