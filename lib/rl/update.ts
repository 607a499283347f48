/** The optimizer update every policy-gradient algorithm ends with: forward-backward over chunks, then one step. */
import type { AlgorithmConfig } from "@/lib/sdk/experiment";
import type { TrainingBatch, TrainingPrimitives } from "./primitives";
import { chunkBatch } from "./rollouts";

/** Sequences per forward-backward call; gradients accumulate across calls until the optimizer step. */
export const CHUNK_SEQUENCES = 64;

export async function policyUpdate(
  primitives: TrainingPrimitives,
  batch: TrainingBatch,
  config: AlgorithmConfig,
  temperature: number,
): Promise<Record<string, number>> {
  const sums: Record<string, number> = {};
  let weight = 0;
  let gradNorm = 0;
  if (batch.tokens.length === 0) return { "train/sequences": 0 };
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    for (const chunk of chunkBatch(batch, CHUNK_SEQUENCES)) {
      const { metrics } = await primitives.forwardBackward(chunk, config.loss, {
        // The sampler's logprobs are of softmax(logits / T); the loss must compare like with like.
        temperature: temperature > 0 ? temperature : 1,
        clipLow: config.clipRange,
        clipHigh: config.clipRange,
        klCoef: config.klCoef,
        entropyCoef: config.entropyCoef,
        valueCoef: config.valueCoef,
      });
      const tokens = metrics.tokens ?? 1;
      for (const [name, value] of Object.entries(metrics)) {
        if (name === "tokens" || !Number.isFinite(value)) continue;
        sums[name] = (sums[name] ?? 0) + value * tokens;
      }
      weight += tokens;
    }
    ({ gradNorm } = await primitives.optimStep({ lr: config.learningRate, weightDecay: config.weightDecay, gradClip: config.gradClip }));
  }
  const out: Record<string, number> = { "train/grad_norm": gradNorm, "train/sequences": batch.tokens.length, "train/tokens": weight / config.epochs };
  for (const [name, sum] of Object.entries(sums)) out[name === "clip_frac" ? "train/clip_frac" : name] = sum / weight;
  return out;
}
