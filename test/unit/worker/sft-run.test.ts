/**
 * SFT runs on a worker: from a custom environment's demonstrator (played in the sandbox) or an uploaded dataset of
 * conversations, the loss falls, the held-out score is reported as an RL run's is, and the checkpoint it ends with
 * is a base an RL run starts from.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { colours, playColourJob } from "../../support/colour-job";
import { saveTinyBase } from "../../support/tiny-run";

const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-sft-bases-"));
process.env.TINKERLAB_BASES_DIR = basesDir;
beforeAll(() => saveTinyBase(basesDir), 120_000);

const sftConfig = (sft: Record<string, unknown>) => ({
  name: "sft",
  environment: "custom",
  agent: { base: "tiny-base", training: { mode: "full" }, sampling: { maxTokens: 4 } },
  algorithm: { name: "sft", steps: 40, learningRate: 1e-2 },
  sft: { batchSize: 16, ...sft },
  evaluation: { every: 0, episodes: 30 },
  checkpointEvery: 0,
});

describe("SFT on a worker", () => {
  it("imitates a custom environment's demonstrator: the loss falls, the score rises, and its checkpoint starts an RL run", async () => {
    const sft = await playColourJob(sftConfig({ data: "demonstrator", demonstrations: 60 }));
    expect(sft.outcome).toEqual({ outcome: "completed", reason: null });
    // The log and the run's charts say how well the demonstrator itself plays: what imitation can reach.
    expect(sft.logs[0]).toMatch(/SFT on 60 conversations \(60 demonstration episodes, in which the demonstrator scored 1\.000\)/);
    expect(sft.series("sft/demonstrator_score")).toEqual([1]);
    const loss = sft.series("loss/sft");
    expect(loss).toHaveLength(40);
    expect(loss.slice(-5).reduce((a, b) => a + b, 0) / 5).toBeLessThan(loss.slice(0, 5).reduce((a, b) => a + b, 0) / 5 / 2);
    const [before, after] = sft.series("eval/score");
    expect(after!).toBeGreaterThan(before! + 0.3);
    const checkpoint = sft.saved.at(-1)!;
    expect(checkpoint.step).toBe(40);

    const rl = await playColourJob(
      { ...sftConfig({}), algorithm: { name: "grpo", steps: 2, groupSize: 4, groupsPerStep: 2 }, evaluation: { every: 0, episodes: 30 } },
      {
        base: {
          kind: "checkpoint",
          id: "ckpt_sft",
          path: checkpoint.path,
          step: 40,
          runId: "run_sft",
          runName: "sft",
          mode: "full",
          parent: { kind: "builtin", name: "tiny-base" },
        },
      } as never,
    );
    expect(rl.outcome).toEqual({ outcome: "completed", reason: null });
    expect(rl.series("eval/score")[0]).toBe(after);
  }, 120_000);

  it("takes an RL run's SFT steps first, then RL from that policy, and resumes in the RL stage with the same reference", async () => {
    const config = {
      ...sftConfig({ data: "demonstrator", demonstrations: 60, steps: 8, learningRate: 1e-2 }),
      algorithm: { name: "grpo", steps: 4, groupSize: 4, groupsPerStep: 2, learningRate: 1e-3, klCoef: 0.5 },
    };
    const whole = await playColourJob(config);
    expect(whole.outcome).toEqual({ outcome: "completed", reason: null });
    expect(whole.stepsOf("loss/sft")).toEqual(Array.from({ length: 8 }, (_, i) => i + 1));
    expect(whole.stepsOf("reward/mean")).toEqual([9, 10, 11, 12]);
    expect(whole.stepsOf("eval/score")).toEqual([0, 8, 12]);
    expect(whole.logs).toContain("SFT done after 8 steps; RL starts from this policy.");
    expect(whole.saved.map((c) => c.step)).toEqual([8, 12]);
    // The KL penalty's reference is the policy where RL began: at RL's first step the policy is that policy.
    const kl = whole.series("loss/kl");
    expect(kl).toHaveLength(4);
    expect(Math.abs(kl[0]!)).toBeLessThan(1e-6);
    expect(kl.at(-1)!).toBeGreaterThan(0);

    // Paused in the RL stage and resumed: the same reference (the checkpoint at step 8), so the same KL.
    const paused = await playColourJob(config, {}, 10);
    expect(paused.outcome.outcome).toBe("paused");
    const at = paused.saved.at(-1)!;
    expect(at.step).toBe(10);
    const resumed = await playColourJob(config, { resume: { step: 10, path: at.path } } as never, undefined, paused.artifactsDir);
    expect(resumed.outcome.outcome).toBe("completed");
    expect(resumed.stepsOf("loss/sft")).toEqual([]);
    expect(resumed.stepsOf("loss/kl")).toEqual([11, 12]);
    expect(resumed.series("loss/kl")[0]).toBeCloseTo(kl[2]!, 5);
  }, 180_000);

  it("imitates an uploaded dataset of conversations", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-sft-data-")), "ds.jsonl");
    const lines = ["red", "blue", "green"].map((c) =>
      JSON.stringify({
        messages: [
          { role: "system", content: "Say it." },
          { role: "user", content: c },
          { role: "assistant", content: c },
        ],
      }),
    );
    fs.writeFileSync(file, lines.join("\n"));
    const sft = await playColourJob(sftConfig({ data: "dataset", dataset: "colours" }), {
      datasets: { colours: { path: file, kind: "conversations" } },
    } as never);
    expect(sft.outcome.outcome).toBe("completed");
    const [before, after] = sft.series("eval/score");
    expect(after!).toBeGreaterThan(before! + 0.3);
  }, 120_000);

  it("plays a dataset environment's demonstrator on its training rows", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-sft-rows-")), "rows.jsonl");
    fs.writeFileSync(
      file,
      ["red", "blue", "green", "red", "blue"].map((colour, i) => JSON.stringify({ colour, split: i === 4 ? "test" : "train" })).join("\n"),
    );
    const fromRows = colours
      .replace('data: { kind: "free" },', 'data: { kind: "dataset", dataset: "colour-rows" },')
      .replace(
        "reset: ({ rng }) => {\n    const colour = COLOURS[Math.floor(rng.uniform() * 3)]!;",
        "reset: ({ sample }) => {\n    const colour = String(sample!.colour);",
      );
    expect(fromRows).toContain("sample!.colour");
    const sft = await playColourJob(sftConfig({ data: "demonstrator", demonstrations: 20 }), {
      run: { id: "run_sft", config: sftConfig({ data: "demonstrator", demonstrations: 20 }), seed: 1, files: { "environment.ts": fromRows } },
      datasets: { "colour-rows": { path: file, kind: "rows" } },
    } as never);
    expect(sft.outcome.outcome).toBe("completed");
    expect(sft.logs[0]).toMatch(/SFT on 20 conversations/);
  }, 120_000);

  it("fails with a message naming what is missing when the environment has no demonstrator", async () => {
    const spec = {
      run: {
        id: "run_sft",
        config: sftConfig({ data: "demonstrator" }),
        seed: 1,
        files: { "environment.ts": colours.replace("demonstrate: (state) => state.colour,", "") },
      },
    };
    await expect(playColourJob(sftConfig({ data: "demonstrator" }), spec as never)).rejects.toThrow(/defines no demonstrate\(state\)/);
  }, 60_000);
});
