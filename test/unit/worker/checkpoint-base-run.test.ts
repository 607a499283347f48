/**
 * A run started from another run's checkpoint begins where that run ended: its first evaluation equals the other
 * run's last (greedy, the same held-out episodes, the same logprobs to 1e-4), for a LoRA run whose adapter is
 * merged into its base.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { MetricPointInput } from "@/server/jobs";
import { inProcessChannel } from "@/server/worker/channel";
import { runJob, type JobSpec } from "@/server/worker/run-job";
import { saveTinyBase, tinyExperiment } from "../../support/tiny-run";

const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-ckpt-run-bases-"));
process.env.TINKERLAB_BASES_DIR = basesDir;
beforeAll(() => saveTinyBase(basesDir), 120_000);

async function play(name: string, steps: number, base?: JobSpec["base"]) {
  const metrics: MetricPointInput[] = [];
  const evalLogprobs = new Map<number, number[]>();
  const saved: { step: number; path: string }[] = [];
  const channel = inProcessChannel({
    report: (report) => {
      metrics.push(...(report.metrics ?? []));
      for (const rollout of report.rollouts ?? []) {
        if (rollout.split === "eval") evalLogprobs.set(rollout.step, [...(evalLogprobs.get(rollout.step) ?? []), ...(rollout.tokenLogprobs ?? [])]);
      }
    },
    checkpoint: (input) => void saved.push({ step: input.step, path: input.path }),
  });
  const { config } = tinyExperiment(name, steps);
  const spec = {
    job: { id: `job_${name}`, runId: `run_${name}`, kind: "rl", mode: "lora", lastCheckpointId: null, attempts: 0 },
    run: {
      id: `run_${name}`,
      config: {
        ...config,
        agent: { ...config.agent, training: { mode: "lora", rank: 4 } },
        // Its rewards are all 0: the entropy bonus moves the policy, on updates a KL penalty keeps (lib/rl/update.ts).
        algorithm: { ...config.algorithm, learningRate: 3e-2, entropyCoef: 0.5, klCoef: 0.01 },
      },
      seed: 1,
      files: {},
    },
    resume: null,
    base: base ?? { kind: "builtin", name: "tiny-base" },
  } as unknown as JobSpec;
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-ckpt-run-artifacts-"));
  expect(await runJob({ channel, workerId: "wrk_test", spec, artifactsDir, stopRequested: () => null })).toEqual({ outcome: "completed", reason: null });
  const evalAt = (step: number) => Object.fromEntries(metrics.filter((m) => m.step === step && m.name.startsWith("eval/")).map((m) => [m.name, m.value]));
  return { saved, evalAt, logprobsAt: (step: number) => evalLogprobs.get(step)! };
}

describe("a run from a checkpoint", () => {
  it("starts from the policy the earlier run ended with", async () => {
    const first = await play("first", 10);
    const last = first.saved.find((c) => c.step === 10)!;
    const before = first.evalAt(0);
    const after = first.evalAt(10);
    expect(Object.keys(after).length).toBeGreaterThan(0);
    const second = await play("second", 1, {
      kind: "checkpoint",
      id: "ckpt_first",
      path: last.path,
      step: 10,
      runId: "run_first",
      runName: "first",
      mode: "lora",
      parent: { kind: "builtin", name: "tiny-base" },
    });
    expect(second.evalAt(0)).toEqual(after);
    const ended = first.logprobsAt(10);
    const started = second.logprobsAt(0);
    expect(started).toHaveLength(ended.length);
    started.forEach((logprob, i) => expect(Math.abs(logprob - ended[i]!)).toBeLessThan(1e-4));
    // the first run's training (an entropy bonus: its rewards are all 0) moved its policy, so this is not trivial
    expect(Math.max(...first.logprobsAt(0).map((logprob, i) => Math.abs(logprob - ended[i]!)))).toBeGreaterThan(1e-2);
    expect(before).toBeDefined();
  }, 120_000);
});
