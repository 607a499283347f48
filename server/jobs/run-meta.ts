/**
 * What users change of a run besides its lifecycle: tags, notes, its name, archiving, and deletion. Each is one
 * transaction on the run's row; a rename takes the project's run-name lock that launches take, and a deletion
 * refuses while anything depends on the run, saying what.
 */
import fs from "node:fs";
import path from "node:path";
import { and, eq, gt, inArray, isNull, ne, or, sql } from "drizzle-orm";
import { terminalRunStates, type RunState } from "@/lib/lifecycle";
import { importedBaseNames, importRecord } from "../bases";
import { type Database, checkpoints, jobs, runs, shareLinks } from "../db";
import { serverEnv } from "../env";
import { tagProblem, MAX_TAGS } from "@/lib/runs-table";
import { lockRunNames } from "./lifecycle";
import { inTransaction } from "./transitions";

/** A refusal of a change to a run, which the API answers with its code and message as they are. */
export class RunChangeError extends Error {
  override name = "RunChangeError";
  constructor(
    message: string,
    readonly code: "BAD_REQUEST" | "NOT_FOUND" | "CONFLICT",
  ) {
    super(message);
  }
}
const badRequest = (message: string) => new RunChangeError(message, "BAD_REQUEST");

async function lockedRun(tx: Database, runId: string) {
  const [run] = await tx
    .select({ id: runs.id, name: runs.name, projectId: runs.projectId, status: runs.status, tags: runs.tags })
    .from(runs)
    .where(eq(runs.id, runId))
    .for("update");
  if (!run) throw new RunChangeError(`No run with id '${runId}'`, "NOT_FOUND");
  return run;
}

/** Adds and removes tags (added ones keep their order, each once); answers the run's tags. */
export async function tagRun(db: Database, runId: string, change: { add?: string[]; remove?: string[] }): Promise<string[]> {
  for (const tag of change.add ?? []) {
    const problem = tagProblem(tag);
    if (problem) throw badRequest(problem);
  }
  return inTransaction(db, async (tx) => {
    const run = await lockedRun(tx, runId);
    const removed = new Set(change.remove ?? []);
    const tags = [...new Set([...run.tags, ...(change.add ?? [])])].filter((t) => !removed.has(t));
    if (tags.length > MAX_TAGS) throw badRequest(`a run takes at most ${MAX_TAGS} tags; run '${run.name}' would have ${tags.length}`);
    await tx.update(runs).set({ tags }).where(eq(runs.id, runId));
    return tags;
  });
}

export async function setRunNotes(db: Database, runId: string, notes: string): Promise<void> {
  const updated = await db.update(runs).set({ notes }).where(eq(runs.id, runId)).returning({ id: runs.id });
  if (updated.length === 0) throw new RunChangeError(`No run with id '${runId}'`, "NOT_FOUND");
}

/**
 * Renames a run. Names are unique in a project (a comparison's legend tells runs apart by name): a name another
 * run of the project has is refused, naming that run.
 */
export async function renameRun(db: Database, runId: string, name: string): Promise<{ name: string }> {
  return inTransaction(db, async (tx) => {
    const run = await lockedRun(tx, runId);
    if (run.name === name) return { name };
    await lockRunNames(tx, run.projectId);
    const [taken] = await tx
      .select({ id: runs.id })
      .from(runs)
      .where(and(eq(runs.projectId, run.projectId), eq(runs.name, name), ne(runs.id, runId)))
      .limit(1);
    if (taken)
      throw new RunChangeError(`Run '${taken.id}' of this project is named '${name}' already; run names are unique in a project, pick another`, "CONFLICT");
    await tx.update(runs).set({ name }).where(eq(runs.id, runId));
    return { name };
  });
}

/** Archives a run (the runs table hides it unless asked) or brings it back. */
export async function setRunArchived(db: Database, runId: string, archived: boolean): Promise<void> {
  const updated = await db
    .update(runs)
    .set({ archivedAt: archived ? sql`coalesce(${runs.archivedAt}, now())` : null })
    .where(eq(runs.id, runId))
    .returning({ id: runs.id });
  if (updated.length === 0) throw new RunChangeError(`No run with id '${runId}'`, "NOT_FOUND");
}

/**
 * Deletes a run with everything it recorded (points, rollouts, logs, checkpoints, jobs) and its files, once
 * `confirmName` repeats its name, and with it its finished evaluations and exports, which belong to it. Refused,
 * saying what, while it (or one of its evaluations or exports) is queued, running or paused (cancel it first), or
 * while something else depends on it: a training run that starts from one of its checkpoints, an imported model made
 * from one, or a share link that shows it or one of its evaluations or exports.
 */
export async function deleteRun(
  db: Database,
  runId: string,
  confirmName: string,
): Promise<{ id: string; name: string; withIt: { id: string; name: string; kind: string }[] }> {
  const deleted = await inTransaction(db, async (tx) => {
    const run = await lockedRun(tx, runId);
    if (confirmName !== run.name) {
      throw badRequest(`to delete run '${run.name}', confirm with its name (confirmName), exactly; '${confirmName}' is not it`);
    }
    if (!terminalRunStates.has(run.status as RunState)) {
      throw new RunChangeError(`Run '${run.name}' is ${run.status}; cancel it first, then delete it`, "CONFLICT");
    }
    const { dependants, derived } = await dependantsOf(tx, runId);
    if (dependants.length > 0) {
      throw new RunChangeError(
        `Run '${run.name}' cannot be deleted: ${dependants.join("; ")}. Delete or revoke those first, or archive this run instead`,
        "CONFLICT",
      );
    }
    await tx.delete(runs).where(inArray(runs.id, [run.id, ...derived.map((d) => d.id)]));
    return { id: run.id, name: run.name, withIt: derived };
  });
  // Their checkpoints and exports, each run's under its own folder of the artifact store (workers write them there).
  for (const id of [deleted.id, ...deleted.withIt.map((d) => d.id)]) {
    fs.rmSync(path.resolve(serverEnv().ARTIFACTS_DIR, "runs", id), { recursive: true, force: true });
  }
  return deleted;
}

/**
 * What keeps a run from being deleted, in words (runs started from its checkpoints, imported models, share links),
 * and its finished evaluations and exports, which go with it.
 */
async function dependantsOf(tx: Database, runId: string) {
  const ownCheckpoints = await tx.select({ id: checkpoints.id, path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.runId, runId));
  const said: string[] = [];
  const derived: { id: string; name: string; kind: string }[] = [];
  if (ownCheckpoints.length > 0) {
    const base = sql<string>`${runs.config} -> 'agent' ->> 'base'`;
    const started = await tx
      .select({
        id: runs.id,
        name: runs.name,
        status: runs.status,
        base,
        // Spelled out: in a select from one table, drizzle writes its columns unqualified, and `id` would be the job's.
        kind: sql<string | null>`(select j.kind::text from ${jobs} j where j.run_id = ${runs}.id order by j.submitted_at desc limit 1)`,
      })
      .from(runs)
      .where(
        and(
          ne(runs.id, runId),
          inArray(
            base,
            ownCheckpoints.map((c) => c.id),
          ),
        ),
      );
    for (const r of started) {
      const belongs = r.kind === "eval" || r.kind === "export";
      if (belongs && terminalRunStates.has(r.status)) derived.push({ id: r.id, name: r.name, kind: r.kind! });
      else if (belongs) said.push(`its ${r.kind === "eval" ? "evaluation" : "export"} '${r.name}' (${r.id}) is ${r.status}; cancel it first`);
      else said.push(`run '${r.name}' (${r.id}) starts from its checkpoint ${r.base}`);
    }
    for (const name of importedBaseNames()) {
      const source = importRecord(name)?.source;
      if (source && ownCheckpoints.some((c) => source === c.path || source.startsWith(`${c.path}${path.sep}`))) {
        said.push(`the imported model '${name}' was made from one of its checkpoints`);
      }
    }
  }
  const shown = [runId, ...derived.map((d) => d.id)];
  const links = await tx
    .select({ id: shareLinks.id, title: shareLinks.title, runIds: shareLinks.runIds })
    .from(shareLinks)
    .where(
      and(
        sql`jsonb_exists_any(${shareLinks.runIds}, array[${sql.join(
          shown.map((id) => sql`${id}`),
          sql`, `,
        )}]::text[])`,
        isNull(shareLinks.revokedAt),
        or(isNull(shareLinks.expiresAt), gt(shareLinks.expiresAt, new Date())),
      ),
    );
  for (const link of links) {
    const other = derived.find((d) => link.runIds.includes(d.id));
    const what = link.runIds.includes(runId) || !other ? "it" : `its ${other.kind === "eval" ? "evaluation" : "export"} '${other.name}'`;
    said.push(`the share link '${link.title}' (${link.id}) shows ${what}`);
  }
  return { dependants: said, derived };
}
