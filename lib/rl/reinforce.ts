/** REINFORCE with a baseline: discounted returns minus an exponential moving average of past mean returns. */
import { baselineSubtracted } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import { toTrainingBatch } from "./rollouts";
import { policyUpdate } from "./update";

/** How fast the baseline follows the mean return: b ← (1 − rate)·b + rate·mean. */
const BASELINE_RATE = 0.1;

export const reinforce: RlAlgorithm = async (ctx) => {
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: false });
  const meanReturn = groups.flat().reduce((a, t) => a + t.totalReward, 0) / Math.max(groups.flat().length, 1);
  // The first step has no history: start the baseline at this batch's mean rather than at zero.
  const baseline = ctx.memory.baseline ?? meanReturn;

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const advantages = baselineSubtracted(groups, ctx.config.discount, baseline);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  ctx.memory.baseline = (1 - BASELINE_RATE) * baseline + BASELINE_RATE * meanReturn;
  const update = await policyUpdate(ctx.policy.primitives, toTrainingBatch(groups, advantages), ctx.config, ctx.sampling.temperature, ctx.updateMade);
  return { groups, advantages, metrics: { ...episodeMetrics, ...update, "train/baseline": baseline } };
};
