/**
 * A damaged checkpoint does not end a run: the worker finds it when it resumes (its checksum fails), the run's log
 * names it and the file, it is set aside, and the job resumes from the run's newest good checkpoint before it, all
 * through server/jobs against a real database.
 */
import fs from "node:fs";
import path from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { checkpoints, jobs, metricPoints, runLogs } from "@/server/db";
import { claimJob, recordCheckpoint, registerWorker, resumeRun, schedulerTick, setAsideCheckpoint } from "@/server/jobs";
import { createPackingPolicy } from "@/server/scheduler";
import { runJob } from "@/server/worker/run-job";
import { tinyExperiment } from "../support/tiny-run";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("fallback");
const { artifactsDir } = bed;

describe("a damaged checkpoint", () => {
  it("is set aside when the job resumes, which goes on from the checkpoint before it and completes", async () => {
    const { handle } = bed;
    const caller = callerFor(handle);
    const experiment = await caller.experiments.create(tinyExperiment("fallback", 12));
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    const channel = channelOn(handle.db);
    const workerId = await registerTestWorker(channel);
    const [job] = await handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.runId, runId));
    const attempt = async (pauseAt: number | null) => {
      await schedulerTick(handle.db, createPackingPolicy());
      const spec = await channel.claim(workerId, job!.id);
      let step = 0;
      // Paused as a worker sees a pause (the server's stop request): the job saves a checkpoint and ends paused.
      const outcome = await runJob({
        channel,
        workerId,
        spec,
        artifactsDir,
        onStep: (s) => void (step = s),
        stopRequested: () => (pauseAt !== null && step >= pauseAt ? "pause" : null),
      });
      await channel.finish({ workerId, jobId: job!.id, ...outcome });
      return { spec, outcome };
    };

    // Paused at step 7: checkpoints at 5 (every 5 steps) and 7 (the pause).
    const first = await attempt(7);
    expect(first.outcome.outcome).toBe("paused");
    const saved = await handle.db.select({ step: checkpoints.step, path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.runId, runId));
    expect(saved.map((c) => c.step).sort((a, b) => a - b)).toEqual([5, 7]);
    // The checkpoint of step 7 loses the end of its weights (a disk filled up, a copy cut short).
    const weights = path.join(saved.find((c) => c.step === 7)!.path, "weights.safetensors");
    fs.truncateSync(weights, fs.statSync(weights).size - 64);

    await resumeRun(handle.db, runId);
    const second = await attempt(null);
    expect(second.spec.resume).toMatchObject({ step: 7 });
    expect(second.outcome).toEqual({ outcome: "completed", reason: null });

    const logs = (await handle.db.select({ level: runLogs.level, message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, runId))).map(
      (l) => `${l.level}: ${l.message}`,
    );
    const setAside = logs.find((l) => l.includes("set aside"));
    expect(setAside).toMatch(
      /^warn: Checkpoint of step 7 set aside: checkpoint '.*step-000007' cannot be used: weights\.safetensors is \d+ bytes; the manifest says \d+ \(truncated\?\)\. Resuming from the checkpoint of step 5\.$/,
    );
    // Steps 6-12 were trained again from step 5, each stored once; the run ends at step 12.
    const rewardSteps = (await handle.db.select({ step: metricPoints.step, name: metricPoints.name }).from(metricPoints).where(eq(metricPoints.runId, runId)))
      .filter((m) => m.name === "reward/mean")
      .map((m) => m.step)
      .sort((a, b) => a - b);
    expect(rewardSteps).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    const run = await caller.runs.byId({ id: runId });
    expect(run).toMatchObject({ status: "completed", step: 12 });
    // The run's checkpoints list shows the damaged one set aside, with why; it is no base to start from.
    const after = await caller.checkpoints.ofRun({ runId });
    expect(after.map((c) => [c.step, c.setAsideReason === null ? null : "set aside"])).toEqual([
      [12, null],
      [10, null],
      [7, "set aside"],
      [5, null],
    ]);
    expect(after.find((c) => c.step === 7)!.setAsideReason).toMatch(/weights\.safetensors is \d+ bytes/);
    const bases = await caller.checkpoints.bases();
    expect(bases.checkpoints.filter((c) => c.runId === runId).map((c) => c.step)).toEqual(expect.arrayContaining([5, 10, 12]));
    expect(bases.checkpoints.filter((c) => c.runId === runId).map((c) => c.step)).not.toContain(7);
  }, 120_000);

  it("with no good checkpoint before it, the job starts again from its base", async () => {
    const { handle } = bed;
    const caller = callerFor(handle);
    const experiment = await caller.experiments.create(tinyExperiment("fallback-none", 4));
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    const { workerId } = await registerWorker(handle.db, {
      hostname: "test",
      pid: process.pid,
      backend: "js",
      devices: [{ kind: "cpu", name: "cpu2", memoryMb: 8192, computeSlots: 1 }],
    });
    const [job] = await handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.runId, runId));
    await schedulerTick(handle.db, createPackingPolicy());
    await claimJob(handle.db, workerId, job!.id).catch(() => null); // placed on whichever worker: claim as its holder below
    const [placed] = await handle.db.select({ workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, job!.id));
    const holder = placed!.workerId!;
    if (holder !== workerId) await claimJob(handle.db, holder, job!.id);
    const dir = path.join(artifactsDir, "gone", "step-000002");
    const { checkpointId } = await recordCheckpoint(handle.db, { workerId: holder, jobId: job!.id, step: 2, path: dir, sizeBytes: 1 });
    const answer = await setAsideCheckpoint(handle.db, {
      workerId: holder,
      jobId: job!.id,
      checkpointId,
      reason: `checkpoint '${dir}' cannot be used: its folder does not exist`,
    });
    expect(answer.next).toBeNull();
    const [after] = await handle.db.select({ lastCheckpointId: jobs.lastCheckpointId }).from(jobs).where(eq(jobs.id, job!.id));
    expect(after!.lastCheckpointId).toBeNull();
    const last = (await handle.db.select({ message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, runId))).at(-1)!;
    expect(last.message).toMatch(/No good checkpoint before it: starting again from the base\.$/);
    // A set-aside checkpoint is no base to start from.
    const fromSetAside = tinyExperiment("from a set-aside checkpoint", 4);
    const { id: fromSetAsideId } = await caller.experiments.create({
      ...fromSetAside,
      config: { ...fromSetAside.config, agent: { ...fromSetAside.config.agent, base: checkpointId } },
    });
    await expect(caller.runs.launch({ experimentId: fromSetAsideId })).rejects.toThrow(/agent\.base: checkpoint '.*' was set aside as damaged/);
  }, 60_000);
});
