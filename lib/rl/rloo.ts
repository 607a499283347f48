/** RLOO: REINFORCE where each sample's baseline is the mean return of the other samples of its prompt. */
import { leaveOneOut } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import { updatePolicies } from "./update";

export const rloo: RlAlgorithm = async (ctx) => {
  if (ctx.config.groupSize < 2) throw new Error(`rloo needs algorithm.groupSize ≥ 2 to have other samples; got ${ctx.config.groupSize}`);
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: true });

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const advantages = leaveOneOut(groups);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const update = await updatePolicies(ctx, groups, advantages);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update } };
};
