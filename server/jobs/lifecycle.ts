/**
 * A run's lifecycle: launch, claim, stop, resume, finish, checkpoint, and the requeue of jobs whose worker left or
 * lost its lease. Each operation is one transaction, and every change of a job's state goes through `moveJobs`
 * (./transitions.ts), guarded by the state machine of lib/lifecycle; a run's state follows its job's there.
 * Routers and workers call these; nothing else writes the runs and jobs tables.
 */
import { and, desc, eq, inArray, isNull, lt, or, sql } from "drizzle-orm";
import type { JobState } from "@/lib/lifecycle";
import type { RunConfig } from "@/lib/lifecycle/run-config";
import { type CheckpointKind, type Database, newId, checkpoints, experimentVersions, jobs, runLogs, runs } from "../db";
import { serverEnv } from "../env";
import { type JobCost, overCostLimit } from "./admission";
import { JobRejectedError, RunStateError, WorkerConflictError } from "./errors";
import { datasetFiles } from "../datasets";
import { resolveBase } from "./bases";
import { notifyJobs } from "./notify";
import { checkedFootprint, insertJob, type SubmitJob } from "./scheduling";
import { inTransaction, moveJobs } from "./transitions";

export type FinishOutcome = "completed" | "failed" | "cancelled" | "paused" | "preempted";

export type NewRun = {
  experimentId: string;
  /** Its experiment's project. */
  projectId: string;
  experimentVersionId: string;
  createdBy: string;
  /** Made unique in its project at launch (`freeRunName`); its time part from `runNameStamp`. */
  name: string;
  config: RunConfig;
  seed: number;
  totalSteps: number;
};

/** A run name's time part, to the second in UTC: `20261207-021234`. */
export function runNameStamp(at: Date = new Date()): string {
  return at.toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");
}

/** Takes the project's run-name lock until the transaction ends: launches and renames take turns under it. */
export async function lockRunNames(tx: Database, projectId: string): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`run names of ${projectId}`}, 0))`);
}

/**
 * `name`, or when a run of the project has it already, `name-2`, `name-3`, … (the first free one), so that no two
 * runs of a project share a name: a comparison's legend tells runs apart by name. A transaction-level advisory lock
 * per project makes launches at the same moment take turns, each seeing the names the ones before it wrote.
 */
async function freeRunName(tx: Database, projectId: string, name: string): Promise<string> {
  await lockRunNames(tx, projectId);
  const taken = await tx
    .select({ name: runs.name })
    .from(runs)
    .where(and(eq(runs.projectId, projectId), or(eq(runs.name, name), sql`starts_with(${runs.name}, ${`${name}-`})`)));
  const names = new Set(taken.map((r) => r.name));
  let free = name;
  for (let n = 2; names.has(free); n++) free = `${name}-${n}`;
  return free;
}

/**
 * Makes a run and queues its job, in one transaction. A job that can never fit any live device is refused
 * (JobRejectedError) and its run kept as failed, with the reason, so the user sees what was tried. The run's name
 * is made unique in its project (`freeRunName`).
 */
export async function launchRun(
  db: Database,
  run: NewRun,
  job: Omit<SubmitJob, "runId" | "userId"> & { cost?: JobCost },
): Promise<{ runId: string; jobId: string }> {
  // Over the server's cost limit: refused before anything is written (./admission.ts).
  const over = job.cost && overCostLimit(job.cost, serverEnv().TINKERLAB_MAX_JOB_FLOPS, job.resources.model.parameters);
  if (over) throw new JobRejectedError(over);
  const runId = newId("run");
  const submit = { ...job, runId, userId: run.createdBy };
  let footprint;
  try {
    footprint = await checkedFootprint(db, submit);
  } catch (error) {
    await inTransaction(db, async (tx) => {
      const name = await freeRunName(tx, run.projectId, run.name);
      await tx.insert(runs).values({ ...run, name, id: runId, status: "failed", reason: (error as Error).message, finishedAt: new Date() });
    });
    throw error;
  }
  const jobId = await inTransaction(db, async (tx) => {
    await tx.insert(runs).values({ ...run, name: await freeRunName(tx, run.projectId, run.name), id: runId });
    return insertJob(tx, submit, footprint);
  });
  return { runId, jobId };
}

async function latestJobOf(db: Database, runId: string): Promise<{ id: string; status: JobState }> {
  const [job] = await db.select({ id: jobs.id, status: jobs.status }).from(jobs).where(eq(jobs.runId, runId)).orderBy(desc(jobs.submittedAt)).limit(1);
  if (!job) throw new RunStateError(`No run with id '${runId}' (or it has no job)`, "NOT_FOUND");
  return job;
}

/**
 * Cancels or pauses a run. A job that no worker holds (queued; or paused, when cancelling) stops at once; a
 * job a worker runs is asked to stop at its next step (a pause saves a checkpoint first). Returns which.
 */
export async function stopRun(db: Database, runId: string, why: "cancel" | "pause"): Promise<"stopped" | "requested"> {
  return inTransaction(db, async (tx) => {
    const job = await latestJobOf(tx, runId);
    const final = why === "cancel" ? "cancelled" : "paused";
    const reason = `${final} by user`;
    const finishedAt = why === "cancel" ? new Date() : null;
    const [stopped] = await moveJobs(tx, final, and(eq(jobs.id, job.id), inArray(jobs.status, ["queued", "paused"])), {
      job: { reason, finishedAt, stopRequested: null },
      run: { reason, finishedAt },
    });
    if (stopped) {
      await tx.insert(runLogs).values({ runId, level: "info", message: `${final[0]!.toUpperCase()}${final.slice(1)} by user.` });
      return "stopped";
    }
    const [active] = await tx
      .update(jobs)
      .set({ stopRequested: why })
      .where(and(eq(jobs.id, job.id), inArray(jobs.status, ["placing", "running"])))
      .returning({ workerId: jobs.workerId });
    if (!active) {
      throw new RunStateError(
        `Run '${runId}' is ${job.status}; only a queued${why === "cancel" ? ", paused" : ""} or running run can be ${final}.`,
        "CONFLICT",
      );
    }
    if (active.workerId) await notifyJobs(tx, { placedOn: [active.workerId] });
    return "requested";
  });
}

/** Queues a paused run again; it resumes from its last checkpoint wherever the scheduler places it. */
export async function resumeRun(db: Database, runId: string): Promise<void> {
  await inTransaction(db, async (tx) => {
    const job = await latestJobOf(tx, runId);
    const [resumed] = await moveJobs(tx, "queued", and(eq(jobs.id, job.id), eq(jobs.status, "paused")), {
      job: { reason: "resumed by user", stopRequested: null },
      run: { reason: null },
    });
    if (!resumed) throw new RunStateError(`Run '${runId}' is ${job.status}; only a paused run can be resumed.`, "CONFLICT");
    await tx.insert(runLogs).values({ runId, level: "info", message: "Resumed by user." });
    await notifyJobs(tx, { queued: true });
  });
}

/** Takes a job placed on this worker: returns everything needed to run it, and the checkpoint to resume from. */
export async function claimJob(db: Database, workerId: string, jobId: string) {
  return inTransaction(db, async (tx) => {
    const [job] = await moveJobs(tx, "running", and(eq(jobs.id, jobId), eq(jobs.workerId, workerId), eq(jobs.status, "placing")), {
      job: { startedAt: sql`coalesce(${jobs.startedAt}, now())` as unknown as Date },
      run: { startedAt: sql`coalesce(${runs.startedAt}, now())` as unknown as Date, reason: null },
    });
    if (!job?.runId) throw new WorkerConflictError(`Job '${jobId}' is not waiting for worker '${workerId}'.`, "CONFLICT");
    const [row] = await tx
      .select({ kind: jobs.kind, mode: jobs.mode, lastCheckpointId: jobs.lastCheckpointId, attempts: jobs.attempts })
      .from(jobs)
      .where(eq(jobs.id, jobId));
    const [run] = await tx
      .select({ id: runs.id, config: runs.config, seed: runs.seed, projectId: runs.projectId, files: experimentVersions.files })
      .from(runs)
      .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
      .where(eq(runs.id, job.runId));
    const resume = row!.lastCheckpointId
      ? ((
          await tx
            .select({ id: checkpoints.id, path: checkpoints.path, step: checkpoints.step })
            .from(checkpoints)
            .where(and(eq(checkpoints.id, row!.lastCheckpointId), isNull(checkpoints.setAsideReason)))
        )[0] ?? null)
      : null;
    let message = "Started.";
    if (resume) {
      // The run goes back to its checkpoint's step, and says so: its page and the CLI show "resumed from step N".
      const [before] = await tx.select({ step: runs.step }).from(runs).where(eq(runs.id, job.runId));
      await tx.update(runs).set({ step: resume.step, resumedFromStep: resume.step }).where(eq(runs.id, job.runId));
      const redone = before && before.step > resume.step ? `; steps ${resume.step + 1}–${before.step} are trained again` : "";
      message = `Resuming from the checkpoint of step ${resume.step} (attempt ${row!.attempts + 1})${redone}.`;
    }
    await tx.insert(runLogs).values({ runId: job.runId, level: "info", message });
    // What the worker loads as the base: a built-in base, or an earlier run's checkpoint and its lineage.
    const base = await resolveBase(tx, run!.config.agent.base);
    // The uploaded datasets' files by name: the environment's rows or the SFT run's conversations are among them.
    const datasets = await datasetFiles(tx, run!.projectId);
    return { job: { id: job.id, runId: job.runId, ...row! }, run: run!, resume, base, datasets };
  });
}

export type ClaimedJob = Awaited<ReturnType<typeof claimJob>>;

/** The job, checked to be this worker's: says why not (no such job, or requeued or moved) otherwise. */
export async function requireJobOf(db: Database, jobId: string, workerId: string) {
  const [job] = await db.select({ id: jobs.id, runId: jobs.runId, status: jobs.status, workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, jobId));
  if (!job) throw new WorkerConflictError(`No job with id '${jobId}'`, "NOT_FOUND");
  if (job.workerId !== workerId) {
    throw new WorkerConflictError(`Job '${jobId}' is no longer assigned to worker '${workerId}' (it was requeued or moved).`, "CONFLICT");
  }
  return job;
}

/**
 * Records a file the job wrote: a resumable checkpoint ("state", the job's resume point from now on), or an export
 * ("export": the weights as one file to download, which an export job makes).
 */
export async function recordCheckpoint(
  db: Database,
  input: { workerId: string; jobId: string; step: number; path: string; sizeBytes: number; kind?: CheckpointKind },
) {
  return inTransaction(db, async (tx) => {
    const job = await requireJobOf(tx, input.jobId, input.workerId);
    const [row] = await tx
      .insert(checkpoints)
      .values({ id: newId("ckpt"), runId: job.runId!, step: input.step, kind: input.kind ?? "state", path: input.path, sizeBytes: input.sizeBytes })
      .onConflictDoUpdate({
        target: [checkpoints.runId, checkpoints.step, checkpoints.kind],
        set: { path: input.path, sizeBytes: input.sizeBytes, setAsideReason: null },
      })
      .returning({ id: checkpoints.id });
    if ((input.kind ?? "state") === "state") await tx.update(jobs).set({ lastCheckpointId: row!.id }).where(eq(jobs.id, input.jobId));
    return { checkpointId: row!.id };
  });
}

/**
 * A checkpoint the worker found damaged when it loaded it (a file truncated or altered: its checksum failed): it
 * is set aside, so that it is neither resumed from nor offered as a base, the run's log says why, and the job's
 * resume point goes back to the run's newest good checkpoint before it. Returns that one (null: none, the job
 * starts again from its base).
 */
export async function setAsideCheckpoint(db: Database, input: { workerId: string; jobId: string; checkpointId: string; reason: string }) {
  return inTransaction(db, async (tx) => {
    const job = await requireJobOf(tx, input.jobId, input.workerId);
    const [bad] = await tx
      .update(checkpoints)
      .set({ setAsideReason: input.reason })
      .where(and(eq(checkpoints.id, input.checkpointId), eq(checkpoints.runId, job.runId!)))
      .returning({ step: checkpoints.step });
    if (!bad) throw new WorkerConflictError(`No checkpoint '${input.checkpointId}' in the run of job '${input.jobId}'`, "NOT_FOUND");
    const [previous] = await tx
      .select({ id: checkpoints.id, path: checkpoints.path, step: checkpoints.step })
      .from(checkpoints)
      .where(and(eq(checkpoints.runId, job.runId!), eq(checkpoints.kind, "state"), isNull(checkpoints.setAsideReason), lt(checkpoints.step, bad.step)))
      .orderBy(desc(checkpoints.step))
      .limit(1);
    await tx
      .update(jobs)
      .set({ lastCheckpointId: previous?.id ?? null })
      .where(eq(jobs.id, input.jobId));
    await tx.insert(runLogs).values({
      runId: job.runId!,
      level: "warn",
      message:
        `Checkpoint of step ${bad.step} set aside: ${input.reason}. ` +
        (previous ? `Resuming from the checkpoint of step ${previous.step}.` : "No good checkpoint before it: starting again from the base."),
    });
    return { next: previous ?? null };
  });
}

/**
 * Ends the worker's part in a job: done, failed, stopped as asked, or handed back to the queue (preempted). The
 * device it held is free again, so the schedulers are woken. A job no longer this worker's, or in a state the
 * outcome cannot follow (a finished job finished again), is refused and nothing is written.
 */
export async function finishJob(db: Database, input: { workerId: string; jobId: string; outcome: FinishOutcome; reason: string | null }) {
  return inTransaction(db, async (tx) => {
    const { outcome } = input;
    const to: JobState = outcome === "preempted" ? "queued" : outcome;
    const ended = outcome === "completed" || outcome === "failed" || outcome === "cancelled";
    const finishedAt = ended ? new Date() : null;
    const [job] = await moveJobs(tx, to, and(eq(jobs.id, input.jobId), eq(jobs.workerId, input.workerId)), {
      job: {
        reason: input.reason,
        stopRequested: null,
        workerId: null,
        deviceId: null,
        leaseExpiresAt: null,
        attempts: outcome === "preempted" ? (sql`${jobs.attempts} + 1` as unknown as number) : undefined,
        finishedAt,
      },
      run: { reason: input.reason, finishedAt },
    });
    if (!job) {
      const current = await requireJobOf(tx, input.jobId, input.workerId);
      throw new WorkerConflictError(`Job '${input.jobId}' is ${current.status}; it cannot end as ${outcome}.`, "CONFLICT");
    }
    await tx.insert(runLogs).values({
      runId: job.runId!,
      level: outcome === "failed" ? "error" : "info",
      message: `${outcome[0]!.toUpperCase()}${outcome.slice(1)}${input.reason ? `: ${input.reason}` : "."}`,
    });
    await notifyJobs(tx, { freed: true });
    return { ok: true, runId: job.runId! };
  });
}
