/**
 * Evaluation is a job of its own: evaluating a run's checkpoint queues an "eval" job on the scheduler, a worker
 * plays the run's held-out episodes with that checkpoint's policy, and the score is the one the run itself reported
 * for those weights.
 */
import fs from "node:fs";
import path from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { decodeSafetensors } from "@/lib/model/safetensors";
import { checkpoints, jobs, metricPoints } from "@/server/db";
import { schedulerTick } from "@/server/jobs";
import { BaseModel } from "@/server/runtime";
import { createPackingPolicy } from "@/server/scheduler";
import { runJob } from "@/server/worker/run-job";
import { tinyExperiment } from "../support/tiny-run";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("eval");
const { artifactsDir, basesDir } = bed;

describe("an evaluation job", () => {
  it("scores a checkpoint on the run's held-out episodes, as the run scored those weights", async () => {
    const { handle } = bed;
    const caller = callerFor(handle);
    const channel = channelOn(handle.db);
    const workerId = await registerTestWorker(channel);
    /** Places the run's job on the worker and runs it to its end. */
    const work = async (runId: string) => {
      await schedulerTick(handle.db, createPackingPolicy());
      const [job] = await handle.db.select({ id: jobs.id, kind: jobs.kind }).from(jobs).where(eq(jobs.runId, runId));
      const spec = await channel.claim(workerId, job!.id);
      const outcome = await runJob({ channel, workerId, spec, artifactsDir, stopRequested: () => null });
      await channel.finish({ workerId, jobId: job!.id, ...outcome });
      return { kind: job!.kind, outcome };
    };
    const scores = async (runId: string) =>
      (
        await handle.db
          .select({ step: metricPoints.step, name: metricPoints.name, value: metricPoints.value })
          .from(metricPoints)
          .where(eq(metricPoints.runId, runId))
      )
        .filter((p) => p.name === "eval/score")
        .sort((a, b) => a.step - b.step);

    const experiment = tinyExperiment("to-evaluate", 6);
    const { id } = await caller.experiments.create({ ...experiment, config: { ...experiment.config, evaluation: { every: 0, episodes: 12 } } });
    const { runId } = await caller.runs.launch({ experimentId: id });
    expect(await work(runId)).toMatchObject({ kind: "rl", outcome: { outcome: "completed" } });
    const last = (await caller.checkpoints.ofRun({ runId }))[0]!;
    expect(last.step).toBe(6);

    const { runId: evaluation } = await caller.runs.evaluate({ checkpointId: last.id });
    const queued = await caller.runs.byId({ id: evaluation });
    expect(queued).toMatchObject({ status: "queued", totalSteps: 0 });
    expect(queued.name).toMatch(/-eval-step6$/);
    expect(await work(evaluation)).toEqual({ kind: "eval", outcome: { outcome: "completed", reason: null } });
    const [evaluated] = await scores(evaluation);
    expect(evaluated!.step).toBe(0);
    // Greedy on the same held-out seeds with the same weights: the run's own score at step 6.
    expect(evaluated!.value).toBe((await scores(runId)).at(-1)!.value);
    const rollouts = await caller.runs.rollouts({ runId: evaluation, split: "eval" });
    expect(rollouts.items).toHaveLength(12);

    await expect(caller.runs.evaluate({ checkpointId: "ckpt_nope" })).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: "No checkpoint with id 'ckpt_nope'",
    });

    // An export job writes the checkpoint's model as one safetensors file, which reloads to the same weights.
    const { runId: exported } = await caller.runs.export({ checkpointId: last.id });
    expect(await work(exported)).toEqual({ kind: "export", outcome: { outcome: "completed", reason: null } });
    const [file] = (await caller.checkpoints.ofRun({ runId: exported })).filter((c) => c.kind === "export");
    expect(file).toMatchObject({ step: 6 });
    const [row] = await handle.db.select({ path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.id, file!.id));
    const { tensors, metadata } = decodeSafetensors(new Uint8Array(fs.readFileSync(row!.path)));
    expect(metadata).toMatchObject({ format: "tinkerlab.model", version: "1" });
    expect(JSON.parse(metadata.model_config!)).toMatchObject({ vocabSize: 262, contextLength: 48, dModel: 32 });
    expect(metadata.origin).toMatch(new RegExp(`^${last.id} \\(run .*, step 6, LoRA\\) ← tiny-base$`));
    // The run trained a LoRA adapter: the export is its checkpoint merged into the base.
    const trained = BaseModel.fromCheckpoint(path.join(artifactsDir, "runs", runId, "step-000006"), BaseModel.load(path.join(basesDir, "tiny-base")));
    expect(tensors.get("lm_head")!.data).toEqual(trained.weights.lmHead);
    // An export is no base, and no export of an export.
    const fromExport = await caller.experiments.create({
      ...experiment,
      name: "from an export",
      config: { ...experiment.config, agent: { ...experiment.config.agent, base: file!.id } },
    });
    await expect(caller.runs.launch({ experimentId: fromExport.id })).rejects.toThrow(
      /agent\.base: '.*' is an export \(a file to download\), not a checkpoint/,
    );
    await expect(caller.runs.export({ checkpointId: file!.id })).rejects.toThrow(/No checkpoint/);
  }, 120_000);
});
