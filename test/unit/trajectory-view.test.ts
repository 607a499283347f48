import { describe, expect, it } from "vitest";
import { filterAndSort, returnsOf, tokenTurns, turnAdvantages, type RolloutItem } from "@/components/run/trajectory";
import { perTurnGroupNormalized } from "@/lib/rl/advantages";
import type { Trajectory } from "@/lib/sdk/protocol";

const END = 261;
const bytes = (text: string) => Array.from(new TextEncoder().encode(text));

function sample(sampleIndex: number, turns: { action: string; reward: number }[], advantage: number | null): RolloutItem {
  const tokens = turns.flatMap((t) => [...bytes(t.action), END]);
  return {
    groupIndex: 0,
    sampleIndex,
    prompt: "p",
    turns: turns.map((t, i) => ({ observation: `o${i}`, ...t })),
    rewards: {},
    totalReward: turns.reduce((a, t) => a + t.reward, 0),
    advantage,
    tokens,
    tokenLogprobs: tokens.map(() => -1),
  };
}

describe("trajectory viewer helpers", () => {
  it("filters by a reward range and sorts by reward or advantage, ties by sample", () => {
    const items = [
      sample(0, [{ action: "a", reward: 0.5 }], 0),
      sample(1, [{ action: "b", reward: 1 }], 0.4),
      sample(2, [{ action: "c", reward: 0 }], -0.4),
      sample(3, [{ action: "d", reward: 1 }], 0.4),
    ];
    const ids = (xs: RolloutItem[]) => xs.map((x) => x.sampleIndex);
    expect(ids(filterAndSort(items, { min: 0.5, max: null, sort: "sample" }))).toEqual([0, 1, 3]);
    expect(ids(filterAndSort(items, { min: null, max: 0.5, sort: "sample" }))).toEqual([0, 2]);
    expect(ids(filterAndSort(items, { min: null, max: null, sort: "reward-desc" }))).toEqual([1, 3, 0, 2]);
    expect(ids(filterAndSort(items, { min: null, max: null, sort: "reward-asc" }))).toEqual([2, 0, 1, 3]);
    expect(ids(filterAndSort(items, { min: null, max: null, sort: "advantage-asc" }))).toEqual([2, 0, 1, 3]);
  });

  it("splits a sample's tokens by the turn whose action they spell, end-of-turn tokens included", () => {
    expect(
      tokenTurns(
        sample(
          0,
          [
            { action: "12", reward: 0 },
            { action: "", reward: 0 },
            { action: "é!", reward: 1 },
          ],
          0,
        ),
      ),
    ).toEqual([0, 0, 0, 1, 2, 2, 2, 2]);
    const wrong = sample(
      0,
      [
        { action: "12", reward: 0 },
        { action: "3", reward: 1 },
      ],
      0,
    );
    wrong.tokens = [...bytes("14"), END, ...bytes("3"), END];
    expect(tokenTurns(wrong)).toBeNull();
  });

  it("gives each turn its return and the advantage its algorithm computed", () => {
    const a = sample(
      0,
      [
        { action: "x", reward: 0 },
        { action: "y", reward: 1 },
      ],
      0.25,
    );
    const b = sample(
      1,
      [
        { action: "x", reward: 1 },
        { action: "y", reward: 0 },
      ],
      -0.25,
    );
    expect(returnsOf(a, 0.5)).toEqual([0.5, 1]);
    expect(turnAdvantages(a, [a, b], { name: "grpo", discount: 1, normalizeAdvantages: true })).toEqual([0.25, 0.25]);
    // REINFORCE: return − one baseline, the baseline read off the stored first-turn advantage (0.5 − 0.25).
    expect(turnAdvantages(a, [a, b], { name: "reinforce", discount: 0.5, normalizeAdvantages: true })).toEqual([0.25, 0.75]);
    // GRPO per turn: recomputed from the group exactly as training does.
    const asTrajectories = [a, b].map((s) => ({ turns: s.turns.map((t) => ({ reward: t.reward })), totalReward: s.totalReward }) as unknown as Trajectory);
    expect(turnAdvantages(b, [a, b], { name: "grpo-per-turn", discount: 0.9, normalizeAdvantages: true })).toEqual(
      perTurnGroupNormalized([asTrajectories], 0.9, true)[0]![1],
    );
    expect(turnAdvantages(a, [a, b], { name: "ppo", discount: 1, normalizeAdvantages: true })).toEqual([0.25, null]);
    expect(turnAdvantages({ ...a, advantage: null }, [a], { name: "grpo", discount: 1, normalizeAdvantages: true })).toEqual([null, null]);
    // Rows that keep every turn's advantage (as the worker now writes them) show those, PPO's later turns too.
    const kept = { ...a, turns: a.turns.map((t, i) => ({ ...t, advantage: [0.25, -0.5][i] })) };
    expect(turnAdvantages(kept, [kept, b], { name: "ppo", discount: 1, normalizeAdvantages: true })).toEqual([0.25, -0.5]);
  });
});
