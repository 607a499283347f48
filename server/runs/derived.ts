/**
 * A run's derived runs: the evaluations and exports of its checkpoints. Each is a run of its own (its job's kind
 * "eval" or "export") whose base is one of the source run's checkpoints (server/experiments/launch.ts,
 * queueFromCheckpoint), so the source run's page lists them with their scores and downloads. Read only.
 */
import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import { checkpoints, type Database, jobs, metricPoints, runs } from "../db";

const DERIVED_KINDS = ["eval", "export"] as const;
export type DerivedKind = (typeof DERIVED_KINDS)[number];

/**
 * The evaluations and exports of `runId`'s checkpoints, newest first (at most `limit`): each with the checkpoint it
 * started from, an evaluation's settings and score (its last `eval/score`, null until reported), and an export's
 * files (the export checkpoints `/api/exports/<id>` downloads).
 */
export async function derivedRunsOf(db: Database, runId: string, limit = 100) {
  const rows = await db
    .select({
      id: runs.id,
      name: runs.name,
      status: runs.status,
      reason: runs.reason,
      createdAt: runs.createdAt,
      finishedAt: runs.finishedAt,
      config: runs.config,
      checkpointId: checkpoints.id,
      checkpointStep: checkpoints.step,
      // A run has one job; `max` keeps one row should a run ever have had two.
      kind: sql<DerivedKind>`max(${jobs.kind}::text)`,
    })
    .from(runs)
    .innerJoin(checkpoints, eq(checkpoints.id, sql`${runs.config}->'agent'->>'base'`))
    .innerJoin(jobs, eq(jobs.runId, runs.id))
    .where(and(eq(checkpoints.runId, runId), inArray(jobs.kind, [...DERIVED_KINDS])))
    .groupBy(runs.id, checkpoints.id)
    .orderBy(desc(runs.createdAt))
    .limit(limit);
  if (rows.length === 0) return [];
  const ids = rows.map((row) => row.id);
  const [scores, files] = await Promise.all([
    db
      .selectDistinctOn([metricPoints.runId], { runId: metricPoints.runId, value: metricPoints.value })
      .from(metricPoints)
      .where(and(inArray(metricPoints.runId, ids), eq(metricPoints.name, "eval/score")))
      .orderBy(metricPoints.runId, desc(metricPoints.step)),
    db
      .select({ runId: checkpoints.runId, id: checkpoints.id, sizeBytes: checkpoints.sizeBytes, path: checkpoints.path })
      .from(checkpoints)
      .where(and(inArray(checkpoints.runId, ids), eq(checkpoints.kind, "export"))),
  ]);
  const scoreOf = new Map(scores.map((s) => [s.runId, s.value]));
  return rows.map(({ config, ...row }) => ({
    ...row,
    evaluation: row.kind === "eval" ? { episodes: config.evaluation.episodes, temperature: config.evaluation.temperature } : null,
    score: scoreOf.get(row.id) ?? null,
    // "tar": one safetensors per agent, the export of a run whose agents had separate policies.
    downloads: files
      .filter((file) => file.runId === row.id)
      .map(({ id, sizeBytes, path }) => ({ id, sizeBytes, format: path.endsWith(".tar") ? ("tar" as const) : ("safetensors" as const) })),
  }));
}

/**
 * The run an evaluation or export was started from, and the step of the checkpoint it took; null for any other run
 * (a training run, even one whose base is a checkpoint, is a run of its own).
 */
export async function sourceOfDerivedRun(db: Database, runId: string) {
  const source = alias(runs, "source");
  const [row] = await db
    .select({ kind: sql<DerivedKind>`${jobs.kind}::text`, runId: source.id, name: source.name, checkpointStep: checkpoints.step })
    .from(runs)
    .innerJoin(jobs, and(eq(jobs.runId, runs.id), inArray(jobs.kind, [...DERIVED_KINDS])))
    .innerJoin(checkpoints, eq(checkpoints.id, sql`${runs.config}->'agent'->>'base'`))
    .innerJoin(source, eq(source.id, checkpoints.runId))
    .where(eq(runs.id, runId))
    .limit(1);
  return row ?? null;
}
