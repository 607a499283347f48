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
import { type Database, checkpoints, runs, shareLinks } from "../db";
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
 * `confirmName` repeats its name. Refused, saying what, while it is queued, running or paused (cancel it first), or
 * while something depends on it: a run (an evaluation or export among them) that starts from one of its
 * checkpoints, an imported model made from one, or a share link that shows it.
 */
export async function deleteRun(db: Database, runId: string, confirmName: string): Promise<{ id: string; name: string }> {
  const deleted = await inTransaction(db, async (tx) => {
    const run = await lockedRun(tx, runId);
    if (confirmName !== run.name) {
      throw badRequest(`to delete run '${run.name}', confirm with its name (confirmName), exactly; '${confirmName}' is not it`);
    }
    if (!terminalRunStates.has(run.status as RunState)) {
      throw new RunChangeError(`Run '${run.name}' is ${run.status}; cancel it first, then delete it`, "CONFLICT");
    }
    const dependants = await dependantsOf(tx, runId);
    if (dependants.length > 0) {
      throw new RunChangeError(
        `Run '${run.name}' cannot be deleted: ${dependants.join("; ")}. Delete or revoke those first, or archive this run instead`,
        "CONFLICT",
      );
    }
    await tx.delete(runs).where(eq(runs.id, runId));
    return { id: run.id, name: run.name };
  });
  // Its checkpoints and exports, all under its own folder of the artifact store (workers write them there).
  fs.rmSync(path.resolve(serverEnv().ARTIFACTS_DIR, "runs", deleted.id), { recursive: true, force: true });
  return deleted;
}

/** What keeps a run from being deleted, in words: runs started from its checkpoints, imported models, share links. */
async function dependantsOf(tx: Database, runId: string): Promise<string[]> {
  const ownCheckpoints = await tx.select({ id: checkpoints.id, path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.runId, runId));
  const said: string[] = [];
  if (ownCheckpoints.length > 0) {
    const started = await tx
      .select({ id: runs.id, name: runs.name, base: sql<string>`${runs.config} -> 'agent' ->> 'base'` })
      .from(runs)
      .where(
        and(
          ne(runs.id, runId),
          inArray(
            sql`${runs.config} -> 'agent' ->> 'base'`,
            ownCheckpoints.map((c) => c.id),
          ),
        ),
      )
      .limit(10);
    for (const r of started) said.push(`run '${r.name}' (${r.id}) starts from its checkpoint ${r.base}`);
    for (const name of importedBaseNames()) {
      const source = importRecord(name)?.source;
      if (source && ownCheckpoints.some((c) => source === c.path || source.startsWith(`${c.path}${path.sep}`))) {
        said.push(`the imported model '${name}' was made from one of its checkpoints`);
      }
    }
  }
  const links = await tx
    .select({ id: shareLinks.id, title: shareLinks.title })
    .from(shareLinks)
    .where(
      and(
        sql`${shareLinks.runIds} @> ${JSON.stringify([runId])}::jsonb`,
        isNull(shareLinks.revokedAt),
        or(isNull(shareLinks.expiresAt), gt(shareLinks.expiresAt, new Date())),
      ),
    );
  for (const link of links) said.push(`the share link '${link.title}' (${link.id}) shows it`);
  return said;
}
