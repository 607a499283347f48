import { describe, expect, it } from "vitest";
import {
  agentReturnsOf,
  agentsOf,
  filterAndSort,
  protocolAgentsOf,
  returnsOf,
  tokenTurns,
  turnAdvantages,
  type RolloutItem,
} from "@/components/run/trajectory";
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

describe("trajectory viewer helpers on several agents", () => {
  /** X and O alternate; O's last move wins, and that step pays O +1 and X −1. */
  const game: RolloutItem = {
    ...sample(0, [], 0),
    turns: [
      { agent: "X", observation: "x sees 1", action: "a1", reward: 0 },
      { agent: "O", observation: "o sees 1", action: "b1", reward: 0 },
      { agent: "X", observation: "x sees 2", action: "a2", reward: 0 },
      { agent: "O", observation: "o sees 2", action: "b2", reward: 1, rewards: { O: 1, X: -1 } },
    ],
  };

  it("names the agents in the protocol's order, and sums each agent's return from the per-agent rewards", () => {
    expect(agentsOf(game)).toEqual(["X", "O"]);
    expect(agentsOf(game, protocolAgentsOf({ protocol: { name: "turn-based", agents: ["O", "X"] } }))).toEqual(["O", "X"]);
    expect(agentReturnsOf(game)).toEqual({ X: -1, O: 1 });
    // One agent: the viewer shows the sample as before.
    expect(agentsOf(sample(0, [{ action: "a", reward: 1 }], 0))).toBeNull();
  });

  it("gives each turn its acting agent's own return, the other's winning move included", () => {
    // γ = 0.5: X's turns see X's −1 one and three turns later; O's see O's +1 at once and two turns later.
    expect(returnsOf(game, 0.5)).toEqual([-0.125, 0.25, -0.5, 1]);
  });
});
