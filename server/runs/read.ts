/**
 * What the workbench reads of runs: lists, one run, its metric points, rollouts, logs. Read only: server/jobs is
 * the one writer of runs and jobs.
 */
import { TRPCError } from "@trpc/server";
import { and, asc, desc, eq, gt, gte, ilike, inArray, isNull, lt, lte, max, min, or, type SQL, sql } from "drizzle-orm";
import type { RunState } from "@/lib/lifecycle";
import { downsample } from "@/lib/series";
import { importedTokenizerOf } from "../base-tokenizers";
import { type Database, experiments, metricPoints, rollouts, runLogs, runs } from "../db";

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

export type RunFilters = { experimentId?: string; status?: RunState[]; search?: string; limit: number; cursor?: Date; includeArchived?: boolean };

/** Runs of these projects, newest first; `cursor` is the createdAt of the last run of the previous page. */
export async function listRuns(db: Database, projectIds: string[], input: RunFilters) {
  if (projectIds.length === 0) return { items: [], nextCursor: null };
  const filters: SQL[] = [inArray(runs.projectId, projectIds)];
  if (input.experimentId) filters.push(eq(runs.experimentId, input.experimentId));
  // Archived runs are put out of sight (the runs table's Archive): shown only when asked for, as there.
  if (!input.includeArchived) filters.push(isNull(runs.archivedAt));
  if (input.status?.length) filters.push(inArray(runs.status, input.status));
  if (input.search) {
    const pattern = `%${input.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    filters.push(or(ilike(runs.name, pattern), ilike(experiments.name, pattern), ilike(runs.id, pattern))!);
  }
  if (input.cursor) filters.push(lt(runs.createdAt, input.cursor));
  const items = await db
    .select(runColumns)
    .from(runs)
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(and(...filters))
    .orderBy(desc(runs.createdAt))
    .limit(input.limit + 1);
  const nextCursor = items.length > input.limit ? items[input.limit - 1]!.createdAt : null;
  return { items: items.slice(0, input.limit), nextCursor };
}

/** A run with its project and config, or NOT_FOUND. */
export async function requireRun(db: Database, id: string) {
  const [run] = await db
    .select({ ...runColumns, projectId: runs.projectId, config: runs.config })
    .from(runs)
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(eq(runs.id, id))
    .limit(1);
  if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${id}'` });
  return run;
}

/** The project a run belongs to, or NOT_FOUND. */
export async function projectOfRun(db: Database, id: string): Promise<string> {
  const [run] = await db.select({ projectId: runs.projectId }).from(runs).where(eq(runs.id, id));
  if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${id}'` });
  return run.projectId;
}

/** Metric points after a sequence number (0 = from the start), at most `limit`. */
export async function metricPointsAfter(db: Database, runId: string, afterSeq: number, limit: number) {
  const points = await db
    .select({ seq: metricPoints.seq, name: metricPoints.name, step: metricPoints.step, value: metricPoints.value, wallTime: metricPoints.wallTime })
    .from(metricPoints)
    .where(and(eq(metricPoints.runId, runId), gt(metricPoints.seq, afterSeq)))
    .orderBy(asc(metricPoints.seq))
    .limit(limit);
  return { points, lastSeq: points.at(-1)?.seq ?? afterSeq };
}

/**
 * One series between two steps (inclusive), at full resolution when the range holds at most `maxPoints` points,
 * else as a min/max downsample of them; `count` is how many points the range really holds.
 */
export async function metricRange(db: Database, input: { runId: string; name: string; fromStep: number; toStep: number; maxPoints: number }) {
  await projectOfRun(db, input.runId);
  const rows = await db
    .select({ step: metricPoints.step, value: metricPoints.value, wallTime: metricPoints.wallTime })
    .from(metricPoints)
    .where(
      and(eq(metricPoints.runId, input.runId), eq(metricPoints.name, input.name), gte(metricPoints.step, input.fromStep), lte(metricPoints.step, input.toStep)),
    )
    .orderBy(asc(metricPoints.step));
  const points = rows.map((r) => ({ step: r.step, value: r.value, wallTime: r.wallTime.getTime() }));
  return { points: downsample(points, input.maxPoints), count: points.length };
}

/** What a rollout row holds, as a step's page and the whole-run download (./rollout-lines.ts) read it. */
export const rolloutColumns = {
  groupIndex: rollouts.groupIndex,
  sampleIndex: rollouts.sampleIndex,
  prompt: rollouts.prompt,
  turns: rollouts.turns,
  rewards: rollouts.rewards,
  totalReward: rollouts.totalReward,
  advantage: rollouts.advantage,
  tokens: rollouts.tokens,
  tokenLogprobs: rollouts.tokenLogprobs,
};

/**
 * The rollouts of one step (the latest when none is named), by group and sample, with the steps before and after
 * it that have rollouts. An imported model's token ids come with their text.
 */
export async function rolloutsOfStep(db: Database, input: { runId: string; split: "train" | "eval"; step?: number }) {
  const ofRun = and(eq(rollouts.runId, input.runId), eq(rollouts.split, input.split));
  const [bounds] = await db
    .select({ first: min(rollouts.step), last: max(rollouts.step) })
    .from(rollouts)
    .where(ofRun);
  const step = input.step ?? bounds?.last ?? null;
  if (step === null) return { step: null, firstStep: null, lastStep: null, prevStep: null, nextStep: null, items: [] };
  const [items, [prev], [next], [run]] = await Promise.all([
    db
      .select(rolloutColumns)
      .from(rollouts)
      .where(and(ofRun, eq(rollouts.step, step)))
      .orderBy(asc(rollouts.groupIndex), asc(rollouts.sampleIndex)),
    db
      .select({ step: max(rollouts.step) })
      .from(rollouts)
      .where(and(ofRun, lt(rollouts.step, step))),
    db
      .select({ step: min(rollouts.step) })
      .from(rollouts)
      .where(and(ofRun, gt(rollouts.step, step))),
    db.select({ config: runs.config }).from(runs).where(eq(runs.id, input.runId)),
  ]);
  const baseName = run?.config.agent?.base;
  const tokenizer = typeof baseName === "string" && items.some((i) => i.tokens) ? await importedTokenizerOf(db, baseName) : null;
  return {
    step,
    firstStep: bounds?.first ?? null,
    lastStep: bounds?.last ?? null,
    prevStep: prev?.step ?? null,
    nextStep: next?.step ?? null,
    items: items.map((item) => ({ ...item, tokenTexts: tokenizer && item.tokens ? item.tokens.map((t) => tokenizer.tokenText(t)) : null })),
  };
}

/**
 * One prompt across training steps: every sample of the run whose prompt and first observation (the task) are
 * these, step by step (at most `limit` steps, the latest ones).
 */
export async function promptAcrossSteps(db: Database, input: { runId: string; split: "train" | "eval"; prompt: string; observation: string; limit: number }) {
  const samePrompt = and(
    eq(rollouts.runId, input.runId),
    eq(rollouts.split, input.split),
    eq(rollouts.prompt, input.prompt),
    sql`${rollouts.turns}->0->>'observation' = ${input.observation}`,
  );
  const rows = await db
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
        samePrompt,
        inArray(rollouts.step, db.selectDistinct({ step: rollouts.step }).from(rollouts).where(samePrompt).orderBy(desc(rollouts.step)).limit(input.limit)),
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
}

/** A run's log lines after a sequence number, at most 1,000. */
export async function logsAfter(db: Database, runId: string, afterSeq: number) {
  return db
    .select({ seq: runLogs.seq, level: runLogs.level, message: runLogs.message, createdAt: runLogs.createdAt })
    .from(runLogs)
    .where(and(eq(runLogs.runId, runId), gt(runLogs.seq, afterSeq)))
    .orderBy(asc(runLogs.seq))
    .limit(1000);
}
