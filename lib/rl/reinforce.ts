/**
 * REINFORCE with a baseline: discounted returns minus an exponential moving average of past mean returns. With
 * several agents each keeps its own baseline, of its own returns (role-conditioned, lib/rl/advantages.ts).
 */
import { baselineSubtracted, creditOf } from "./advantages";
import { type RlAlgorithm, stepRollouts } from "./algorithm";
import { updatePolicies } from "./update";

/** How fast the baseline follows the mean return: b ← (1 − rate)·b + rate·mean. */
const BASELINE_RATE = 0.1;

export const reinforce: RlAlgorithm = async (ctx) => {
  const { groups, metrics: episodeMetrics } = await stepRollouts(ctx, { groupRelative: false });
  const episodes = groups.flat();
  const credit = creditOf(episodes);
  const several = credit.roles.length > 1;
  // The memory keys: "baseline" for a single agent, "baseline/NAME" for each of several.
  const key = (role: string) => (several ? `baseline/${role}` : "baseline");
  const baselines: Record<string, number> = {};
  for (const role of credit.roles) {
    const meanReturn = episodes.reduce((a, t) => a + credit.episodeReturn(t, role), 0) / Math.max(episodes.length, 1);
    // The first step has no history: start the baseline at this batch's mean rather than at zero.
    baselines[role] = ctx.memory[key(role)] ?? meanReturn;
    ctx.memory[key(role)] = (1 - BASELINE_RATE) * baselines[role] + BASELINE_RATE * meanReturn;
  }

  // ── the estimator: what a user may change ─────────────────────────────────────────────────────────────────
  const advantages = baselineSubtracted(groups, ctx.config.discount, several ? baselines : baselines[credit.roles[0]!]!);
  // ──────────────────────────────────────────────────────────────────────────────────────────────────────────

  const update = await updatePolicies(ctx, groups, advantages);
  const baselineMetrics = Object.fromEntries(credit.roles.map((role) => [several ? `train/baseline/${role}` : "train/baseline", baselines[role]!]));
  return { groups, advantages, metrics: { ...episodeMetrics, ...update, ...baselineMetrics } };
};
