/**
 * A worker's reports leave while it trains (server/worker/run-job.ts), not when the run ends: the training loop
 * never gives the event loop a turn on its own, so each step ends with one, and a step's metrics and rollouts go
 * to the server as one report.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { inProcessChannel } from "@/server/worker/channel";
import type { ReportInput } from "@/server/jobs";
import { runJob, type JobSpec } from "@/server/worker/run-job";
import { saveTinyBase, tinyExperiment } from "../../support/tiny-run";

const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-live-bases-"));
// The worker finds its base model here: set before anything reads the environment.
process.env.TINKERLAB_BASES_DIR = basesDir;

beforeAll(() => saveTinyBase(basesDir), 120_000);

const STEPS = 30;

describe("a training job's reports", () => {
  it("reach the server step by step while it trains, one report per step, every point once", async () => {
    let step = 0;
    const reports: { atStep: number; report: ReportInput }[] = [];
    const channel = inProcessChannel({ report: (report) => void reports.push({ atStep: step, report }) });
    const { config } = tinyExperiment("live", STEPS);
    const spec = {
      job: { id: "job_live", runId: "run_live", kind: "rl", mode: "full", lastCheckpointId: null, attempts: 0 },
      run: { id: "run_live", config: { ...config, checkpointEvery: 0 }, seed: 1, files: {} },
      resume: null,
    } as unknown as JobSpec;
    const outcome = await runJob({
      channel,
      workerId: "wrk_live",
      spec,
      artifactsDir: fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-live-artifacts-")),
      stopRequested: () => null,
      onStep: (reached) => (step = reached),
    });
    expect(outcome).toEqual({ outcome: "completed", reason: null });

    // The first step's report was on its way before the third step had trained, and reports kept coming.
    expect(reports[0]!.atStep).toBeLessThanOrEqual(2);
    expect(reports.filter((r) => r.atStep < STEPS / 2).length).toBeGreaterThan(STEPS / 4);
    // A step's metrics and rollouts travel together: fewer reports than steps' worth of pairs.
    expect(reports.length).toBeLessThanOrEqual(STEPS + 2);
    expect(reports.some((r) => r.report.metrics?.length && r.report.rollouts?.length)).toBe(true);
    // Every step's training metrics arrive once, in order.
    const rewardSteps = reports.flatMap((r) => (r.report.metrics ?? []).filter((m) => m.name === "reward/mean").map((m) => m.step));
    expect(rewardSteps).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    const trainRollouts = reports.flatMap((r) => (r.report.rollouts ?? []).filter((x) => x.split === "train"));
    expect(new Set(trainRollouts.map((x) => x.step)).size).toBe(STEPS);
  }, 120_000);
});
