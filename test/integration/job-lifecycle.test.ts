/**
 * server/jobs owns a run's lifecycle: every change of a job's state passes the state machine's guard there (each
 * allowed transition happens, each forbidden one writes nothing), the run's state follows its job's in the same
 * transaction, and the lifecycle operations refuse what their state does not allow, naming it.
 */
import { testRunConfig } from "../support/run-config";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { canTransition, jobStates, runStateOf, type JobState } from "@/lib/lifecycle";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { LOCAL_USER, type DatabaseHandle } from "@/server/db";
import { newId } from "@/server/db/ids";
import { devices, jobs, metricPoints, runLogs, runs, workers } from "@/server/db/schema";
import {
  claimJob,
  expireLeases,
  finishJob,
  heartbeat,
  leaveWorker,
  recordCheckpoint,
  registerWorker,
  resumeRun,
  RunStateError,
  schedulerTick,
  stopRun,
  submitJob,
  WorkerConflictError,
  workerProcessEnded,
} from "@/server/jobs";
import { moveJobs } from "@/server/jobs/transitions";
import { createPackingPolicy } from "@/server/scheduler";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let experimentId: string;
let versionId: string;
let workerId: string;

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  const created = await callerFor(handle).experiments.create({ name: "lifecycle" });
  experimentId = created.id;
  versionId = created.versionId;
});
afterAll(() => db.close());
beforeEach(async () => {
  await handle.db.delete(jobs);
  await handle.db.delete(devices);
  await handle.db.delete(workers);
  ({ workerId } = await registerWorker(handle.db, {
    hostname: "test",
    pid: 1,
    backend: "js",
    devices: [{ kind: "cpu", name: "cpu", memoryMb: 4096, computeSlots: 1 }],
  }));
});

/** A run with one job, put straight into `state` (test set-up writes the tables directly; the code never does). */
async function jobIn(state: JobState) {
  const runId = newId("run");
  await handle.db.insert(runs).values({
    id: runId,
    projectId: DEFAULT_PROJECT,
    experimentId,
    experimentVersionId: versionId,
    createdBy: LOCAL_USER.id,
    name: runId,
    config: testRunConfig(),
    seed: 0,
    totalSteps: 10,
    status: runStateOf(state),
  });
  const jobId = await submitJob(handle.db, {
    runId,
    userId: LOCAL_USER.id,
    resources: {
      kind: "rl",
      mode: "full",
      baseModel: "tiny",
      model: { name: "tiny", parameters: 1e6, dModel: 64, nLayers: 2 },
      batchSize: 8,
      contextLength: 48,
      computeSlots: 1,
    },
  });
  const held = state === "placing" || state === "running";
  await handle.db
    .update(jobs)
    .set({ status: state, workerId: held ? workerId : null })
    .where(eq(jobs.id, jobId));
  return { runId, jobId };
}

/** A new worker of one CPU slot on `hostname` with process `pid`, running the job `jobId`; returns its id. */
async function runningOn(jobId: string, hostname = "test", pid = 2): Promise<string> {
  const { workerId: holder } = await registerWorker(handle.db, {
    hostname,
    pid,
    backend: "js",
    devices: [{ kind: "cpu", name: "cpu", memoryMb: 4096, computeSlots: 1 }],
  });
  await handle.db.update(jobs).set({ status: "running", workerId: holder }).where(eq(jobs.id, jobId));
  return holder;
}

async function statesOf(ids: { runId: string; jobId: string }) {
  const [job] = await handle.db.select({ status: jobs.status }).from(jobs).where(eq(jobs.id, ids.jobId));
  const [run] = await handle.db.select({ status: runs.status }).from(runs).where(eq(runs.id, ids.runId));
  return { job: job!.status, run: run!.status };
}

describe("the state machine, through server/jobs", () => {
  it("takes every allowed transition and refuses every forbidden one, the run following its job", async () => {
    let allowed = 0;
    let forbidden = 0;
    for (const from of jobStates) {
      for (const to of jobStates) {
        const ids = await jobIn(from);
        const moved = await moveJobs(handle.db, to, eq(jobs.id, ids.jobId));
        const after = await statesOf(ids);
        if (canTransition(from, to)) {
          allowed++;
          expect(moved, `${from} -> ${to}`).toHaveLength(1);
          expect(after, `${from} -> ${to}`).toEqual({ job: to, run: runStateOf(to) });
        } else {
          forbidden++;
          expect(moved, `${from} -> ${to}`).toHaveLength(0);
          expect(after, `${from} -> ${to}`).toEqual({ job: from, run: runStateOf(from) });
        }
      }
    }
    expect(allowed).toBe(16);
    expect(forbidden).toBe(jobStates.length ** 2 - 16);
  });
});

describe("lifecycle operations", () => {
  it("a job finished once cannot finish again, and the second attempt writes nothing", async () => {
    const ids = await jobIn("running");
    await finishJob(handle.db, { workerId, jobId: ids.jobId, outcome: "completed", reason: null });
    expect(await statesOf(ids)).toEqual({ job: "completed", run: "completed" });
    const logs = await handle.db.select({ seq: runLogs.seq }).from(runLogs).where(eq(runLogs.runId, ids.runId));
    // The job no longer belongs to the worker once finished: the refusal says so.
    await expect(finishJob(handle.db, { workerId, jobId: ids.jobId, outcome: "failed", reason: "late" })).rejects.toThrow(WorkerConflictError);
    expect(await statesOf(ids)).toEqual({ job: "completed", run: "completed" });
    expect(await handle.db.select({ seq: runLogs.seq }).from(runLogs).where(eq(runLogs.runId, ids.runId))).toHaveLength(logs.length);
  });

  it("finishing a job that is still being placed as completed is refused by the state machine", async () => {
    const ids = await jobIn("placing");
    await expect(finishJob(handle.db, { workerId, jobId: ids.jobId, outcome: "completed", reason: null })).rejects.toThrow(
      /is placing; it cannot end as completed/,
    );
    expect(await statesOf(ids)).toEqual({ job: "placing", run: "queued" });
  });

  it("claims only a job placed on this worker; the run starts with it", async () => {
    const queued = await jobIn("queued");
    await expect(claimJob(handle.db, workerId, queued.jobId)).rejects.toThrow(/is not waiting for worker/);
    const placed = await jobIn("placing");
    const claim = await claimJob(handle.db, workerId, placed.jobId);
    expect(claim.job).toMatchObject({ id: placed.jobId, runId: placed.runId, kind: "rl", attempts: 0 });
    expect(await statesOf(placed)).toEqual({ job: "running", run: "running" });
    const [run] = await handle.db.select({ startedAt: runs.startedAt }).from(runs).where(eq(runs.id, placed.runId));
    expect(run!.startedAt).toBeInstanceOf(Date);
  });

  it("cancels a queued or paused run at once, asks a running one to stop, and refuses an ended one", async () => {
    const queued = await jobIn("queued");
    expect(await stopRun(handle.db, queued.runId, "cancel")).toBe("stopped");
    expect(await statesOf(queued)).toEqual({ job: "cancelled", run: "cancelled" });
    const paused = await jobIn("paused");
    expect(await stopRun(handle.db, paused.runId, "cancel")).toBe("stopped");
    expect(await statesOf(paused)).toEqual({ job: "cancelled", run: "cancelled" });
    const running = await jobIn("running");
    expect(await stopRun(handle.db, running.runId, "pause")).toBe("requested");
    const [job] = await handle.db.select({ stop: jobs.stopRequested, status: jobs.status }).from(jobs).where(eq(jobs.id, running.jobId));
    expect(job).toEqual({ stop: "pause", status: "running" });
    const done = await jobIn("completed");
    await expect(stopRun(handle.db, done.runId, "cancel")).rejects.toThrow(/is completed; only a queued, paused or running run can be cancelled/);
    await expect(stopRun(handle.db, paused.runId, "pause")).rejects.toThrow(RunStateError);
  });

  it("resumes only a paused run, which queues again", async () => {
    const paused = await jobIn("paused");
    await resumeRun(handle.db, paused.runId);
    expect(await statesOf(paused)).toEqual({ job: "queued", run: "queued" });
    const running = await jobIn("running");
    await expect(resumeRun(handle.db, running.runId)).rejects.toThrow(/is running; only a paused run can be resumed/);
    await expect(resumeRun(handle.db, "run_missing")).rejects.toThrow(/No run with id 'run_missing'/);
  });

  it("a preempted job goes back to the queue with one more attempt and resumes from its checkpoint", async () => {
    const ids = await jobIn("running");
    await recordCheckpoint(handle.db, { workerId, jobId: ids.jobId, step: 3, path: "/tmp/ckpt", sizeBytes: 10 });
    await finishJob(handle.db, { workerId, jobId: ids.jobId, outcome: "preempted", reason: "preempted at step 3" });
    const [job] = await handle.db
      .select({ status: jobs.status, attempts: jobs.attempts, workerId: jobs.workerId, lastCheckpointId: jobs.lastCheckpointId })
      .from(jobs)
      .where(eq(jobs.id, ids.jobId));
    expect(job).toMatchObject({ status: "queued", attempts: 1, workerId: null });
    expect(job!.lastCheckpointId).toMatch(/^ckpt_/);
    expect((await statesOf(ids)).run).toBe("queued");

    // It had reached step 5 before it stopped: placed again, it goes back to step 3 and says so.
    await handle.db.update(runs).set({ step: 5 }).where(eq(runs.id, ids.runId));
    await handle.db.update(jobs).set({ status: "placing", workerId }).where(eq(jobs.id, ids.jobId));
    const claim = await claimJob(handle.db, workerId, ids.jobId);
    expect(claim.resume).toMatchObject({ step: 3 });
    const [run] = await handle.db.select({ step: runs.step, resumedFromStep: runs.resumedFromStep }).from(runs).where(eq(runs.id, ids.runId));
    expect(run).toEqual({ step: 3, resumedFromStep: 3 });
    const logs = await handle.db.select({ message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, ids.runId));
    expect(logs.at(-1)!.message).toBe("Resuming from the checkpoint of step 3 (attempt 2); steps 4–5 are trained again.");
  });

  it("a job that keeps losing its worker without getting further fails, saying why; one that gets further is requeued", async () => {
    const ids = await jobIn("running");
    const loseWorkerAt = async (step: number, how: "lease" | "leave") => {
      const holder = await runningOn(ids.jobId);
      await handle.db.update(runs).set({ status: "running", step }).where(eq(runs.id, ids.runId));
      if (how === "leave") await leaveWorker(handle.db, holder, "the worker left", { maxWorkerLosses: 3 });
      else {
        await handle.db
          .update(workers)
          .set({ heartbeatAt: new Date(Date.now() - 60_000) })
          .where(eq(workers.id, holder));
        await expireLeases(handle.db, new Date(), { maxWorkerLosses: 3 });
      }
      const [job] = await handle.db.select({ status: jobs.status, losses: jobs.workerLosses, reason: jobs.reason }).from(jobs).where(eq(jobs.id, ids.jobId));
      return job!;
    };
    // Lost at step 7, 9 and 12: each time further along, so it is requeued each time.
    expect(await loseWorkerAt(7, "lease")).toMatchObject({ status: "queued", losses: 1 });
    expect(await loseWorkerAt(9, "leave")).toMatchObject({ status: "queued", losses: 1 });
    expect(await loseWorkerAt(12, "lease")).toMatchObject({ status: "queued", losses: 1 });
    // Then lost again at step 12, and at step 10 (it resumed from an earlier checkpoint and got no further): the third fails it.
    expect(await loseWorkerAt(12, "lease")).toMatchObject({ status: "queued", losses: 2 });
    const failed = await loseWorkerAt(10, "leave");
    expect(failed).toMatchObject({ status: "failed", losses: 3 });
    expect(failed.reason).toMatch(/lost its worker 3 times in a row without getting past step 10; the last time, the worker left/);
    expect((await statesOf(ids)).run).toBe("failed");
    // A job only placed on a worker that went (it never started there) is requeued without counting a loss.
    const placed = await jobIn("placing");
    const holder = (await handle.db.select({ workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, placed.jobId)))[0]!.workerId!;
    await handle.db.update(jobs).set({ workerLosses: 2, lostAtStep: 5 }).where(eq(jobs.id, placed.jobId));
    await leaveWorker(handle.db, holder, "the worker left", { maxWorkerLosses: 3 });
    const [after] = await handle.db.select({ status: jobs.status, losses: jobs.workerLosses }).from(jobs).where(eq(jobs.id, placed.jobId));
    expect(after).toEqual({ status: "queued", losses: 2 });
    const [run] = await handle.db.select({ reason: runs.reason, finishedAt: runs.finishedAt }).from(runs).where(eq(runs.id, ids.runId));
    expect(run!.reason).toBe(failed.reason);
    expect(run!.finishedAt).not.toBeNull();
    const logs = await handle.db.select({ level: runLogs.level, message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, ids.runId));
    expect(logs.filter((l) => l.level === "warn" && /Worker lost/.test(l.message))).toHaveLength(4);
    expect(logs.at(-1)).toMatchObject({ level: "error" });
  });

  it("a job that started over and kept losing its worker fails naming the furthest step its metrics reached", async () => {
    const ids = await jobIn("running");
    // Step 1's metrics were stored; then the job lost its worker and started over from step 0, three times.
    await handle.db.insert(metricPoints).values({ runId: ids.runId, step: 1, name: "reward/mean", value: 0.5 });
    for (let loss = 1; loss <= 3; loss++) {
      const holder = await runningOn(ids.jobId);
      await handle.db
        .update(runs)
        .set({ status: "running", step: loss === 1 ? 1 : 0 })
        .where(eq(runs.id, ids.runId));
      await leaveWorker(handle.db, holder, "the worker left", { maxWorkerLosses: 3 });
    }
    const [run] = await handle.db.select({ status: runs.status, reason: runs.reason }).from(runs).where(eq(runs.id, ids.runId));
    expect(run!.status).toBe("failed");
    expect(run!.reason).toMatch(/lost its worker 3 times in a row without getting past step 1; the last time, the worker left/);
  });

  it("tells a starved worker from a gone one: a starved worker's loss does not count, and a late heartbeat takes a counted one back", async () => {
    const ids = await jobIn("running");
    const holderOf = async (late: { lateMs: number } | null) => {
      const holder = await runningOn(ids.jobId, "test", 3);
      await handle.db.update(runs).set({ status: "running", step: 4 }).where(eq(runs.id, ids.runId));
      // Its heartbeats came ever later (the server measured the gaps), then stopped.
      await handle.db
        .update(workers)
        .set({ heartbeatAt: new Date(Date.now() - 30_000), ...(late ? { lateMs: late.lateMs, lateAt: new Date(Date.now() - 30_000) } : {}) })
        .where(eq(workers.id, holder));
      await expireLeases(handle.db, new Date(), { maxWorkerLosses: 3 });
      const [job] = await handle.db.select({ status: jobs.status, losses: jobs.workerLosses }).from(jobs).where(eq(jobs.id, ids.jobId));
      return { holder, job: job! };
    };
    const starved = await holderOf({ lateMs: 9_000 });
    expect(starved.job).toEqual({ status: "queued", losses: 0 });
    const gone = await holderOf(null);
    expect(gone.job).toEqual({ status: "queued", losses: 1 });
    // The second one was not gone after all: its heartbeat arrives late, naming the job it still runs.
    await expect(heartbeat(handle.db, gone.holder, { running: [ids.jobId] })).rejects.toThrow(/lost its lease/);
    const [after] = await handle.db.select({ losses: jobs.workerLosses }).from(jobs).where(eq(jobs.id, ids.jobId));
    expect(after!.losses).toBe(0);
    const messages = (await handle.db.select({ message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, ids.runId))).map((l) => l.message);
    expect(messages.join("\n")).toMatch(/the machine starved worker wrk_\w+: its heartbeats came up to 9\.0 s late, then none for 20 s; this does not count/);
    expect(messages.join("\n")).toMatch(
      /worker wrk_\w+ stopped answering: no heartbeat for 20 s \(its process, machine or network is gone\)[^\n]*1 of 3 losses/,
    );
    expect(messages.join("\n")).toMatch(/was not gone but too slow to answer[^\n]*no longer counts/);
  });

  it("hands back the jobs of a worker whose process its server saw die, saying how, without waiting for its lease", async () => {
    const ids = await jobIn("running");
    await runningOn(ids.jobId, "host-a", 77);
    // Another machine's worker with the same pid is not this one.
    await workerProcessEnded(handle.db, { hostname: "host-b", pid: 77, how: "was killed by SIGKILL" });
    expect((await statesOf(ids)).job).toBe("running");
    await workerProcessEnded(handle.db, { hostname: "host-a", pid: 77, how: "was killed by SIGKILL" });
    expect((await statesOf(ids)).job).toBe("queued");
    const logs = await handle.db.select({ message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, ids.runId));
    expect(logs.at(-1)!.message).toMatch(
      /^Worker lost: worker wrk_\w+'s process was killed by SIGKILL\. Job job_\w+ requeued to resume from its last checkpoint \(1 of \d+ losses/,
    );
  });

  it("gives leases the time the server itself could not hear heartbeats in", async () => {
    const ids = await jobIn("running");
    const holder = await runningOn(ids.jobId, "test", 4);
    await handle.db
      .update(workers)
      .set({ heartbeatAt: new Date(Date.now() - 25_000) })
      .where(eq(workers.id, holder));
    // The server was stalled for 10 s of those 25: its heartbeats may be waiting unread on a socket.
    expect(await expireLeases(handle.db, new Date(), {}, 10_000)).toEqual([]);
    expect(await expireLeases(handle.db, new Date(), {}, 0)).toEqual([ids.jobId]);
  });

  it("places no job on a worker not heard from for 5 s, though its lease still holds", async () => {
    const ids = await jobIn("queued");
    await handle.db
      .update(workers)
      .set({ heartbeatAt: new Date(Date.now() - 10_000) })
      .where(eq(workers.id, workerId));
    const policy = createPackingPolicy();
    expect((await schedulerTick(handle.db, policy)).placed).toEqual([]);
    expect((await statesOf(ids)).job).toBe("queued");
    await heartbeat(handle.db, workerId);
    expect((await schedulerTick(handle.db, policy)).placed).toEqual([ids.jobId]);
  });
});
