/**
 * Advantage estimators. Each takes the rollouts of one step, grouped by prompt ([group][sample]), and returns
 * one advantage per turn of each trajectory ([group][sample][turn]).
 */
import type { Trajectory } from "@/lib/sdk/protocol";

export type TurnAdvantages = number[][][];

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const std = (xs: number[]) => {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
};

/** Discounted return from each turn on: G_t = r_t + γ·G_{t+1}. */
export function turnReturns(trajectory: Trajectory, discount: number): number[] {
  const out = new Array<number>(trajectory.turns.length);
  let running = 0;
  for (let t = trajectory.turns.length - 1; t >= 0; t--) {
    running = trajectory.turns[t]!.reward + discount * running;
    out[t] = running;
  }
  return out;
}

/** GRPO: the episode's return against its group's mean (divided by the group's std when normalising). */
export function groupNormalized(groups: Trajectory[][], normalize: boolean): TurnAdvantages {
  return groups.map((group) => {
    const returns = group.map((t) => t.totalReward);
    const m = mean(returns);
    const s = std(returns);
    return group.map((trajectory) => {
      const a = normalize ? (trajectory.totalReward - m) / (s + 1e-6) : trajectory.totalReward - m;
      return trajectory.turns.map(() => a);
    });
  });
}

/**
 * Per-turn GRPO: each turn is credited with its own discounted return, compared with the mean return of the
 * group's episodes at the same turn (a baseline per turn index: later turns sit nearer the reward, so comparing
 * them with early ones would favour late moves whatever they are), so an early good move and a late blunder in
 * one episode get different signs. Normalised by the std of the group's turn advantages.
 */
export function perTurnGroupNormalized(groups: Trajectory[][], discount: number, normalize: boolean): TurnAdvantages {
  return groups.map((group) => {
    const returns = group.map((t) => turnReturns(t, discount));
    const longest = Math.max(0, ...returns.map((r) => r.length));
    const baselines = Array.from({ length: longest }, (_, t) => mean(returns.filter((r) => t < r.length).map((r) => r[t]!)));
    const centred = returns.map((perTurn) => perTurn.map((g, t) => g - baselines[t]!));
    const s = std(centred.flat());
    return centred.map((perTurn) => perTurn.map((a) => (normalize ? a / (s + 1e-6) : a)));
  });
}

/** RLOO: the return against the mean of the other samples of the same prompt. */
export function leaveOneOut(groups: Trajectory[][]): TurnAdvantages {
  return groups.map((group) => {
    const total = group.reduce((sum, t) => sum + t.totalReward, 0);
    return group.map((trajectory) => {
      const baseline = group.length > 1 ? (total - trajectory.totalReward) / (group.length - 1) : 0;
      return trajectory.turns.map(() => trajectory.totalReward - baseline);
    });
  });
}

/** REINFORCE with a baseline: each turn's discounted return minus a running baseline. */
export function baselineSubtracted(groups: Trajectory[][], discount: number, baseline: number): TurnAdvantages {
  return groups.map((group) => group.map((trajectory) => turnReturns(trajectory, discount).map((g) => g - baseline)));
}

/**
 * GAE over turns: δ_t = r_t + γ·V_{t+1} − V_t (V after the last turn is 0), A_t = Σ_k (γλ)^k·δ_{t+k}.
 * `values[g][i][t]` is the value head's estimate of the state before turn t.
 */
export function generalizedAdvantages(groups: Trajectory[][], values: number[][][], discount: number, lambda: number) {
  const advantages: TurnAdvantages = [];
  const returns: TurnAdvantages = [];
  for (const [g, group] of groups.entries()) {
    advantages.push([]);
    returns.push([]);
    for (const [i, trajectory] of group.entries()) {
      const v = values[g]![i]!;
      const n = trajectory.turns.length;
      const a = new Array<number>(n);
      let running = 0;
      for (let t = n - 1; t >= 0; t--) {
        const next = t + 1 < n ? v[t + 1]! : 0;
        const delta = trajectory.turns[t]!.reward + discount * next - v[t]!;
        running = delta + discount * lambda * running;
        a[t] = running;
      }
      advantages[g]!.push(a);
      returns[g]!.push(a.map((x, t) => x + v[t]!));
    }
  }
  return { advantages, returns };
}

/** Scales advantages over the whole batch to zero mean and unit variance (PPO's usual normalisation). */
export function whiten(advantages: TurnAdvantages): TurnAdvantages {
  const all = advantages.flat(2);
  const m = mean(all);
  const s = std(all);
  return advantages.map((group) => group.map((turns) => turns.map((a) => (a - m) / (s + 1e-6))));
}
