/**
 * Role-conditioned credit end to end: a tiny random model plays both seats of a zero-sum game through the
 * turn-based protocol, and learns from it although every episode's total reward is 0.
 */
import { describe, expect, it } from "vitest";
import type { PolicyModel } from "@/lib/rl/primitives";
import { trainRl } from "@/lib/rl/train";
import { defineEnvironment } from "@/lib/sdk/environment";
import { type AlgorithmName, defineExperiment } from "@/lib/sdk/experiment";
import { turnBased } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";

const digit = (text: string) => (/^[0-9]/.test(text) ? 1 : 0);

/**
 * A and B each reply once; whoever starts with a digit while the other does not wins (+1, the other −1), else it
 * is a draw. Every episode sums to 0: credited with the total, no reply is ever better than another.
 */
const digitDuel = defineEnvironment<{ a: number }, string>({
  name: "digit-duel",
  data: { kind: "free" },
  systemPrompt: "",
  maxTurns: 2,
  reset: () => ({ state: { a: 0 }, observation: "go" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, text, { agent }) => {
    if (agent === "A") return { state: { a: digit(text) }, observation: "go", rewards: { A: 0, B: 0 }, done: false, metrics: { digits: digit(text) } };
    const b = digit(text);
    return { state, rewards: { A: state.a - b, B: b - state.a }, done: true, metrics: { digits: b } };
  },
  score: ({ state }) => state.a,
});

function tinyPolicy(valueHead = false): PolicyModel {
  const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 1 });
  return { primitives: new TrainingClient(base, { valueHead, seed: 1 }), tokenizer: base.tokenizer, contextLength: 32 };
}

async function selfPlay(name: Exclude<AlgorithmName, "sft">, overrides = {}) {
  const config = defineExperiment({
    name: `duel-${name}`,
    environment: digitDuel.name,
    agent: { base: "random", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 1 }, ...(name === "ppo" ? { valueHead: true } : {}) },
    algorithm: { name, steps: 12, groupSize: 8, groupsPerStep: 8, learningRate: 3e-2, ...overrides },
    evaluation: { every: 0, episodes: 8 },
    seed: 3,
  });
  const metrics: Record<string, number>[] = [];
  const result = await trainRl({
    config,
    policy: tinyPolicy(config.agent.valueHead),
    environment: digitDuel,
    protocol: turnBased(["A", "B"]),
    hooks: { onMetrics: (_step, m) => void ("reward/mean" in m && metrics.push(m)) },
  });
  const series = (key: string) => metrics.map((m) => m[key]!);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  // Digits per episode (two replies), early and late.
  const digits = series("env/digits");
  return { result, metrics, series, first: mean(digits.slice(0, 3)), last: mean(digits.slice(-3)) };
}

describe("self-play with role-conditioned credit", () => {
  it.each(["grpo", "grpo-per-turn", "rloo", "reinforce", "ppo"] as const)("%s learns a zero-sum game whose episodes all sum to 0", async (name) => {
    const { result, series, first, last } = await selfPlay(name);
    console.log(
      name,
      "digits per episode",
      series("env/digits")
        .map((d) => d.toFixed(2))
        .join(" "),
    );
    expect(series("reward/mean").every((r) => r === 0)).toBe(true);
    // Credited with the total, every advantage would be 0 and every update skipped; per agent, the steps before
    // the policy settled on digits (both always saying one: a draw, nothing left to learn) all updated.
    expect(series("train/skipped").slice(0, 6)).toEqual([undefined, undefined, undefined, undefined, undefined, undefined]);
    expect(last).toBeGreaterThan(first + 0.3);
    // Each agent's mean return and wins are reported; zero-sum, they mirror each other.
    for (const m of series("reward/agent/A").map((a, i) => [a, series("reward/agent/B")[i]!])) expect(m[0]).toBeCloseTo(-m[1]!, 9);
    expect(series("episode/win/A").every((w) => w >= 0 && w <= 1)).toBe(true);
    if (name === "reinforce")
      expect(
        Object.keys(result.memory)
          .filter((k) => k.startsWith("baseline"))
          .sort(),
      ).toEqual(["baseline/A", "baseline/B"]);
  });
});
