/**
 * The checkpoints runs made: those that may be an agent's base, a run's own, and where a run's base comes from.
 * Read only: server/jobs records and sets them aside.
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray, isNull } from "drizzle-orm";
import { baseCheckpointKinds, checkpoints, type Database, experiments, runs } from "../db";
import { describeLineage, resolveBase, UnknownBaseError } from "../jobs";

/**
 * The checkpoints of these projects' runs that may be an agent's base (not exports, not set aside as damaged), newest
 * first, at most `limit`, with the base and training mode of the run that made each.
 */
export async function baseCheckpoints(db: Database, projectIds: string[], limit: number) {
  if (projectIds.length === 0) return [];
  const rows = await db
    .select({
      id: checkpoints.id,
      step: checkpoints.step,
      /** "sampler": the weights alone (a session's saveWeightsForSampler); "state": resumable too. */
      kind: checkpoints.kind,
      path: checkpoints.path,
      createdAt: checkpoints.createdAt,
      runId: runs.id,
      runName: runs.name,
      experimentName: experiments.name,
      config: runs.config,
    })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(and(inArray(checkpoints.kind, baseCheckpointKinds), isNull(checkpoints.setAsideReason), inArray(runs.projectId, projectIds)))
    .orderBy(desc(checkpoints.createdAt))
    .limit(limit);
  return rows.map(({ config, ...row }) => ({
    ...row,
    parentBase: config.agent?.base ?? null,
    mode: config.agent?.training?.mode === "lora" ? ("lora" as const) : ("full" as const),
  }));
}

/** A run's checkpoints, newest first; a damaged one says why it was set aside. */
export async function checkpointsOfRun(db: Database, runId: string) {
  return db
    .select({
      id: checkpoints.id,
      step: checkpoints.step,
      kind: checkpoints.kind,
      sizeBytes: checkpoints.sizeBytes,
      createdAt: checkpoints.createdAt,
      setAsideReason: checkpoints.setAsideReason,
    })
    .from(checkpoints)
    .where(eq(checkpoints.runId, runId))
    .orderBy(desc(checkpoints.step));
}

/** A run's base and where it comes from: "ckpt_b (run x, step 40) ← arithmetic-base"; an unknown base is NOT_FOUND. */
export async function baseLineageOfRun(db: Database, runId: string): Promise<{ base: string; lineage: string }> {
  const [run] = await db.select({ config: runs.config }).from(runs).where(eq(runs.id, runId));
  const base = run?.config.agent?.base ?? "";
  try {
    return { base, lineage: describeLineage(await resolveBase(db, base)) };
  } catch (error) {
    if (error instanceof UnknownBaseError) throw new TRPCError({ code: "NOT_FOUND", message: error.message });
    throw error;
  }
}
