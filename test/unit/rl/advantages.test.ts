/** Advantage estimators and the rollout-to-batch plumbing, on hand-made trajectories. */
import { describe, expect, it } from "vitest";
import { baselineSubtracted, generalizedAdvantages, groupNormalized, leaveOneOut, perTurnGroupNormalized, turnReturns, whiten } from "@/lib/rl/advantages";
import { chunkBatch, toTrainingBatch } from "@/lib/rl/rollouts";
import type { Trajectory } from "@/lib/sdk/protocol";

/** A trajectory with these per-turn rewards; each turn has a 2-token prompt and a 1-token action. */
function episode(rewards: number[]): Trajectory {
  return {
    seed: 0,
    systemPrompt: "",
    turns: rewards.map((reward, t) => ({
      agent: "agent",
      observation: "",
      action: "x",
      reward,
      promptTokens: [257, t],
      actionTokens: [100 + t],
      actionLogprobs: [-0.5],
      info: {},
    })),
    totalReward: rewards.reduce((a, b) => a + b, 0),
    rewards: {},
    agentReturns: {},
    score: 0,
    truncated: false,
    invalidActions: 0,
    metrics: {},
  };
}

describe("advantage estimators", () => {
  it("discounted returns run backwards from the last turn", () => {
    expect(turnReturns(episode([0, 0, 1]), 0.5)).toEqual([0.25, 0.5, 1]);
  });

  it("GRPO centres on the group mean and scales by its std; every turn gets the episode's advantage", () => {
    const [group] = groupNormalized([[episode([1]), episode([0, 0])]], true);
    expect(group![0]![0]).toBeCloseTo(1, 4);
    expect(group![1]).toEqual([expect.closeTo(-1, 4), expect.closeTo(-1, 4)]);
    expect(groupNormalized([[episode([1]), episode([0])]], false)[0]).toEqual([[0.5], [-0.5]]);
  });

  it("RLOO compares each return with the mean of the others", () => {
    expect(leaveOneOut([[episode([3]), episode([1]), episode([2])]])[0]).toEqual([[1.5], [-1.5], [0]]);
  });

  it("per-turn GRPO compares each turn with the group's returns at the same turn", () => {
    // Both episodes end with reward 1 at their last turn; the late turns are not favoured for being late.
    const [group] = perTurnGroupNormalized([[episode([0, 1]), episode([0, 0, 1])]], 1, false);
    expect(group).toEqual([
      [0, 0],
      [0, 0, 0],
    ]);
    const [shorter] = perTurnGroupNormalized([[episode([-0.1, 1]), episode([-0.1, -0.1, 1])]], 1, false);
    expect(shorter![0]![0]).toBeGreaterThan(0); // the first move of the shorter solution is the better one
    expect(shorter![1]![0]).toBeLessThan(0);
  });

  it("REINFORCE subtracts the baseline from each turn's return", () => {
    expect(baselineSubtracted([[episode([1, 1])]], 1, 0.5)).toEqual([[[1.5, 0.5]]]);
  });

  it("GAE with λ = 1 is the return minus the value; with λ = 0 the one-step TD error", () => {
    const groups = [[episode([0, 0, 1])]];
    const values = [[[0.2, 0.4, 0.8]]];
    const full = generalizedAdvantages(groups, values, 1, 1);
    full.advantages[0]![0]!.forEach((a, t) => expect(a).toBeCloseTo(1 - values[0]![0]![t]!, 6));
    full.returns[0]![0]!.forEach((r) => expect(r).toBeCloseTo(1, 6));
    const td = generalizedAdvantages(groups, values, 1, 0);
    expect(td.advantages[0]![0]!.map((a) => Math.round(a * 1e6) / 1e6)).toEqual([0.2, 0.4, 0.2]);
  });

  it("whitening gives zero mean and unit variance over the batch", () => {
    const all = whiten([[[1, 2], [3]], [[4]]]).flat(2);
    expect(all.reduce((a, b) => a + b, 0)).toBeCloseTo(0, 6);
    expect(all.reduce((a, b) => a + b * b, 0) / all.length).toBeCloseTo(1, 4);
  });
});

describe("training batches", () => {
  it("one row per turn: only the action carries weight, sampler logprobs and the advantage", () => {
    const groups = [[episode([0, 1])]];
    const batch = toTrainingBatch(groups, [[[0.3, 0.7]]], [[[1, 1]]]);
    expect(batch.tokens).toEqual([
      [257, 0, 100],
      [257, 1, 101],
    ]);
    expect(batch.weights).toEqual([
      [0, 0, 1],
      [0, 0, 1],
    ]);
    expect(batch.samplingLogprobs).toEqual([
      [0, 0, -0.5],
      [0, 0, -0.5],
    ]);
    expect(batch.advantages).toEqual([
      [0, 0, 0.3],
      [0, 0, 0.7],
    ]);
    expect(batch.returns).toEqual([
      [0, 0, 1],
      [0, 0, 1],
    ]);
    expect(chunkBatch(batch, 1).map((c) => c.tokens.length)).toEqual([1, 1]);
    expect(chunkBatch(batch, 1)[1]!.advantages).toEqual([[0, 0, 0.7]]);
  });
});
