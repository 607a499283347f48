/**
 * The curriculum (lib/rl/curriculum.ts): its level moves up once a level is mastered and down when it fails, and a
 * simulated policy whose skill grows is kept at levels where it succeeds sometimes but not always. trainRl on a
 * tiny model charts `train/difficulty` and a resumed run goes on at its saved level with the same prompts.
 */
import { describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";
import { Curriculum, curriculumLevels } from "@/lib/rl/curriculum";
import type { PolicyModel } from "@/lib/rl/primitives";
import { trainRl } from "@/lib/rl/train";
import { defineEnvironment } from "@/lib/sdk/environment";
import { defineExperiment } from "@/lib/sdk/experiment";
import { singleTurn, type Trajectory } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";

/** Plays `steps` steps of `groups` groups of `groupSize` episodes; `chance(level, step)` is an episode's success. */
function simulate(options: {
  curriculum: Curriculum;
  steps: number;
  groups?: number;
  groupSize?: number;
  chance: (level: number, step: number) => number;
  fixed?: boolean;
}) {
  const { curriculum, steps, groups = 16, groupSize = 8, chance } = options;
  const rng = new Rng(7);
  const levels: number[] = [];
  const truth: number[] = [];
  for (let step = 0; step < steps; step++) {
    levels.push(curriculum.level);
    truth.push(chance(curriculum.level, step));
    for (const level of curriculumLevels(groups, step, 0, curriculum.level, curriculum.range)) {
      let wins = 0;
      for (let i = 0; i < groupSize; i++) wins += rng.uniform() < chance(level, step) ? 1 : 0;
      curriculum.observe(level, wins / groupSize);
    }
    if (!options.fixed) curriculum.settle();
  }
  const reversals = levels.slice(2).filter((level, i) => Math.sign(level - levels[i + 1]!) * Math.sign(levels[i + 1]! - levels[i]!) < 0).length;
  const inBand = truth.filter((p) => p >= 0.1 && p <= 0.9).length / truth.length;
  return { levels, inBand, reversals };
}

/** A policy whose skill rises from 1 to 9 over 150 steps: it solves a level `skill - level` below its skill reliably. */
const growing = (level: number, step: number) => 1 / (1 + Math.exp(2 * (level - (1 + (8 * step) / 150))));

describe("curriculum", () => {
  it("moves up once a level is mastered, and never past max", () => {
    const curriculum = new Curriculum({ min: 1, max: 3 });
    expect(curriculum.level).toBe(1);
    const { levels } = simulate({ curriculum, steps: 10, chance: () => 1 });
    expect(levels.slice(0, 3)).toEqual([1, 2, 3]);
    expect(curriculum.level).toBe(3);
  });

  it("moves down when the level fails, and never below min", () => {
    const curriculum = new Curriculum({ min: 2, max: 8, start: 6 });
    const { levels } = simulate({ curriculum, steps: 12, chance: (level) => (level <= 3 ? 0.5 : 0) });
    expect(levels[0]).toBe(6);
    expect(levels.slice(1, 4)).toEqual([5, 4, 3]);
    expect(curriculum.level).toBe(3);
    simulate({ curriculum, steps: 10, chance: () => 0 });
    expect(curriculum.level).toBe(2);
  });

  it("keeps a growing policy where it succeeds sometimes, not always, with few reversals", () => {
    const curriculum = new Curriculum({ min: 1, max: 10 });
    const tracked = simulate({ curriculum, steps: 150, chance: growing });
    const held = simulate({ curriculum: new Curriculum({ min: 1, max: 10 }), steps: 150, chance: growing, fixed: true });
    expect(tracked.inBand).toBeGreaterThan(0.9);
    expect(held.inBand).toBeLessThan(0.5);
    expect(tracked.reversals).toBeLessThanOrEqual(4);
    expect(curriculum.level).toBeGreaterThanOrEqual(8);
  });

  it("does not climb to a level the probes show failing", () => {
    const curriculum = new Curriculum({ min: 1, max: 5 });
    const { levels } = simulate({ curriculum, steps: 20, chance: (level) => (level <= 2 ? 1 : 0) });
    // Up to 2 at once (its probes succeed), then held there: level 3's probes fail.
    expect(levels.slice(1)).toEqual(new Array(19).fill(2));
  });

  it("restores its level and evidence from memory", () => {
    const first = new Curriculum({ min: 1, max: 10 });
    simulate({ curriculum: first, steps: 30, chance: growing });
    const memory: Record<string, number> = {};
    first.save(memory);
    const resumed = new Curriculum({ min: 1, max: 10 }, memory);
    expect(resumed.level).toBe(first.level);
    const again: Record<string, number> = {};
    resumed.save(again);
    expect(again).toEqual(memory);
  });

  it("probes the level above in a quarter of the groups, rotating with the step", () => {
    expect(curriculumLevels(8, 0, 0, 3, { max: 10 })).toEqual([3, 3, 3, 4, 3, 3, 3, 4]);
    expect(curriculumLevels(2, 1, 0, 3, { max: 10 })).toEqual([3, 3]);
    expect(curriculumLevels(2, 2, 0, 3, { max: 10 })).toEqual([3, 4]);
    expect(curriculumLevels(8, 0, 0, 10, { max: 10 })).toEqual(new Array(8).fill(10));
  });
});

/** Any reply succeeds at levels 1 to 3; from 4 on only a reply that starts with a digit (1 in 26 of the random model's). */
const multiples = defineEnvironment<{ level: number }, string>({
  name: "multiples",
  data: { kind: "free" },
  systemPrompt: "",
  maxTurns: 1,
  difficulty: { min: 1, max: 6 },
  reset: ({ difficulty }) => ({ state: { level: difficulty! }, observation: `level ${difficulty}` }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, text) => ({ state, reward: text.length > 0 && (state.level <= 3 || /^[0-9]/.test(text)) ? 1 : 0, done: true }),
});

function tinyPolicy(): PolicyModel {
  const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 1 });
  return { primitives: new TrainingClient(base, { seed: 1 }), tokenizer: base.tokenizer, contextLength: 32 };
}

describe("trainRl with an environment's levels", () => {
  const config = defineExperiment({
    name: "curriculum",
    environment: "multiples",
    agent: { base: "random", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 1 } },
    algorithm: { name: "grpo", steps: 10, groupSize: 8, groupsPerStep: 4, learningRate: 3e-2, resampleRounds: 0 },
    evaluation: { every: 0, episodes: 4 },
    checkpointEvery: 4,
    checkpointMinutes: 0,
    seed: 5,
  });
  const train = async (from?: { step: number; memory: Record<string, number> }) => {
    const levels: number[] = [];
    const prompts = new Map<number, string[]>();
    const saved = new Map<number, Record<string, number>>();
    const evaluated: string[] = [];
    await trainRl({
      config,
      policy: tinyPolicy(),
      environment: multiples,
      protocol: singleTurn(),
      startStep: from?.step,
      memory: from?.memory,
      hooks: {
        onMetrics: (_step, metrics) => void ("train/difficulty" in metrics && levels.push(metrics["train/difficulty"]!)),
        onRollouts: (step, split, groups: Trajectory[][]) => {
          const seen = groups.map((group) => `${group[0]!.seed} ${group[0]!.turns[0]!.observation}`);
          if (split === "train") prompts.set(step, seen);
          else evaluated.push(...seen);
        },
        onCheckpoint: (step, memory) => void saved.set(step, { ...memory }),
      },
    });
    return { levels, prompts, saved, evaluated };
  };

  it("charts train/difficulty rising from the start level while the low levels are easy, and evaluates at the top level", async () => {
    const run = await train();
    console.log("train/difficulty", run.levels.join(" "));
    expect(run.levels).toHaveLength(10);
    expect(run.levels[0]).toBe(1);
    // Up through the easy levels to the first hard one (4), and no further: a level every two or three steps.
    const top = run.levels.indexOf(4);
    expect(top).toBeGreaterThan(0);
    expect(run.levels.slice(0, top + 1).every((level, i) => i === 0 || level >= run.levels[i - 1]!)).toBe(true);
    expect(Math.max(...run.levels)).toBe(4);
    expect(run.levels.at(-1)).toBeGreaterThanOrEqual(3);
    // Mostly the current level, a quarter of the groups one above it.
    expect(run.prompts.get(1)!.map((prompt) => prompt.split(" level ")[1])).toEqual(["1", "1", "1", "2"]);
    expect(run.evaluated.every((prompt) => prompt.endsWith("level 6"))).toBe(true);
  });

  it("resumes at the level its checkpoint saved, with the same prompts", async () => {
    const run = await train();
    const memory = run.saved.get(4)!;
    expect(memory["curriculum/level"]).toBeGreaterThan(1);
    const resumed = await train({ step: 4, memory });
    expect(resumed.levels[0]).toBe(run.levels[4]);
    expect(resumed.prompts.get(5)).toEqual(run.prompts.get(5));
  });
});
