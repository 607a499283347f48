/** The optimizer update every policy-gradient algorithm ends with: forward-backward over chunks, then one step. */
import type { AlgorithmConfig } from "@/lib/sdk/experiment";
import type { Trajectory } from "@/lib/sdk/protocol";
import type { TurnAdvantages } from "./advantages";
import type { StepContext } from "./algorithm";
import type { TrainingBatch, TrainingPrimitives } from "./primitives";
import { chunkBatch, toTrainingBatch } from "./rollouts";
import { seatingOf, seatOf, trainingPolicies } from "./seats";

/**
 * Sequences per forward-backward call; gradients accumulate across calls until the optimizer step. It keeps a
 * remote session's call within its request's size; the TrainingClient holds its own passes to its memory bound.
 */
export const CHUNK_SEQUENCES = 64;

/**
 * The update of one step: for each epoch, forward-backward over the batch's chunks, then an optimizer step. Every
 * epoch's calls are made before any is awaited (each epoch's passes run after the step before them: the primitives
 * run calls in the order made), then `made` is called, then they are awaited (see `madeTogether`).
 */
export async function policyUpdate(
  primitives: TrainingPrimitives,
  batch: TrainingBatch,
  config: AlgorithmConfig,
  temperature: number,
  made?: () => void,
): Promise<Record<string, number>> {
  const sums: Record<string, number> = {};
  let weight = 0;
  let gradNorm = 0;
  if (batch.tokens.length === 0) {
    made?.();
    return { "train/sequences": 0 };
  }
  // No advantage anywhere (every group's rewards alike) and no value target: the policy gradient is zero, and an
  // update would be the regularizers' alone. A KL penalty's is kept (it pulls a policy that moved back towards its
  // reference; at the reference its estimate is noise, which after an imperfect demonstrator helped sampling find
  // the blind spot: string transformation 0.94, 0.74 without). An entropy bonus's alone is not taken: it pushed the
  // policy away from what it can do (string transformation from the base at entropy 0.01, no KL: the copy skill
  // drifted away before a right answer was sampled, 0.00 after 60 steps). Run health still sees the zero gradient.
  if (config.klCoef === 0 && !batch.returns && batch.advantages?.every((row) => row.every((a) => a === 0))) {
    made?.();
    return { "train/grad_norm": 0, "train/sequences": batch.tokens.length, "train/tokens": 0, "train/skipped": 1 };
  }
  const chunks = chunkBatch(batch, CHUNK_SEQUENCES);
  const epochs = Array.from({ length: config.epochs }, () => {
    const passes = chunks.map((chunk) =>
      primitives.forwardBackward(chunk, config.loss, {
        // The sampler's logprobs are of softmax(logits / T); the loss must compare like with like.
        temperature: temperature > 0 ? temperature : 1,
        clipLow: config.clipRange,
        clipHigh: config.clipRange,
        klCoef: config.klCoef,
        entropyCoef: config.entropyCoef,
        valueCoef: config.valueCoef,
      }),
    );
    return madeTogether(passes, primitives.optimStep({ lr: config.learningRate, weightDecay: config.weightDecay, gradClip: config.gradClip }));
  });
  made?.();
  // Every epoch settled before an error is thrown: the calls of those after a failure still run.
  const settled = await Promise.allSettled(epochs);
  const values = settled.map((epoch) => {
    if (epoch.status === "rejected") throw epoch.reason;
    return epoch.value;
  });
  for (const [results, step] of values) {
    for (const { metrics } of results) {
      const tokens = metrics.tokens ?? 1;
      for (const [name, value] of Object.entries(metrics)) {
        if (name === "tokens" || !Number.isFinite(value)) continue;
        sums[name] = (sums[name] ?? 0) + value * tokens;
      }
      weight += tokens;
    }
    gradNorm = step.gradNorm;
  }
  const out: Record<string, number> = { "train/grad_norm": gradNorm, "train/sequences": batch.tokens.length, "train/tokens": weight / config.epochs };
  for (const [name, sum] of Object.entries(sums)) out[name === "clip_frac" ? "train/clip_frac" : name] = sum / weight;
  return out;
}

/**
 * Awaits an update's forward-backward passes and the optimizer step that were made together, without awaiting
 * each pass before making the next. A remote session (lib/client) sends calls made together in one request and its
 * worker runs them back to back, where awaiting each would cost a round trip per call; the in-process
 * TrainingClient runs each call in the order made too, so the results are the same either way. As the calls are all made,
 * a pass that fails does not hold back the step (it applies the gradients of the others); the update then throws
 * that pass's error.
 */
export async function madeTogether<P, S>(passes: Promise<P>[], stepped: Promise<S>): Promise<[P[], S]> {
  const [results, step] = await Promise.allSettled([Promise.all(passes), stepped]);
  if (results.status === "rejected") throw results.reason;
  if (step.status === "rejected") throw step.reason;
  return [results.value, step.value];
}

/**
 * The step's update of every policy that learns from `groups`, the one call every algorithm ends with. Without
 * seats (one policy played every agent), `ctx.policy` on every turn, as `policyUpdate`. With seats (./seats.ts),
 * each policy that trains on the turns of the agents it sat at, one batch and one optimizer step per policy, all
 * made before any is awaited (then `ctx.updateMade`); a frozen seat's turns are never trained on. The metrics are
 * the policies' together (tokens and sequences summed, the largest gradient norm, other figures weighted by
 * tokens), and with several policies training, each one's as `train/agent/ID/...` too.
 */
export async function updatePolicies(
  ctx: Pick<StepContext, "policy" | "config" | "sampling" | "updateMade">,
  groups: Trajectory[][],
  advantages: TurnAdvantages,
  options: { returns?: TurnAdvantages; config?: AlgorithmConfig } = {},
): Promise<Record<string, number>> {
  const config = options.config ?? ctx.config;
  const temperature = ctx.sampling.temperature;
  const policies = trainingPolicies(groups);
  if (policies.length === 0 && groups.flat().some((trajectory) => seatingOf(trajectory))) {
    // Played under seats, none of which trains: nothing to update.
    ctx.updateMade?.();
    return { "train/sequences": 0 };
  }
  if (policies.length === 0)
    return policyUpdate(ctx.policy.primitives, toTrainingBatch(groups, advantages, options.returns), config, temperature, ctx.updateMade);
  const updates = policies.map((seat) =>
    policyUpdate(
      seat.policy.primitives,
      toTrainingBatch(groups, advantages, options.returns, (trajectory, turn) => seatOf(trajectory, turn.agent)?.id === seat.id),
      config,
      temperature,
    ),
  );
  ctx.updateMade?.();
  const results = await Promise.all(updates);
  if (results.length === 1) return results[0]!;
  const out: Record<string, number> = {};
  results.forEach((metrics, i) => {
    for (const [name, value] of Object.entries(metrics)) out[`train/agent/${policies[i]!.id}/${name.replace(/^train\//, "")}`] = value;
  });
  return { ...combinedUpdateMetrics(results), ...out };
}

/** Several policies' update metrics as one: counts summed, the largest gradient norm, the rest weighted by tokens. */
function combinedUpdateMetrics(results: Record<string, number>[]): Record<string, number> {
  const tokens = results.map((metrics) => metrics["train/tokens"] ?? 0);
  const totalTokens = tokens.reduce((a, b) => a + b, 0);
  const out: Record<string, number> = {};
  for (const name of new Set(results.flatMap((metrics) => Object.keys(metrics)))) {
    const values = results.map((metrics) => metrics[name]);
    if (name === "train/tokens" || name === "train/sequences") out[name] = values.reduce<number>((a, v) => a + (v ?? 0), 0);
    else if (name === "train/grad_norm") out[name] = Math.max(...values.map((v) => v ?? 0));
    else if (name === "train/skipped") {
      // Skipped only when every policy skipped.
      if (values.every((v) => v === 1)) out[name] = 1;
    } else if (totalTokens > 0) out[name] = values.reduce<number>((a, v, i) => a + (v ?? 0) * tokens[i]!, 0) / totalTokens;
  }
  return out;
}
