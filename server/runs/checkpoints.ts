/**
 * The checkpoints runs made: those that may be an agent's base, a run's own, and where a run's base comes from.
 * Read only: server/jobs records and sets them aside.
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray, isNull } from "drizzle-orm";
import { baseCheckpointKinds, checkpoints, type Database, experiments, runs } from "../db";
import { type BaseSource, describeLineage, isCheckpointBase } from "../jobs";

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

/** What a checkpoint's row shows, in a run's list and on the Models page. */
const checkpointColumns = {
  id: checkpoints.id,
  step: checkpoints.step,
  kind: checkpoints.kind,
  sizeBytes: checkpoints.sizeBytes,
  createdAt: checkpoints.createdAt,
  setAsideReason: checkpoints.setAsideReason,
};

/**
 * Every checkpoint of these projects' runs (exports and damaged ones too), newest first, at most `limit`, with the
 * run and experiment that made each: what the Models page lists.
 */
export async function checkpointsOfProjects(db: Database, projectIds: string[], limit: number) {
  if (projectIds.length === 0) return [];
  return db
    .select({
      ...checkpointColumns,
      runId: runs.id,
      runName: runs.name,
      projectId: runs.projectId,
      experimentName: experiments.name,
    })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(inArray(runs.projectId, projectIds))
    .orderBy(desc(checkpoints.createdAt), desc(checkpoints.step))
    .limit(limit);
}

/** A run's checkpoints, newest first; a damaged one says why it was set aside. */
export async function checkpointsOfRun(db: Database, runId: string) {
  return db.select(checkpointColumns).from(checkpoints).where(eq(checkpoints.runId, runId)).orderBy(desc(checkpoints.step));
}

/** What a lineage and a run's config say of a checkpoint whose run the caller may not read: nothing that names it. */
export const ANOTHER_RUNS_CHECKPOINT = "a checkpoint of another run";

/** Whether the caller may read a run (server/auth's Access.may, `shared`: a share link's holder reads its own runs). */
export type MayReadRun = (runId: string) => Promise<boolean>;

/** How many checkpoints a lineage follows (launches refuse deeper ones: server/jobs/bases.ts). */
const MAX_LINEAGE = 16;

/**
 * A run's base and where it comes from: "ckpt_b (run x, step 40) ← arithmetic-base". It names only runs the caller
 * may read: the first checkpoint of another (another project's run; for a share link's holder, any run the link
 * does not name) reads ANOTHER_RUNS_CHECKPOINT and ends it, without its id, run, step or experiment, and so does
 * `base` itself. A base naming a checkpoint that does not exist is NOT_FOUND.
 *
 * It follows the chain as stored rather than through resolveBase, which also refuses what may no longer be launched
 * from (a damaged checkpoint, an export): a lineage tells where a base came from, whatever has happened since.
 */
export async function baseLineageOfRun(db: Database, runId: string, mayRead: MayReadRun): Promise<{ base: string; lineage: string }> {
  const [run] = await db.select({ config: runs.config }).from(runs).where(eq(runs.id, runId));
  const named = run?.config.agent?.base ?? "";
  const links: Omit<Extract<BaseSource, { kind: "checkpoint" }>, "parent">[] = [];
  // What the chain ends in: a built-in base, or the words for another run's checkpoint.
  let end = named;
  while (isCheckpointBase(end) && links.length <= MAX_LINEAGE) {
    const [row] = await db
      .select({ id: checkpoints.id, path: checkpoints.path, step: checkpoints.step, runId: runs.id, runName: runs.name, config: runs.config })
      .from(checkpoints)
      .innerJoin(runs, eq(runs.id, checkpoints.runId))
      .where(eq(checkpoints.id, end));
    // The name comes from a run the caller reads (this run, or the last checkpoint's): saying it is missing names nothing new.
    if (!row)
      throw new TRPCError({
        code: "NOT_FOUND",
        message: `No checkpoint named '${end}'. A base is a built-in base or a checkpoint id (ckpt_…) from a run's Checkpoints list.`,
      });
    if (!(await mayRead(row.runId))) {
      end = ANOTHER_RUNS_CHECKPOINT;
      break;
    }
    const { config, ...link } = row;
    links.push({ kind: "checkpoint", ...link, mode: config.agent?.training?.mode === "lora" ? "lora" : "full" });
    end = config.agent?.base ?? "";
  }
  const source = links.reduceRight<BaseSource>((parent, link) => ({ ...link, parent }), { kind: "builtin", name: end });
  return { base: links.length > 0 ? named : end, lineage: describeLineage(source) };
}

/** A run's config as the caller may see it: a base that is another run's checkpoint reads ANOTHER_RUNS_CHECKPOINT. */
export async function configAsSeen<Config extends { agent?: { base?: string } }>(db: Database, config: Config, mayRead: MayReadRun): Promise<Config> {
  const base = config.agent?.base;
  if (base === undefined || !isCheckpointBase(base)) return config;
  const [row] = await db.select({ runId: checkpoints.runId }).from(checkpoints).where(eq(checkpoints.id, base));
  if (!row || (await mayRead(row.runId))) return config;
  return { ...config, agent: { ...config.agent, base: ANOTHER_RUNS_CHECKPOINT } };
}
