/**
 * Credit with several agents: each turn's advantage comes from its acting agent's own return, against a baseline
 * over that agent's returns in the group (role-conditioned advantages). Hand-made trajectories of two-agent games,
 * and single-agent ones checked against the single-agent formulas.
 */
import { describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";
import {
  agentsOf,
  baselineSubtracted,
  generalizedAdvantages,
  groupNormalized,
  leaveOneOut,
  perTurnGroupNormalized,
  type TurnAdvantages,
  whiten,
} from "@/lib/rl/advantages";
import { hasSignal } from "@/lib/rl/algorithm";
import { rolloutMetrics } from "@/lib/rl/rollouts";
import type { Trajectory, Turn } from "@/lib/sdk/protocol";

/** One turn of a game: who acted, and either its own reward or every agent's reward of the step that followed. */
type Move = { agent: string; reward?: number; rewards?: Record<string, number> };

/** A trajectory of these moves, its totals as the protocol sums them (each reward counted once). */
function game(moves: Move[]): Trajectory {
  const turns: Turn[] = moves.map((move, t) => ({
    agent: move.agent,
    observation: "",
    action: "x",
    reward: move.rewards ? (move.rewards[move.agent] ?? 0) : (move.reward ?? 0),
    ...(move.rewards ? { rewards: move.rewards } : {}),
    promptTokens: [257, t],
    actionTokens: [100 + t],
    actionLogprobs: [-0.5],
    info: {},
  }));
  const agentReturns: Record<string, number> = { X: 0, O: 0 };
  for (const move of moves) {
    if (move.rewards) for (const [agent, r] of Object.entries(move.rewards)) agentReturns[agent] = (agentReturns[agent] ?? 0) + r;
    else agentReturns[move.agent] = (agentReturns[move.agent] ?? 0) + (move.reward ?? 0);
  }
  const totalReward = Object.values(agentReturns).reduce((a, b) => a + b, 0);
  return {
    seed: 0,
    systemPrompt: "",
    turns,
    totalReward,
    rewards: { env: totalReward },
    agentReturns,
    score: 0,
    truncated: false,
    invalidActions: 0,
    metrics: {},
  };
}

/** X, O, X, O; the last step pays `outcome` (the other steps pay nothing). */
const played = (outcome: Record<string, number>) => game([{ agent: "X" }, { agent: "O" }, { agent: "X" }, { agent: "O", rewards: outcome }]);

/**
 * Every estimator, as each algorithm calls it: REINFORCE's baselines at each agent's mean return (its first
 * step's), PPO's value head predicting 0 everywhere.
 */
function estimators(groups: Trajectory[][]): Record<string, TurnAdvantages> {
  const zeros = groups.map((group) => group.map((t) => t.turns.map(() => 0)));
  const episodes = groups.flat();
  const meanReturn = (agent: string) => episodes.reduce((sum, t) => sum + t.agentReturns[agent]!, 0) / episodes.length;
  return {
    grpo: groupNormalized(groups, true),
    "grpo unnormalised": groupNormalized(groups, false),
    "grpo-per-turn": perTurnGroupNormalized(groups, 1, true),
    "grpo-per-turn discounted": perTurnGroupNormalized(groups, 0.9, false),
    rloo: leaveOneOut(groups),
    reinforce: baselineSubtracted(groups, 0.9, { X: meanReturn("X"), O: meanReturn("O") }),
    "ppo (gae)": whiten(generalizedAdvantages(groups, zeros, 0.9, 0.95).advantages, groups),
  };
}

/** The advantages of one agent's turns, episode by episode. */
const advantagesOf = (advantages: TurnAdvantages, groups: Trajectory[][], agent: string) =>
  advantages.map((group, g) => group.map((turns, i) => turns.filter((_, t) => groups[g]![i]!.turns[t]!.agent === agent)));

describe("role-conditioned advantages", () => {
  it("in a zero-sum group the winner's turns get positive advantages and the loser's negative, of equal size", () => {
    const groups = [[played({ X: 1, O: -1 }), played({ X: -1, O: 1 })]];
    for (const [name, advantages] of Object.entries(estimators(groups))) {
      const [xWins, oWins] = advantages[0]!;
      // X, O, X, O: in the first episode X won.
      for (const [t, a] of xWins!.entries()) expect(Math.sign(a), `${name}, X won, turn ${t}`).toBe(t % 2 === 0 ? 1 : -1);
      for (const [t, a] of oWins!.entries()) expect(Math.sign(a), `${name}, O won, turn ${t}`).toBe(t % 2 === 0 ? -1 : 1);
      // The two episodes mirror each other: the winner's advantage at a turn is the loser's, negated.
      for (const t of [0, 1, 2, 3]) expect(oWins![t], `${name}, turn ${t}`).toBeCloseTo(-xWins![t]!, 9);
    }
    // Undiscounted, every turn of an episode has the same size: the winner gains what the loser loses.
    const grpo = groupNormalized(groups, true)[0]![0]!;
    for (const a of grpo) expect(Math.abs(a)).toBeCloseTo(Math.abs(grpo[0]!), 9);
    expect(grpo[0]).toBeCloseTo(1, 5);
  });

  it("credits the winner with the reward alone when only the winner is paid", () => {
    // The winning move pays +1 to its mover (no per-agent rewards): the loser's moves must not share it.
    const groups = [
      [game([{ agent: "X" }, { agent: "O" }, { agent: "X", reward: 1 }]), game([{ agent: "X" }, { agent: "O" }, { agent: "X" }, { agent: "O", reward: 1 }])],
    ];
    for (const [name, advantages] of Object.entries(estimators(groups))) {
      // Per turn, O's second move has no counterpart in the group (X won the first game before it): it is its
      // own baseline.
      const expected = name.startsWith("grpo-per-turn")
        ? [
            [1, -1, 1],
            [-1, 1, -1, 0],
          ]
        : [
            [1, -1, 1],
            [-1, 1, -1, 1],
          ];
      expect(
        advantages[0]!.map((turns) => turns.map(Math.sign)),
        name,
      ).toEqual(expected);
    }
  });

  it("a shared cooperative reward gives both agents' turns the same sign", () => {
    const groups = [[played({ X: 1, O: 1 }), played({ X: 0, O: 0 }), played({ X: 1, O: 1 })]];
    for (const [name, advantages] of Object.entries(estimators(groups))) {
      for (const [i, sign] of [1, -1, 1].entries()) {
        for (const [t, a] of advantages[0]![i]!.entries()) expect(Math.sign(a), `${name}, episode ${i}, turn ${t}`).toBe(sign);
      }
    }
  });

  it("one agent's rewards never move another agent's advantages", () => {
    // A general-sum group: both agents paid along the way, by steps with per-agent rewards and by their own moves.
    const group = (o: number[]) => [
      game([
        { agent: "X", rewards: { X: 0.2, O: o[0]! } },
        { agent: "O", reward: o[1]! },
        { agent: "X", rewards: { X: 1, O: o[2]! } },
      ]),
      game([
        { agent: "X", rewards: { X: -0.3, O: o[3]! } },
        { agent: "O", reward: o[4]! },
        { agent: "X", rewards: { X: 0.5, O: o[5]! } },
      ]),
      game([
        { agent: "X", rewards: { X: 0, O: o[6]! } },
        { agent: "O", reward: o[7]! },
        { agent: "X", rewards: { X: 0.1, O: o[8]! } },
      ]),
    ];
    const before = [group([1, 0, -1, 0.5, 2, 0, -0.2, 0.3, 1])];
    const after = [group([-3, 1, 0.7, 0, -2, 4, 0.9, -1, 0])];
    const [was, now] = [estimators(before), estimators(after)];
    for (const name of Object.keys(was)) {
      expect(advantagesOf(now[name]!, after, "X"), name).toEqual(advantagesOf(was[name]!, before, "X"));
      // The change did reach O.
      expect(advantagesOf(now[name]!, after, "O"), name).not.toEqual(advantagesOf(was[name]!, before, "O"));
    }
  });

  it("the value target is the acting agent's own return", () => {
    const groups = [[game([{ agent: "X" }, { agent: "O", rewards: { X: 2, O: -1 } }, { agent: "X", rewards: { X: 1, O: 3 } }])]];
    const values = [[[0.5, -0.25, 1]]];
    const { advantages, returns } = generalizedAdvantages(groups, values, 0.5, 1);
    // X at turn 0: 0 + 0.5·2 + 0.25·1; O at turn 1: −1 + 0.5·3; X at turn 2: 1.
    expect(returns[0]![0]).toEqual([1.25, 0.5, 1]);
    expect(advantages[0]![0]).toEqual([1.25 - 0.5, 0.5 + 0.25, 0]);
  });

  it("a group has a signal when some agent's returns differ, not when the sums do", () => {
    // X always wins: no role has anything to learn.
    expect(hasSignal([played({ X: 1, O: -1 }), played({ X: 1, O: -1 })])).toBe(false);
    // Each episode sums to 0, but the winners differ.
    expect(hasSignal([played({ X: 1, O: -1 }), played({ X: -1, O: 1 })])).toBe(true);
    // The sums differ only through O; X has nothing to learn, O has.
    expect(hasSignal([played({ X: 1, O: 0 }), played({ X: 1, O: -1 })])).toBe(true);
  });

  it("reports each agent's mean return and, for two agents, each one's share of wins", () => {
    const groups = [
      [played({ X: 1, O: -1 }), played({ X: 1, O: -1 })],
      [played({ X: -1, O: 1 }), played({ X: 0, O: 0 })],
    ];
    const metrics = rolloutMetrics(groups);
    expect(metrics["reward/agent/X"]).toBeCloseTo(0.25);
    expect(metrics["reward/agent/O"]).toBeCloseTo(-0.25);
    expect(metrics["episode/win/X"]).toBeCloseTo(0.5);
    expect(metrics["episode/win/O"]).toBeCloseTo(0.25);
    // reward/mean stays the sum over agents.
    expect(metrics["reward/mean"]).toBe(0);
    // A shared reward is no one's win.
    const shared = rolloutMetrics([[played({ X: 1, O: 1 })]]);
    expect([shared["episode/win/X"], shared["episode/win/O"], shared["reward/agent/O"]]).toEqual([0, 0, 1]);
  });
});

describe("a single agent's credit", () => {
  /** Random single-agent episodes as runEpisodes records them: one agent, its reward on each turn. */
  function randomGroups(seed: number): Trajectory[][] {
    const rng = new Rng(seed);
    return Array.from({ length: 3 }, () =>
      Array.from({ length: 4 }, () => {
        const rewards = Array.from({ length: 1 + (rng.nextU32() % 4) }, () => Math.round((rng.uniform() * 2 - 1) * 100) / 100);
        const trajectory = game(rewards.map((reward) => ({ agent: "agent", reward })));
        trajectory.agentReturns = { agent: trajectory.totalReward };
        return trajectory;
      }),
    );
  }

  it("gives exactly the single-agent formulas' advantages", () => {
    const groups = randomGroups(11);
    const rng = new Rng(5);
    const values = groups.map((group) => group.map((t) => t.turns.map(() => rng.uniform() - 0.5)));
    expect(agentsOf(groups.flat())).toEqual(["agent"]);
    expect(groupNormalized(groups, true)).toEqual(singleAgent.groupNormalized(groups, true));
    expect(groupNormalized(groups, false)).toEqual(singleAgent.groupNormalized(groups, false));
    expect(perTurnGroupNormalized(groups, 0.9, true)).toEqual(singleAgent.perTurnGroupNormalized(groups, 0.9, true));
    expect(perTurnGroupNormalized(groups, 1, false)).toEqual(singleAgent.perTurnGroupNormalized(groups, 1, false));
    expect(leaveOneOut(groups)).toEqual(singleAgent.leaveOneOut(groups));
    expect(baselineSubtracted(groups, 0.9, 0.3)).toEqual(singleAgent.baselineSubtracted(groups, 0.9, 0.3));
    expect(generalizedAdvantages(groups, values, 0.9, 0.95)).toEqual(singleAgent.generalizedAdvantages(groups, values, 0.9, 0.95));
    const gae = generalizedAdvantages(groups, values, 0.9, 0.95).advantages;
    expect(whiten(gae, groups)).toEqual(singleAgent.whiten(gae));
    for (const group of groups) expect(hasSignal(group)).toBe(group.some((t) => t.totalReward !== group[0]!.totalReward));
  });

  it("reports no per-agent metrics", () => {
    const metrics = rolloutMetrics(randomGroups(2));
    expect(Object.keys(metrics).filter((name) => name.startsWith("reward/agent/") || name.startsWith("episode/win/"))).toEqual([]);
  });
});

/** The single-agent formulas, written out: the episode's total reward and each turn's reward, one baseline. */
const singleAgent = (() => {
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  const std = (xs: number[]) => Math.sqrt(mean(xs.map((x) => (x - mean(xs)) ** 2)));
  const turnReturns = (trajectory: Trajectory, discount: number) => {
    const out: number[] = [];
    let running = 0;
    for (let t = trajectory.turns.length - 1; t >= 0; t--) out[t] = running = trajectory.turns[t]!.reward + discount * running;
    return out;
  };
  return {
    groupNormalized: (groups: Trajectory[][], normalize: boolean) =>
      groups.map((group) => {
        const returns = group.map((t) => t.totalReward);
        const [m, s] = [mean(returns), std(returns)];
        return group.map((t) => t.turns.map(() => (normalize ? (t.totalReward - m) / (s + 1e-6) : t.totalReward - m)));
      }),
    perTurnGroupNormalized: (groups: Trajectory[][], discount: number, normalize: boolean) =>
      groups.map((group) => {
        const returns = group.map((t) => turnReturns(t, discount));
        const longest = Math.max(0, ...returns.map((r) => r.length));
        const baselines = Array.from({ length: longest }, (_, t) => mean(returns.filter((r) => t < r.length).map((r) => r[t]!)));
        const centred = returns.map((perTurn) => perTurn.map((g, t) => g - baselines[t]!));
        const s = std(centred.flat());
        return centred.map((perTurn) => perTurn.map((a) => (normalize ? a / (s + 1e-6) : a)));
      }),
    leaveOneOut: (groups: Trajectory[][]) =>
      groups.map((group) => {
        const total = group.reduce((sum, t) => sum + t.totalReward, 0);
        return group.map((t) => t.turns.map(() => t.totalReward - (total - t.totalReward) / (group.length - 1)));
      }),
    baselineSubtracted: (groups: Trajectory[][], discount: number, baseline: number) =>
      groups.map((group) => group.map((t) => turnReturns(t, discount).map((g) => g - baseline))),
    generalizedAdvantages: (groups: Trajectory[][], values: number[][][], discount: number, lambda: number) => {
      const advantages = groups.map((group, g) =>
        group.map((trajectory, i) => {
          const v = values[g]![i]!;
          const a: number[] = [];
          let running = 0;
          for (let t = trajectory.turns.length - 1; t >= 0; t--) {
            const next = t + 1 < trajectory.turns.length ? v[t + 1]! : 0;
            a[t] = running = trajectory.turns[t]!.reward + discount * next - v[t]! + discount * lambda * running;
          }
          return a;
        }),
      );
      return { advantages, returns: advantages.map((group, g) => group.map((a, i) => a.map((x, t) => x + values[g]![i]![t]!))) };
    },
    whiten: (advantages: TurnAdvantages) => {
      const all = advantages.flat(2);
      const [m, s] = [mean(all), std(all)];
      return advantages.map((group) => group.map((turns) => turns.map((a) => (a - m) / (s + 1e-6))));
    },
  };
})();
