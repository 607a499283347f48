/** RLOO: REINFORCE where each sample's baseline is the mean return of the other samples of its prompt. */
import { leaveOneOut } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import { toTrainingBatch } from "./rollouts";
import { policyUpdate } from "./update";

export const rloo: RlAlgorithm = async (ctx) => {
  if (ctx.config.groupSize < 2) throw new Error(`rloo needs algorithm.groupSize ≥ 2 to have other samples; got ${ctx.config.groupSize}`);
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: true });

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const advantages = leaveOneOut(groups);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const update = await policyUpdate(ctx.policy.primitives, toTrainingBatch(groups, advantages), ctx.config, ctx.sampling.temperature, ctx.updateMade);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update } };
};
