/**
 * Advantage estimators. Each takes the rollouts of one step, grouped by prompt ([group][sample]), and returns
 * one advantage per turn of each trajectory ([group][sample][turn]).
 *
 * Credit goes per role when the episodes were played by several agents (a turn-based or simultaneous protocol:
 * self-play, a team): each turn is credited with its acting agent's own return (`rewardTo`), against a baseline
 * computed over that agent's returns alone (role-conditioned advantages, as SPIRAL does for zero-sum self-play).
 * In a zero-sum game the episode's total is 0 whoever wins, and the winner's +1 credited to every turn would reward
 * the loser's moves too; per role, the winner's turns go up and the loser's down. With one agent there is one role
 * and its return is the episode's: the formulas are the single-agent ones.
 */
import { rewardTo, type Trajectory, type Turn } from "@/lib/sdk/protocol";

export type TurnAdvantages = number[][][];

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const std = (xs: number[]) => {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
};

/** The agents that played these episodes: their protocol's (each trajectory's agentReturns names them all). */
export function agentsOf(trajectories: Trajectory[]): string[] {
  const agents = new Set<string>();
  for (const trajectory of trajectories) {
    for (const agent of Object.keys(trajectory.agentReturns ?? {})) agents.add(agent);
    for (const turn of trajectory.turns) agents.add(turn.agent);
  }
  return [...agents];
}

/** One agent's return over an episode: the sum of its rewards (equal to `trajectory.agentReturns[agent]`). */
export function agentReturn(trajectory: Trajectory, agent: string): number {
  return trajectory.turns.reduce((sum, turn) => sum + rewardTo(turn, agent), 0);
}

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

/**
 * The acting agent's discounted return from each turn on: G_t = Σ_{k≥t} γ^{k−t}·rewardTo(turn_k, agent_t), the
 * rewards the other agents' moves bring it included (a win on the opponent's blunder, a loss on its winning move).
 */
export function actingAgentReturns(trajectory: Trajectory, discount: number): number[] {
  const running = new Map(agentsOf([trajectory]).map((agent) => [agent, 0]));
  const out = new Array<number>(trajectory.turns.length);
  for (let t = trajectory.turns.length - 1; t >= 0; t--) {
    const turn = trajectory.turns[t]!;
    for (const [agent, g] of running) running.set(agent, rewardTo(turn, agent) + discount * g);
    out[t] = running.get(turn.agent)!;
  }
  return out;
}

/**
 * How a set of episodes is credited: its roles (the agents when there are several; one unnamed role otherwise),
 * the role each turn belongs to, a role's episode return and each turn's return to its role.
 */
export type Credit = {
  roles: string[];
  roleOf: (turn: Turn) => string;
  episodeReturn: (trajectory: Trajectory, role: string) => number;
  turnReturns: (trajectory: Trajectory, discount: number) => number[];
  /** What a role received at a turn. */
  rewardAt: (turn: Turn, role: string) => number;
};

/** The one role of a single-agent run: every turn's, whatever its agent is called. */
const SOLE_ROLE = "";

/** Per-role credit when the episodes were played by two agents or more; the episode's return otherwise. */
export function creditOf(trajectories: Trajectory[]): Credit {
  const agents = agentsOf(trajectories);
  if (agents.length < 2) {
    return {
      roles: [SOLE_ROLE],
      roleOf: () => SOLE_ROLE,
      episodeReturn: (trajectory) => trajectory.totalReward,
      turnReturns,
      rewardAt: (turn) => turn.reward,
    };
  }
  return { roles: agents, roleOf: (turn) => turn.agent, episodeReturn: agentReturn, turnReturns: actingAgentReturns, rewardAt: rewardTo };
}

/** Each role's episode returns over the group, in the group's order. */
function roleReturns(group: Trajectory[], credit: Credit): Map<string, number[]> {
  return new Map(credit.roles.map((role) => [role, group.map((trajectory) => credit.episodeReturn(trajectory, role))]));
}

/**
 * GRPO: the episode's return against its group's mean (divided by the group's std when normalising). With several
 * agents, each turn's advantage is its acting agent's return against the mean (and std) of that agent's returns
 * over the group.
 */
export function groupNormalized(groups: Trajectory[][], normalize: boolean): TurnAdvantages {
  return groups.map((group) => {
    const credit = creditOf(group);
    const returns = roleReturns(group, credit);
    const stats = new Map([...returns].map(([role, rs]) => [role, { m: mean(rs), s: std(rs) }]));
    return group.map((trajectory, i) =>
      trajectory.turns.map((turn) => {
        const role = credit.roleOf(turn);
        const { m, s } = stats.get(role)!;
        const r = returns.get(role)![i]!;
        return normalize ? (r - m) / (s + 1e-6) : r - m;
      }),
    );
  });
}

/**
 * Per-turn GRPO: each turn is credited with its own discounted return, compared with the mean return of the
 * group's episodes at the same turn (a baseline per turn index: later turns sit nearer the reward, so comparing
 * them with early ones would favour late moves whatever they are), so an early good move and a late blunder in
 * one episode get different signs. Normalised by the std of the group's turn advantages. With several agents, a
 * turn's return is its acting agent's, its baseline the mean over the group of that agent's return at its move of
 * the same index (its first, second, … move), and the std is that agent's.
 */
export function perTurnGroupNormalized(groups: Trajectory[][], discount: number, normalize: boolean): TurnAdvantages {
  return groups.map((group) => {
    const credit = creditOf(group);
    const returns = group.map((trajectory) => credit.turnReturns(trajectory, discount));
    // moves[i][t]: the role of turn t of episode i, and which of that role's moves it is.
    const moves = group.map((trajectory) => {
      const counts = new Map<string, number>();
      return trajectory.turns.map((turn) => {
        const role = credit.roleOf(turn);
        const index = counts.get(role) ?? 0;
        counts.set(role, index + 1);
        return { role, index };
      });
    });
    const atMove = new Map<string, number[][]>(credit.roles.map((role) => [role, []]));
    returns.forEach((perTurn, i) =>
      perTurn.forEach((g, t) => {
        const { role, index } = moves[i]![t]!;
        const slots = atMove.get(role)!;
        while (slots.length <= index) slots.push([]);
        slots[index]!.push(g);
      }),
    );
    const baselines = new Map([...atMove].map(([role, slots]) => [role, slots.map(mean)]));
    const centred = returns.map((perTurn, i) =>
      perTurn.map((g, t) => {
        const { role, index } = moves[i]![t]!;
        return g - baselines.get(role)![index]!;
      }),
    );
    const spread = new Map(credit.roles.map((role) => [role, std(centred.flatMap((perTurn, i) => perTurn.filter((_, t) => moves[i]![t]!.role === role)))]));
    return centred.map((perTurn, i) => perTurn.map((a, t) => (normalize ? a / (spread.get(moves[i]![t]!.role)! + 1e-6) : a)));
  });
}

/** RLOO: the return against the mean of the other samples of the same prompt (with several agents, per agent). */
export function leaveOneOut(groups: Trajectory[][]): TurnAdvantages {
  return groups.map((group) => {
    const credit = creditOf(group);
    const returns = roleReturns(group, credit);
    const totals = new Map([...returns].map(([role, rs]) => [role, rs.reduce((sum, r) => sum + r, 0)]));
    return group.map((trajectory, i) =>
      trajectory.turns.map((turn) => {
        const role = credit.roleOf(turn);
        const r = returns.get(role)![i]!;
        const baseline = group.length > 1 ? (totals.get(role)! - r) / (group.length - 1) : 0;
        return r - baseline;
      }),
    );
  });
}

/**
 * REINFORCE with a baseline: each turn's discounted return minus a running baseline. With several agents the
 * return is the acting agent's and `baseline` may give one per agent (an agent left out has 0).
 */
export function baselineSubtracted(groups: Trajectory[][], discount: number, baseline: number | Record<string, number>): TurnAdvantages {
  return groups.map((group) => {
    const credit = creditOf(group);
    return group.map((trajectory) => {
      const returns = credit.turnReturns(trajectory, discount);
      return trajectory.turns.map((turn, t) => returns[t]! - (typeof baseline === "number" ? baseline : (baseline[credit.roleOf(turn)] ?? 0)));
    });
  });
}

/**
 * GAE over turns: δ_t = r_t + γ·V_{t+1} − V_t (V after the last turn is 0), A_t = Σ_k (γλ)^k·δ_{t+k}.
 * `values[g][i][t]` is the value head's estimate of the state before turn t. With several agents each agent's turns
 * form its own chain: V_t estimates the acting agent's return, the next state is that agent's next turn t' (gap
 * n = t' − t turns), r_t is what the agent received from turn t up to t' (γ-discounted per turn), and
 * δ_t = r_t + γⁿ·V_{t'} − V_t, A_t = δ_t + γⁿλ·A_{t'}. With λ = 1, A_t + V_t (the value target) is the acting
 * agent's return from t on.
 */
export function generalizedAdvantages(groups: Trajectory[][], values: number[][][], discount: number, lambda: number) {
  const advantages: TurnAdvantages = [];
  const returns: TurnAdvantages = [];
  for (const [g, group] of groups.entries()) {
    const credit = creditOf(group);
    advantages.push([]);
    returns.push([]);
    for (const [i, trajectory] of group.entries()) {
      const v = values[g]![i]!;
      const n = trajectory.turns.length;
      const a = new Array<number>(n);
      // For each role, walking backwards: its advantage and value at its next turn, and the rewards it received
      // since then, discounted to the turn at hand.
      const ahead = new Map(credit.roles.map((role) => [role, { advantage: 0, value: 0, gap: 0, received: 0 }]));
      for (let t = n - 1; t >= 0; t--) {
        const turn = trajectory.turns[t]!;
        for (const [role, next] of ahead) {
          next.received = credit.rewardAt(turn, role) + discount * next.received;
          next.gap += 1;
        }
        const next = ahead.get(credit.roleOf(turn))!;
        const decay = discount ** next.gap;
        const delta = next.received + decay * next.value - v[t]!;
        a[t] = delta + decay * lambda * next.advantage;
        Object.assign(next, { advantage: a[t], value: v[t]!, gap: 0, received: 0 });
      }
      advantages[g]!.push(a);
      returns[g]!.push(a.map((x, t) => x + v[t]!));
    }
  }
  return { advantages, returns };
}

/**
 * Scales advantages over the whole batch to zero mean and unit variance (PPO's usual normalisation). Given the
 * batch's groups, played by several agents, each agent's turns are scaled apart.
 */
export function whiten(advantages: TurnAdvantages, groups?: Trajectory[][]): TurnAdvantages {
  const credit = groups ? creditOf(groups.flat()) : null;
  if (!credit || credit.roles.length < 2) {
    const all = advantages.flat(2);
    const m = mean(all);
    const s = std(all);
    return advantages.map((group) => group.map((turns) => turns.map((a) => (a - m) / (s + 1e-6))));
  }
  const roleAt = (g: number, i: number, t: number) => credit.roleOf(groups![g]![i]!.turns[t]!);
  const stats = new Map(
    credit.roles.map((role) => {
      const all = advantages.flatMap((group, g) => group.flatMap((turns, i) => turns.filter((_, t) => roleAt(g, i, t) === role)));
      return [role, { m: mean(all), s: std(all) }];
    }),
  );
  return advantages.map((group, g) =>
    group.map((turns, i) =>
      turns.map((a, t) => {
        const { m, s } = stats.get(roleAt(g, i, t))!;
        return (a - m) / (s + 1e-6);
      }),
    ),
  );
}
