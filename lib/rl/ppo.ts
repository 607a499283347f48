/**
 * PPO with GAE: a value head estimates each turn's state value; advantages come from GAE over turns; the policy
 * takes clipped steps (several epochs over the batch) while the value head regresses onto the returns. With several
 * agents the value of a turn's state is its acting agent's expected return, its target that agent's return, and
 * each agent's advantages are whitened apart (lib/rl/advantages.ts).
 */
import { generalizedAdvantages, whiten } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import { toTrainingBatch } from "./rollouts";
import { policyUpdate } from "./update";

export const ppo: RlAlgorithm = async (ctx) => {
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: false });

  // The value of the state before each turn: the value head's output at the turn's first action token.
  const turns = groups.flatMap((group) => group.flatMap((t) => t.turns.filter((turn) => turn.actionTokens.length > 0)));
  const values: number[][][] = groups.map((group) => group.map((t) => t.turns.map(() => 0)));
  if (turns.length > 0) {
    const { values: predicted } = await ctx.policy.primitives.forward({ tokens: turns.map((turn) => [...turn.promptTokens, ...turn.actionTokens]) });
    if (!predicted) throw new Error("ppo needs a value head: set agent.valueHead to true");
    let k = 0;
    groups.forEach((group, g) =>
      group.forEach((trajectory, i) =>
        trajectory.turns.forEach((turn, t) => {
          if (turn.actionTokens.length > 0) values[g]![i]![t] = predicted[k++]![turn.promptTokens.length]!;
        }),
      ),
    );
  }

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const gae = generalizedAdvantages(groups, values, ctx.config.discount, ctx.config.gaeLambda);
  const advantages = whiten(gae.advantages, groups);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const batch = toTrainingBatch(groups, advantages, gae.returns);
  const update = await policyUpdate(ctx.policy.primitives, batch, { ...ctx.config, loss: "ppo" }, ctx.sampling.temperature, ctx.updateMade);
  const meanValue = values.flat(2).reduce((a, b) => a + b, 0) / Math.max(values.flat(2).length, 1);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update, "train/value_mean": meanValue } };
};
