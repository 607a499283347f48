/**
 * An environment's levels of difficulty through the sandbox: the guest reports the declared range, every reset
 * (batched, reset ahead, or one session's) hands the episode's level to `reset`, an episode given none plays the
 * evaluation level, and validation's dry run plays the hardest and easiest levels, or refuses a malformed
 * declaration naming the field.
 */
import { afterEach, describe, expect, it } from "vitest";
import { trainRl } from "@/lib/rl/train";
import { type Difficulty, defineEnvironment } from "@/lib/sdk/environment";
import { defineExperiment } from "@/lib/sdk/experiment";
import type { ActRequest } from "@/lib/sdk/protocol";
import { singleTurn } from "@/lib/sdk/protocol";
import { type SandboxedEnvironmentPool, runSandboxedEpisodes } from "@/server/sandbox";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { validateExperimentSource } from "@/server/sandbox/validate";
import { createPool, envSource } from "./helpers";

const leveled = {
  reset: `return { state: { n: context.difficulty ?? -1 }, observation: "level " + String(context.difficulty) };`,
  step: `return { state, reward: state.n, done: true };`,
  extra: `difficulty: { min: 1, max: 5, evaluation: 3 },`,
};
const go = async (requests: ActRequest[]) => requests.map(() => ({ text: "go" }));
const levelsOf = (trajectories: { turns: { observation: string }[] }[]) => trajectories.map((t) => t.turns[0]!.observation);

let pool: SandboxedEnvironmentPool | null = null;
afterEach(() => {
  pool?.dispose();
  pool = null;
});

describe("difficulty in the sandbox", () => {
  it("reports the declared levels with the environment", async () => {
    pool = await createPool(leveled);
    expect(pool.environment.difficulty).toEqual({ min: 1, max: 5, evaluation: 3 });
    const plain = await createPool();
    expect(plain.environment.difficulty).toBeNull();
    plain.dispose();
  });

  it("hands each episode's level to reset, in batches and in batches reset ahead", async () => {
    pool = await createPool(leveled);
    const starts = [1, 1, 2, 4, 5, 5].map((difficulty, i) => ({ seed: 10 + Math.floor(i / 2), difficulty }));
    // The next batch has the same seeds at other levels: what was reset ahead at level 2 must not be played at 3.
    const guessed = starts.map((start) => ({ ...start, difficulty: 2 }));
    const first = await runSandboxedEpisodes(singleTurn(), pool, starts, go, { lanes: 2, next: guessed });
    expect(levelsOf(first)).toEqual(["level 1", "level 1", "level 2", "level 4", "level 5", "level 5"]);
    expect(first.map((t) => t.totalReward)).toEqual([1, 1, 2, 4, 5, 5]);
    const actual = starts.map((start) => ({ ...start, difficulty: 3 }));
    expect(levelsOf(await runSandboxedEpisodes(singleTurn(), pool, actual, go, { lanes: 2 }))).toEqual(new Array(6).fill("level 3"));
    // Told right, the batch plays the episodes reset ahead.
    await runSandboxedEpisodes(singleTurn(), pool, starts, go, { lanes: 2, next: actual });
    expect(levelsOf(await runSandboxedEpisodes(singleTurn(), pool, actual, go, { lanes: 2 }))).toEqual(new Array(6).fill("level 3"));
  });

  it("plays the evaluation level when no level is given, and refuses a level outside the range", async () => {
    pool = await createPool(leveled);
    expect(pool.session(0).reset(1)).toBe("level 3");
    expect(pool.session(1).reset(1, undefined, 5)).toBe("level 5");
    expect(() => pool!.session(2).reset(1, undefined, 9)).toThrow(/difficulty 9 is not a level of environment 'test-env' \(1 to 5\)/);
    const plain = await createPool({ reset: leveled.reset });
    expect(plain.session(0).reset(1, undefined, 4)).toBe("level undefined");
    plain.dispose();
  });
});

describe("difficulty in a sandboxed run", () => {
  it("trains on the curriculum through the sandbox's player, as a worker does, and charts train/difficulty", async () => {
    pool = await createPool({ ...leveled, extra: `difficulty: { min: 1, max: 5, start: 2 },` });
    const sandbox = pool;
    const { name, data, scoreName, difficulty } = sandbox.environment;
    const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 16, nLayers: 1, nHeads: 2 }, { seed: 1 });
    const levels: number[] = [];
    const played: string[] = [];
    await trainRl({
      config: defineExperiment({
        name: "sandboxed-curriculum",
        environment: "custom",
        agent: { base: "random", sampling: { maxTokens: 1 } },
        algorithm: { name: "grpo", steps: 3, groupSize: 2, groupsPerStep: 4, resampleRounds: 0 },
        evaluation: { every: 0, episodes: 2 },
      }),
      policy: { primitives: new TrainingClient(base, { seed: 1 }), tokenizer: base.tokenizer, contextLength: 32 },
      environment: { name, data, scoreName: scoreName ?? undefined, difficulty: difficulty ?? undefined },
      protocol: singleTurn(),
      playEpisodes: (protocol, starts, act, options) => runSandboxedEpisodes(protocol, sandbox, starts, act, options),
      hooks: {
        onMetrics: (_step, metrics) => void ("train/difficulty" in metrics && levels.push(metrics["train/difficulty"]!)),
        onRollouts: (_step, split, groups) => void played.push(...groups.map((group) => `${split} ${group[0]!.turns[0]!.observation}`)),
      },
    });
    expect(levels).toEqual([2, 2, 2]);
    // Three groups in four at level 2, the probes at 3; evaluation at max.
    expect(new Set(played)).toEqual(new Set(["eval level 5", "train level 2", "train level 3"]));
  });
});

describe("difficulty in validation's dry run", () => {
  it("accepts an environment with levels, type-checked, and plays its hardest, easiest and evaluation levels", async () => {
    const report = await validateExperimentSource({ "environment.ts": envSource(leveled) }, { episodes: 3 });
    expect(report.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    expect(report.environment?.difficulty).toEqual({ min: 1, max: 5, evaluation: 3 });
    expect(report.episodes.map((e) => [e.difficulty, e.totalReward])).toEqual([
      [5, 5],
      [1, 1],
      [3, 3],
    ]);
  });

  it("refuses a malformed declaration in defineEnvironment itself, naming the field", () => {
    const base = { name: "x", data: { kind: "free" as const }, systemPrompt: "", maxTurns: 1, parseAction: () => ({ ok: true as const, action: 0 }) };
    const define = (difficulty: unknown) =>
      defineEnvironment({
        ...base,
        difficulty: difficulty as Difficulty,
        reset: () => ({ state: 0, observation: "" }),
        step: (state) => ({ state, reward: 0, done: true }),
      });
    expect(() => define({ min: 1, max: 10, evaluation: 0 })).toThrow(
      /defineEnvironment: difficulty\.evaluation must be a level from difficulty\.min to difficulty\.max \(1 to 10\); got 0/,
    );
    expect(() => define({ max: 3 })).toThrow(/difficulty\.min must be a whole number from 0 to 1000000; got undefined/);
    expect(define({ min: 1, max: 1 }).difficulty).toEqual({ min: 1, max: 1 });
  });

  it.each([
    [`difficulty: { min: 1, max: "10" },`, /difficulty\.max must be a whole number from 0 to 1000000; got "10"/],
    [`difficulty: { min: 4, max: 2 },`, /difficulty\.max must be at least difficulty\.min \(4\); got 2/],
    [`difficulty: { min: 1, max: 10, start: 11 },`, /difficulty\.start must be a level from difficulty\.min to difficulty\.max \(1 to 10\); got 11/],
    [`difficulty: { min: 1.5, max: 10 },`, /difficulty\.min must be a whole number/],
    [`difficulty: { min: 1, max: 10, levels: 3 },`, /difficulty\.levels is not a field of difficulty; its fields are min, max, start, evaluation/],
    [`difficulty: 10,`, /difficulty must be an object \{ min, max, start\?, evaluation\? \} of whole numbers; got 10/],
  ])("refuses %s naming the field", async (extra, message) => {
    const report = await validateExperimentSource({ "environment.ts": envSource({ ...leveled, extra }) }, { typeCheck: false });
    expect(report.ok).toBe(false);
    expect(report.diagnostics.map((d) => d.message).join("\n")).toMatch(message);
  });
});
