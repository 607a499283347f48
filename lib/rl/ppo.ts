/**
 * PPO with GAE: a value head estimates each turn's state value; advantages come from GAE over turns; the policy
 * takes clipped steps (several epochs over the batch) while the value head regresses onto the returns. With several
 * agents the value of a turn's state is its acting agent's expected return, its target that agent's return, and
 * each agent's advantages are whitened apart (lib/rl/advantages.ts).
 */
import { generalizedAdvantages, whiten } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import type { PolicyModel } from "./primitives";
import { seatingOf, seatOf } from "./seats";
import { updatePolicies } from "./update";

export const ppo: RlAlgorithm = async (ctx) => {
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: false });

  // The value of the state before each turn: the value head's output at the turn's first action token, from the
  // value head of the policy that played it (one forward per policy that trains; a frozen seat's turns keep 0,
  // as they are never trained on and each agent's GAE chain reads its own turns' values only).
  const values: number[][][] = groups.map((group) => group.map((t) => t.turns.map(() => 0)));
  const valuedBy = new Map<PolicyModel, { g: number; i: number; t: number; tokens: number[]; at: number }[]>();
  groups.forEach((group, g) =>
    group.forEach((trajectory, i) =>
      trajectory.turns.forEach((turn, t) => {
        if (turn.actionTokens.length === 0) return;
        const seat = seatingOf(trajectory) ? seatOf(trajectory, turn.agent) : { policy: ctx.policy, trains: true };
        if (!seat?.trains) return;
        const turns = valuedBy.get(seat.policy) ?? [];
        turns.push({ g, i, t, tokens: [...turn.promptTokens, ...turn.actionTokens], at: turn.promptTokens.length });
        valuedBy.set(seat.policy, turns);
      }),
    ),
  );
  for (const [policy, turns] of valuedBy) {
    const { values: predicted } = await policy.primitives.forward({ tokens: turns.map((turn) => turn.tokens) });
    if (!predicted) throw new Error("ppo needs a value head: set agent.valueHead to true");
    turns.forEach((turn, k) => (values[turn.g]![turn.i]![turn.t] = predicted[k]![turn.at]!));
  }

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const gae = generalizedAdvantages(groups, values, ctx.config.discount, ctx.config.gaeLambda);
  const advantages = whiten(gae.advantages, groups);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const update = await updatePolicies(ctx, groups, advantages, { returns: gae.returns, config: { ...ctx.config, loss: "ppo" } });
  const meanValue = values.flat(2).reduce((a, b) => a + b, 0) / Math.max(values.flat(2).length, 1);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update, "train/value_mean": meanValue } };
};
