import { tracked, TRPCError } from "@trpc/server";
import { and, asc, desc, eq, gt, gte, ilike, inArray, lt, lte, max, min, or, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { defineExperiment, type ExperimentConfig, imitates, totalSteps } from "@/lib/sdk/experiment";
import { downsample } from "@/lib/series";
import { baseCheckpointKinds, checkpoints, experiments, experimentVersions, metricPoints, rollouts, runLogs, runs, runStatus } from "../../db";
import { useCases } from "@/lib/envs";
import { datasetFiles } from "../../datasets";
import type { ValidationReport } from "../../sandbox";
import { defaultSandboxLimits } from "../../sandbox/browser";
import { type LaunchRefusal, launchRefusal, refusalMessage } from "../../validation";
import { validateSource } from "./experiments";
import { EVALUATION_LIMITS, JobRejectedError, jobCost, launchRun, resumeRun, RunStateError, stopRun } from "../../jobs";
import { feedFrames, metricStreamInput, runFeed, RunNotFoundError } from "../../metrics";
import { importProjectModule } from "../../project-module";
import { importedTokenizerOf } from "../../base-tokenizers";
import { baseShapeFor } from "../base-shape";
import { type Context, createTRPCRouter, projectProcedure, protectedProcedure, sharedRunProcedure } from "../trpc";

const runColumns = {
  id: runs.id,
  name: runs.name,
  status: runs.status,
  reason: runs.reason,
  experimentId: runs.experimentId,
  experimentName: experiments.name,
  experimentVersionId: runs.experimentVersionId,
  seed: runs.seed,
  warnings: runs.warnings,
  step: runs.step,
  totalSteps: runs.totalSteps,
  resumedFromStep: runs.resumedFromStep,
  createdAt: runs.createdAt,
  startedAt: runs.startedAt,
  finishedAt: runs.finishedAt,
};

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
        })
        .default({ limit: 50 }),
    )
    .query(async ({ ctx, input }) => {
      const projectIds = await ctx.access.visibleProjects();
      if (projectIds.length === 0) return { items: [], nextCursor: null };
      const filters: SQL[] = [inArray(runs.projectId, projectIds)];
      if (input.experimentId) filters.push(eq(runs.experimentId, input.experimentId));
      if (input.status?.length) filters.push(inArray(runs.status, input.status));
      if (input.search) {
        const pattern = `%${input.search.replace(/[%_\\]/g, (c) => `\\${c}`)}%`;
        filters.push(or(ilike(runs.name, pattern), ilike(experiments.name, pattern), ilike(runs.id, pattern))!);
      }
      if (input.cursor) filters.push(lt(runs.createdAt, input.cursor));
      const items = await ctx.db
        .select(runColumns)
        .from(runs)
        .innerJoin(experiments, eq(experiments.id, runs.experimentId))
        .where(filters.length ? and(...filters) : undefined)
        .orderBy(desc(runs.createdAt))
        .limit(input.limit + 1);
      const nextCursor = items.length > input.limit ? items[input.limit - 1]!.createdAt : null;
      return { items: items.slice(0, input.limit), nextCursor };
    }),

  /**
   * Launches a run of an experiment's latest version: snapshots its source and config into the run, and queues a
   * training job for the scheduler. What the editor refuses to launch is refused here too, in its words
   * (server/validation/browser.ts): a config with errors, and a custom environment whose source has errors in its
   * validation (the editor's, reused when the source, base and reply length are the same, else run now) or lacks
   * the demonstrator its SFT imitates. The answer carries that validation's other diagnostics (warnings).
   */
  launch: projectProcedure("editor", "experiment", "experimentId")
    .input(z.object({ experimentId: z.string().min(1), priority: z.number().int().min(-100).max(100).default(0) }))
    .mutation(async ({ ctx, input }) => {
      const [version] = await ctx.db
        .select({
          id: experimentVersions.id,
          config: experimentVersions.config,
          files: experimentVersions.files,
          experimentName: experiments.name,
          projectId: experiments.projectId,
        })
        .from(experiments)
        .innerJoin(experimentVersions, and(eq(experimentVersions.experimentId, experiments.id), eq(experimentVersions.version, experiments.latestVersion)))
        .where(eq(experiments.id, input.experimentId));
      if (!version) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${input.experimentId}'` });
      const report = await launchableOrRefuse(ctx, version);
      const config = defineExperiment(version.config as never);
      if (imitates(config) === "dataset") {
        const file = (await datasetFiles(ctx.db, version.projectId))[config.sft.dataset];
        if (!file)
          throw new TRPCError({
            code: "BAD_REQUEST",
            message: `sft.dataset: this project has no uploaded dataset named '${config.sft.dataset}'; upload one on the Datasets page`,
          });
        if (file.kind !== "conversations") {
          throw new TRPCError({
            code: "BAD_REQUEST",
            message: `sft.dataset: '${config.sft.dataset}' holds rows, not conversations; SFT needs JSONL lines {"messages": [{"role", "content"}, …]}`,
          });
        }
      }
      const stamp = new Date().toISOString().slice(0, 16).replace(/[-:]/g, "").replace("T", "-");
      const runId = await queueRun(ctx, {
        experimentId: input.experimentId,
        projectId: version.projectId,
        experimentVersionId: version.id,
        createdBy: ctx.user.id,
        name: `${version.experimentName}-${config.environment}-s${config.seed}-${stamp}`,
        config,
        kind: config.algorithm.name === "sft" ? "sft" : "rl",
        priority: input.priority,
        maxTurns: maxTurnsOf(config, report),
      });
      await ctx.db.update(experiments).set({ updatedAt: new Date() }).where(eq(experiments.id, input.experimentId));
      return { runId, diagnostics: report?.diagnostics ?? [] };
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
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const runId = await queueFromCheckpoint(ctx, input.checkpointId, "eval", (evaluation) => ({
        ...evaluation,
        ...(input.episodes !== undefined ? { episodes: input.episodes } : {}),
        ...(input.temperature !== undefined ? { temperature: input.temperature } : {}),
      }));
      return { runId };
    }),

  /**
   * Exports a checkpoint of a run as one safetensors file (a LoRA adapter merged into its base; the model's config
   * and tokenizer in the header): an export job, whose run lists the file to download (GET /api/exports/<id>).
   */
  export: projectProcedure("editor", "checkpoint", "checkpointId")
    .input(z.object({ checkpointId: z.string().min(1).max(200) }))
    .mutation(async ({ ctx, input }) => {
      return { runId: await queueFromCheckpoint(ctx, input.checkpointId, "export") };
    }),

  /** Cancel, pause or resume a run: a running job stops at its next step (pause saves a checkpoint first). */
  control: projectProcedure("editor", "run", "id")
    .input(z.object({ id: z.string().min(1), action: z.enum(["cancel", "pause", "resume"]) }))
    .mutation(async ({ ctx, input }) => {
      try {
        if (input.action === "resume") {
          await resumeRun(ctx.db, input.id);
          return { state: "queued" as const };
        }
        return { state: await stopRun(ctx.db, input.id, input.action) };
      } catch (error) {
        if (error instanceof RunStateError) throw new TRPCError({ code: error.code, message: error.message });
        throw error;
      }
    }),

  /** Metric points after a sequence number (0 = from the start): the run page polls or streams from here. */
  metrics: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1), afterSeq: z.number().int().min(0).default(0), limit: z.number().int().min(1).max(200_000).default(50_000) }))
    .query(async ({ ctx, input }) => {
      const points = await ctx.db
        .select({ seq: metricPoints.seq, name: metricPoints.name, step: metricPoints.step, value: metricPoints.value, wallTime: metricPoints.wallTime })
        .from(metricPoints)
        .where(and(eq(metricPoints.runId, input.runId), gt(metricPoints.seq, input.afterSeq)))
        .orderBy(asc(metricPoints.seq))
        .limit(input.limit);
      return { points, lastSeq: points.at(-1)?.seq ?? input.afterSeq };
    }),

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
    .query(async ({ ctx, input }) => {
      const [run] = await ctx.db.select({ id: runs.id }).from(runs).where(eq(runs.id, input.runId));
      if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `no run '${input.runId}'` });
      const rows = await ctx.db
        .select({ step: metricPoints.step, value: metricPoints.value, wallTime: metricPoints.wallTime })
        .from(metricPoints)
        .where(
          and(
            eq(metricPoints.runId, input.runId),
            eq(metricPoints.name, input.name),
            gte(metricPoints.step, input.fromStep),
            lte(metricPoints.step, input.toStep),
          ),
        )
        .orderBy(asc(metricPoints.step));
      const points = rows.map((r) => ({ step: r.step, value: r.value, wallTime: r.wallTime.getTime() }));
      return { points: downsample(points, input.maxPoints), count: points.length };
    }),

  /**
   * Every metric point of a run as a server-sent event stream, from the run's shared feed (server/metrics/feed.ts):
   * the history as a downsampled summary, then each new batch as workers report it. Each event's id is the last
   * point's sequence number, so a client that reconnects resumes right after the last event it received: no gap,
   * no duplicate. The stream ends once the run has ended and everything is sent. Over HTTP the same events come
   * from server/metrics/stream-sse.ts, which sends each as one set of bytes to every viewer.
   */
  metricStream: sharedRunProcedure()
    .input(metricStreamInput)
    .subscription(async function* ({ ctx, input, signal }) {
      const after = Number(input.lastEventId ?? 0);
      if (!Number.isSafeInteger(after) || after < 0) {
        throw new TRPCError({
          code: "BAD_REQUEST",
          message: `lastEventId: '${input.lastEventId}' is not an event id of this stream (a sequence number, 0 or more)`,
        });
      }
      try {
        for await (const frame of feedFrames(ctx.db, input.runId, after, signal)) yield tracked(frame.id, frame.data);
      } catch (error) {
        if (error instanceof RunNotFoundError) throw new TRPCError({ code: "NOT_FOUND", message: error.message });
        throw error;
      }
    }),

  /**
   * The run's metrics so far as the stream's first event would give them (a min/max summary per series with true
   * counts), and that event's id: the run page renders it with its HTML and subscribes after it.
   */
  metricSummary: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      try {
        const frame = await runFeed(ctx.db, input.runId).summary();
        return frame ? { id: frame.id, event: frame.data } : null;
      } catch (error) {
        if (error instanceof RunNotFoundError) throw new TRPCError({ code: "NOT_FOUND", message: error.message });
        throw error;
      }
    }),

  /**
   * The rollouts of one step (the latest when none is named), by group and sample, with the steps before and after
   * it that have rollouts (for stepping through them).
   */
  rollouts: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1), split: z.enum(["train", "eval"]).default("train"), step: z.number().int().min(0).optional() }))
    .query(async ({ ctx, input }) => {
      const ofRun = and(eq(rollouts.runId, input.runId), eq(rollouts.split, input.split));
      const [bounds] = await ctx.db
        .select({ first: min(rollouts.step), last: max(rollouts.step) })
        .from(rollouts)
        .where(ofRun);
      const step = input.step ?? bounds?.last ?? null;
      const none = { step: null, firstStep: null, lastStep: null, prevStep: null, nextStep: null, items: [] };
      if (step === null) return none;
      const [items, [prev], [next]] = await Promise.all([
        ctx.db
          .select({
            groupIndex: rollouts.groupIndex,
            sampleIndex: rollouts.sampleIndex,
            prompt: rollouts.prompt,
            turns: rollouts.turns,
            rewards: rollouts.rewards,
            totalReward: rollouts.totalReward,
            advantage: rollouts.advantage,
            tokens: rollouts.tokens,
            tokenLogprobs: rollouts.tokenLogprobs,
          })
          .from(rollouts)
          .where(and(ofRun, eq(rollouts.step, step)))
          .orderBy(asc(rollouts.groupIndex), asc(rollouts.sampleIndex)),
        ctx.db
          .select({ step: max(rollouts.step) })
          .from(rollouts)
          .where(and(ofRun, lt(rollouts.step, step))),
        ctx.db
          .select({ step: min(rollouts.step) })
          .from(rollouts)
          .where(and(ofRun, gt(rollouts.step, step))),
      ]);
      // An imported model's token ids mean nothing to the page: they come with their text.
      const [run] = await ctx.db.select({ config: runs.config }).from(runs).where(eq(runs.id, input.runId));
      const baseName = (run?.config as { agent?: { base?: unknown } } | undefined)?.agent?.base;
      const tokenizer = typeof baseName === "string" && items.some((i) => i.tokens) ? await importedTokenizerOf(ctx.db, baseName) : null;
      const withTexts = items.map((item) => ({ ...item, tokenTexts: tokenizer && item.tokens ? item.tokens.map((t) => tokenizer.tokenText(t)) : null }));
      return {
        step,
        firstStep: bounds?.first ?? null,
        lastStep: bounds?.last ?? null,
        prevStep: prev?.step ?? null,
        nextStep: next?.step ?? null,
        items: withTexts,
      };
    }),

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
    .query(async ({ ctx, input }) => {
      const rows = await ctx.db
        .select({
          step: rollouts.step,
          groupIndex: rollouts.groupIndex,
          sampleIndex: rollouts.sampleIndex,
          totalReward: rollouts.totalReward,
          action: sql<string | null>`${rollouts.turns}->0->>'action'`,
        })
        .from(rollouts)
        .where(
          and(
            eq(rollouts.runId, input.runId),
            eq(rollouts.split, input.split),
            eq(rollouts.prompt, input.prompt),
            sql`${rollouts.turns}->0->>'observation' = ${input.observation}`,
            inArray(
              rollouts.step,
              ctx.db
                .selectDistinct({ step: rollouts.step })
                .from(rollouts)
                .where(
                  and(
                    eq(rollouts.runId, input.runId),
                    eq(rollouts.split, input.split),
                    eq(rollouts.prompt, input.prompt),
                    sql`${rollouts.turns}->0->>'observation' = ${input.observation}`,
                  ),
                )
                .orderBy(desc(rollouts.step))
                .limit(input.limit),
            ),
          ),
        )
        .orderBy(asc(rollouts.step), asc(rollouts.groupIndex), asc(rollouts.sampleIndex));
      const steps: { step: number; samples: { groupIndex: number; sampleIndex: number; totalReward: number; action: string }[]; meanReward: number }[] = [];
      for (const row of rows) {
        let entry = steps.at(-1);
        if (entry?.step !== row.step) steps.push((entry = { step: row.step, samples: [], meanReward: 0 }));
        entry.samples.push({ groupIndex: row.groupIndex, sampleIndex: row.sampleIndex, totalReward: row.totalReward, action: row.action ?? "" });
      }
      for (const entry of steps) entry.meanReward = entry.samples.reduce((sum, s) => sum + s.totalReward, 0) / entry.samples.length;
      return { steps };
    }),

  logs: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1), afterSeq: z.number().int().min(0).default(0) }))
    .query(async ({ ctx, input }) => {
      return ctx.db
        .select({ seq: runLogs.seq, level: runLogs.level, message: runLogs.message, createdAt: runLogs.createdAt })
        .from(runLogs)
        .where(and(eq(runLogs.runId, input.runId), gt(runLogs.seq, input.afterSeq)))
        .orderBy(asc(runLogs.seq))
        .limit(1000);
    }),

  /**
   * What the playground's episode player needs to play the run's environment in the browser (server/playable.ts):
   * the environment (built in, or the experiment's own compiled for the sandbox), the protocol and the run's sampling.
   */
  playable: projectProcedure("viewer", "run", "runId")
    .input(z.object({ runId: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const { playableRun, PlayableError } = await playableModule();
      try {
        return await playableRun(ctx.db, input.runId);
      } catch (error) {
        if (error instanceof PlayableError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
        throw error;
      }
    }),

  /** Held-out rows of a dataset the run's environment reads (as a run splits it), for the episode player. */
  playableRows: projectProcedure("viewer", "run", "runId")
    .input(z.object({ runId: z.string().min(1), dataset: z.string().min(1).max(200) }))
    .query(async ({ ctx, input }) => {
      const [run] = await ctx.db.select({ projectId: runs.projectId }).from(runs).where(eq(runs.id, input.runId));
      if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${input.runId}'` });
      const { heldOutRows, PlayableError } = await playableModule();
      try {
        return await heldOutRows(ctx.db, run.projectId, input.dataset);
      } catch (error) {
        if (error instanceof PlayableError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
        throw error;
      }
    }),

  /** A run with its config, and the caller's role in its project (null for a share link's holder): what the page lets it do. */
  byId: sharedRunProcedure("id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const [run] = await ctx.db
        .select({ ...runColumns, projectId: runs.projectId, config: runs.config })
        .from(runs)
        .innerJoin(experiments, eq(experiments.id, runs.experimentId))
        .where(eq(runs.id, input.id))
        .limit(1);
      if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${input.id}'` });
      return { ...run, role: await ctx.access.roleIn(run.projectId) };
    }),
});

/**
 * Refuses (BAD_REQUEST, in the editor's words) a version the editor would not launch: the same check as its Launch
 * button (`launchRefusal`), on the version's config, its files and, for a custom environment, its validation as the
 * editor asks for it. Returns that validation's report (null for a built-in environment).
 */
async function launchableOrRefuse(
  ctx: Pick<Context, "db" | "access">,
  version: { config: Record<string, unknown>; files: Record<string, string>; projectId: string },
): Promise<ValidationReport | null> {
  const context = { files: version.files, builtInEnvironments: Object.keys(useCases) };
  const refuse = (refusal: LaunchRefusal) => new TRPCError({ code: "BAD_REQUEST", message: refusalMessage(refusal) });
  // The config's own errors need no validation; nor does a built-in environment, which runs no source.
  const before = launchRefusal(version.config, { ...context, report: null });
  if (before) throw refuse(before);
  const config = defineExperiment(version.config as never);
  if (config.environment !== "custom") return null;
  const report = await validateSource(ctx, version.projectId, version.files, { base: config.agent.base, maxTokens: config.agent.sampling.maxTokens });
  const refusal = launchRefusal(version.config, { ...context, report });
  if (refusal) throw refuse(refusal);
  return report;
}

/** server/playable.ts compiles with esbuild and reads files beside lib/envs, which Next cannot bundle. */
const playableModule = () => importProjectModule<typeof import("@/server/playable")>("server/playable.ts");

/**
 * Checks a run's base and queues it with the footprint of its job kind: training (RL, SFT) or an evaluation,
 * which holds the weights and a KV cache but no gradients or optimizer.
 */
async function queueRun(
  ctx: Pick<Context, "db" | "access">,
  run: {
    experimentId: string;
    projectId: string;
    experimentVersionId: string;
    createdBy: string;
    name: string;
    config: ExperimentConfig;
    kind: "rl" | "sft" | "eval" | "export";
    priority: number;
    /** The most turns an episode may take: its cost bound counts them (server/jobs/admission.ts). */
    maxTurns: number;
  },
): Promise<string> {
  const { db } = ctx;
  const { config } = run;
  const shape = await baseShapeFor(ctx, config.agent.base, "agent.base");
  const training = run.kind === "rl" || run.kind === "sft";
  try {
    const { runId } = await launchRun(
      db,
      {
        experimentId: run.experimentId,
        projectId: run.projectId,
        experimentVersionId: run.experimentVersionId,
        createdBy: run.createdBy,
        name: run.name,
        config: config as unknown as Record<string, unknown>,
        seed: config.seed,
        totalSteps: training ? totalSteps(config) : 0,
      },
      {
        priority: run.priority,
        cost: jobCost({ kind: run.kind, config, model: shape, maxTurns: run.maxTurns }),
        resources: {
          kind: run.kind,
          mode: training ? config.agent.training.mode : "full",
          baseModel: config.agent.base,
          model: { name: config.agent.base, parameters: shape.parameters, dModel: shape.dModel, nLayers: shape.nLayers },
          batchSize:
            run.kind === "sft" ? config.sft.batchSize : training ? config.algorithm.groupSize * config.algorithm.groupsPerStep : config.evaluation.episodes,
          contextLength: shape.contextLength,
          loraRank: training && config.agent.training.mode === "lora" ? config.agent.training.rank : undefined,
          computeSlots: 1,
        },
      },
    );
    return runId;
  } catch (error) {
    if (error instanceof JobRejectedError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
    throw error;
  }
}

/** Queues an evaluation or export of a run's checkpoint: a run of its own, named after the source, whose base is the checkpoint. */
async function queueFromCheckpoint(
  ctx: Pick<Context, "db" | "access"> & { user: { id: string } },
  checkpointId: string,
  kind: "eval" | "export",
  evaluation: (current: ExperimentConfig["evaluation"]) => ExperimentConfig["evaluation"] = (current) => current,
): Promise<string> {
  const [source] = await ctx.db
    .select({
      runName: runs.name,
      config: runs.config,
      experimentId: runs.experimentId,
      projectId: runs.projectId,
      versionId: runs.experimentVersionId,
      step: checkpoints.step,
    })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(and(eq(checkpoints.id, checkpointId), inArray(checkpoints.kind, baseCheckpointKinds)));
  if (!source) throw new TRPCError({ code: "NOT_FOUND", message: `No checkpoint '${checkpointId}'; a run's checkpoints are listed on its page` });
  const original = defineExperiment(source.config as never);
  const config = defineExperiment({
    ...original,
    agent: { ...original.agent, base: checkpointId, training: { mode: "full" } },
    evaluation: evaluation(original.evaluation),
  } as never);
  return queueRun(ctx, {
    experimentId: source.experimentId,
    projectId: source.projectId,
    experimentVersionId: source.versionId,
    createdBy: ctx.user.id,
    name: `${source.runName}-${kind}-step${source.step}`,
    config,
    kind,
    priority: 0,
    maxTurns: kind === "export" ? 0 : maxTurnsOf(config, config.environment === "custom" ? await validateVersion(ctx, source) : null),
  });
}

/**
 * The most turns one of a run's episodes may take: a built-in environment's maxTurns, a custom one's from its
 * validation, else the sandbox's cap on an episode's steps (an episode that runs longer fails).
 */
function maxTurnsOf(config: ExperimentConfig, report: ValidationReport | null): number {
  if (config.environment !== "custom") return useCases[config.environment]?.environment.maxTurns ?? defaultSandboxLimits.maxStepsPerEpisode;
  return report?.environment?.maxTurns ?? defaultSandboxLimits.maxStepsPerEpisode;
}

/** A run version's own environment, validated as its launch did (reused when that validation is recent). */
async function validateVersion(ctx: Pick<Context, "db" | "access">, source: { projectId: string; versionId: string; config: unknown }) {
  const [version] = await ctx.db.select({ files: experimentVersions.files }).from(experimentVersions).where(eq(experimentVersions.id, source.versionId));
  const original = defineExperiment(source.config as never);
  return validateSource(ctx, source.projectId, (version?.files ?? {}) as Record<string, string>, {
    base: original.agent.base,
    maxTokens: original.agent.sampling.maxTokens,
  }).catch(() => null);
}
