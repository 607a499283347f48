/**
 * GRPO: sample a group of episodes per prompt, score each against its group (no value network), and take a
 * clipped policy-gradient step on the primitives.
 */
import { groupNormalized, perTurnGroupNormalized } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import { updatePolicies } from "./update";

export const grpo: RlAlgorithm = async (ctx) => {
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: true });

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const advantages = groupNormalized(groups, ctx.config.normalizeAdvantages);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const update = await updatePolicies(ctx, groups, advantages);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update } };
};

/** Per-turn GRPO: as GRPO, but each turn is credited with its own discounted return (multi-turn credit). */
export const grpoPerTurn: RlAlgorithm = async (ctx) => {
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: true });

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const advantages = perTurnGroupNormalized(groups, ctx.config.discount, ctx.config.normalizeAdvantages);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const update = await updatePolicies(ctx, groups, advantages);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update } };
};
