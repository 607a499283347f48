/**
 * Model names the endpoints accept, and what serves each: a base (built-in or imported) by its name, a checkpoint
 * by its id (`ckpt_…`), and a run's latest weights (`run_…:latest`, its newest checkpoint when the request comes,
 * its base before its first). A LoRA checkpoint is an adapter on the job serving its base; full weights are a base
 * of their own. A caller names only models of projects it may see; a base, which belongs to no project, is served
 * in the caller's project (an API key's, or the first the caller sees).
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray, isNull, ne, sql } from "drizzle-orm";
import type { Access } from "../auth";
import { baseNames } from "../bases";
import { baseCheckpointKinds, checkpoints, type Database, experiments, runs } from "../db";
import { resolveBase, SERVING_TEMPLATE } from "../jobs";

/** What serves a model: the job of `base` in `projectId`, with `adapter` on it or not. */
export type ModelTarget = { model: string; projectId: string; base: string; adapter: { id: string; path: string } | null };

/** A model name that names nothing the caller may use: 404, in OpenAI's words. */
export class UnknownModelError extends Error {}

const RUN_LATEST = /^(run_[A-Za-z0-9_-]+):latest$/;
const MODEL_HELP = "A model is a base (GET /v1/models lists them), a checkpoint id (ckpt_…) or a run's latest weights (run_…:latest).";

const unknown = (model: string) => new UnknownModelError(`The model '${model}' does not exist or you do not have access to it. ${MODEL_HELP}`);

/** Whether the caller may see the object; a refusal of any kind reads as "no such model". */
async function visible(access: Access, ref: { kind: "run" | "checkpoint"; id: string }, model: string): Promise<string> {
  try {
    return (await access.require("viewer", ref)).projectId;
  } catch (error) {
    if (error instanceof TRPCError) throw unknown(model);
    throw error;
  }
}

export async function resolveModel(db: Database, access: Access, model: string): Promise<ModelTarget> {
  const latest = RUN_LATEST.exec(model);
  if (latest) {
    const runId = latest[1]!;
    const projectId = await visible(access, { kind: "run", id: runId }, model);
    const [newest] = await db
      .select({ id: checkpoints.id })
      .from(checkpoints)
      .where(and(eq(checkpoints.runId, runId), inArray(checkpoints.kind, baseCheckpointKinds), isNull(checkpoints.setAsideReason)))
      .orderBy(desc(checkpoints.step), desc(checkpoints.createdAt))
      .limit(1);
    if (newest) return { ...(await checkpointTarget(db, newest.id, projectId)), model };
    const [run] = await db.select({ config: runs.config }).from(runs).where(eq(runs.id, runId));
    const base = run!.config.agent.base;
    return base.startsWith("ckpt_") ? { ...(await checkpointTarget(db, base, projectId)), model } : { model, projectId, base, adapter: null };
  }
  if (model.startsWith("ckpt_")) {
    const projectId = await visible(access, { kind: "checkpoint", id: model }, model);
    return checkpointTarget(db, model, projectId);
  }
  if (baseNames().includes(model)) {
    const principal = access.principal;
    const projectId = principal.kind === "apikey" ? principal.projectId : (await access.visibleProjects())[0];
    if (!projectId) throw new UnknownModelError(`No project to serve '${model}' in: you see no project. Make one on the Projects page, or ask to join one.`);
    return { model, projectId, base: model, adapter: null };
  }
  throw unknown(model);
}

/** A checkpoint as the job serving its base (an adapter on it) or as a base of its own (full weights). */
async function checkpointTarget(db: Database, id: string, projectId: string): Promise<ModelTarget> {
  let source: Awaited<ReturnType<typeof resolveBase>>;
  try {
    source = await resolveBase(db, id);
  } catch (error) {
    throw new UnknownModelError(`The model '${id}' cannot be served: ${(error as Error).message}`);
  }
  if (source.kind === "checkpoint" && source.mode === "lora") {
    const parent = source.parent;
    return { model: id, projectId, base: parent.kind === "builtin" ? parent.name : parent.id, adapter: { id: source.id, path: source.path } };
  }
  return { model: id, projectId, base: id, adapter: null };
}

/** A model as GET /v1/models lists it. */
export type ListedModel = { id: string; object: "model"; created: number; owned_by: string };

/** The models the caller may name: every base, and the checkpoints and runs of its projects (the newest first, at most 200 of each). */
export async function listModels(db: Database, access: Access): Promise<ListedModel[]> {
  const projectIds = access.principal.kind === "apikey" ? [access.principal.projectId] : await access.visibleProjects();
  const bases: ListedModel[] = baseNames().map((id) => ({ id, object: "model", created: 0, owned_by: "tinkerlab" }));
  if (projectIds.length === 0) return bases;
  const servingRuns = db.select({ id: experiments.id }).from(experiments).where(eq(experiments.template, SERVING_TEMPLATE));
  const runRows = await db
    .select({ id: runs.id, createdAt: runs.createdAt, projectId: runs.projectId })
    .from(runs)
    .where(and(inArray(runs.projectId, projectIds), sql`${runs.experimentId} not in ${servingRuns}`))
    .orderBy(desc(runs.createdAt))
    .limit(200);
  const checkpointRows = await db
    .select({ id: checkpoints.id, createdAt: checkpoints.createdAt, projectId: runs.projectId })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(
      and(inArray(runs.projectId, projectIds), inArray(checkpoints.kind, baseCheckpointKinds), isNull(checkpoints.setAsideReason), ne(runs.status, "failed")),
    )
    .orderBy(desc(checkpoints.createdAt))
    .limit(200);
  const seconds = (at: Date) => Math.floor(at.getTime() / 1000);
  return [
    ...bases,
    ...checkpointRows.map((row): ListedModel => ({ id: row.id, object: "model", created: seconds(row.createdAt), owned_by: row.projectId })),
    ...runRows.map((row): ListedModel => ({ id: `${row.id}:latest`, object: "model", created: seconds(row.createdAt), owned_by: row.projectId })),
  ];
}
