/**
 * Where a run's base comes from: a built-in base by name, or a checkpoint of an earlier run (`ckpt_…`), which is
 * that run's model at that step: its full weights, or its LoRA adapter merged into its own base, which may in
 * turn be a checkpoint. Resolved from the database when a run is launched (to check it) and claimed (so a worker
 * knows what to load without a database).
 */
import { parseRunConfig } from "@/lib/lifecycle/run-config";
import { eq } from "drizzle-orm";
import { baseCheckpointKinds, checkpoints, type Database, runs } from "../db";

export type BaseSource =
  | { kind: "builtin"; name: string }
  | {
      kind: "checkpoint";
      id: string;
      path: string;
      step: number;
      runId: string;
      runName: string;
      /** How the run trained: its checkpoint holds full weights, or an adapter on `parent`. */
      mode: "full" | "lora";
      parent: BaseSource;
    };

/** Checkpoint bases may stack (a run from a run from …) this deep. */
const MAX_LINEAGE = 16;

export class UnknownBaseError extends Error {
  override name = "UnknownBaseError";
}

export const isCheckpointBase = (name: string) => name.startsWith("ckpt_");

export async function resolveBase(db: Database, name: string, depth = 0): Promise<BaseSource> {
  if (!isCheckpointBase(name)) return { kind: "builtin", name };
  if (depth >= MAX_LINEAGE) throw new UnknownBaseError(`base '${name}' descends from more than ${MAX_LINEAGE} checkpoints; start from a built-in base`);
  const [row] = await db
    .select({
      id: checkpoints.id,
      path: checkpoints.path,
      step: checkpoints.step,
      runId: checkpoints.runId,
      runName: runs.name,
      config: runs.config,
      setAsideReason: checkpoints.setAsideReason,
      kind: checkpoints.kind,
    })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(eq(checkpoints.id, name));
  if (!row) throw new UnknownBaseError(`No checkpoint named '${name}'. A base is a built-in base or a checkpoint id (ckpt_…) from a run's Checkpoints list.`);
  if (!baseCheckpointKinds.includes(row.kind))
    throw new UnknownBaseError(`'${name}' is an export (a file to download), not a checkpoint; start from the checkpoint it was exported from`);
  if (row.setAsideReason) throw new UnknownBaseError(`checkpoint '${name}' was set aside as damaged (${row.setAsideReason}); pick another`);
  let agent;
  try {
    agent = parseRunConfig(row.config).agent;
  } catch (error) {
    throw new UnknownBaseError(`checkpoint '${name}' belongs to run '${row.runId}', whose config cannot be read: ${(error as Error).message}`);
  }
  return {
    kind: "checkpoint",
    id: row.id,
    path: row.path,
    step: row.step,
    runId: row.runId,
    runName: row.runName,
    mode: agent.training.mode,
    parent: await resolveBase(db, agent.base, depth + 1),
  };
}

/** The chain of a base, newest first: "ckpt_b (run x step 40) ← ckpt_a (run y step 10) ← arithmetic-base". */
export function describeLineage(source: BaseSource): string {
  const parts: string[] = [];
  for (let at: BaseSource = source; ; at = at.parent) {
    if (at.kind === "builtin") {
      parts.push(at.name);
      return parts.join(" ← ");
    }
    parts.push(`${at.id} (run ${at.runName}, step ${at.step}${at.mode === "lora" ? ", LoRA" : ""})`);
  }
}
