/**
 * The one way a job's state changes in the database: a conditional UPDATE whose guard is the state machine's
 * (lib/lifecycle: the job must be in a state from which the new one may follow), and, in the same transaction,
 * the run's state follows its job's. Every lifecycle operation of this module is built on `moveJobs`.
 */
import { and, inArray, type SQL } from "drizzle-orm";
import { runStateOf, statesLeadingTo, type JobState } from "@/lib/lifecycle";
import { type Database, jobs, runs } from "../db";

type JobChanges = Partial<Omit<typeof jobs.$inferInsert, "id" | "status">>;
type RunChanges = Partial<Pick<typeof runs.$inferInsert, "reason" | "startedAt" | "finishedAt">>;

/** Runs `work` in one transaction (a savepoint when `db` is already a transaction). */
export function inTransaction<T>(db: Database, work: (tx: Database) => Promise<T>): Promise<T> {
  return db.transaction((tx) => work(tx as unknown as Database));
}

/**
 * Moves every job that `where` selects and whose state may go to `to`, and the runs of those jobs; returns the
 * jobs moved (none when no job matched or none was in a state that may go to `to`). Call it inside a transaction
 * when it is one of several writes.
 */
export async function moveJobs(
  tx: Database,
  to: JobState,
  where: SQL | undefined,
  changes: { job?: JobChanges; run?: RunChanges } = {},
): Promise<{ id: string; runId: string | null }[]> {
  const moved = await tx
    .update(jobs)
    .set({ ...changes.job, status: to })
    .where(and(where, inArray(jobs.status, statesLeadingTo(to))))
    .returning({ id: jobs.id, runId: jobs.runId });
  const runIds = moved.flatMap((job) => (job.runId ? [job.runId] : []));
  // A job being placed leaves its run queued, as it was: nothing to write.
  if (runIds.length > 0 && (to !== "placing" || changes.run)) {
    await tx
      .update(runs)
      .set({ ...changes.run, status: runStateOf(to) })
      .where(inArray(runs.id, runIds));
  }
  return moved;
}
