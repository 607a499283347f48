/**
 * The per-token losses of `forwardBackward`, written against logprobs: each gives the loss of a token and its
 * derivative with respect to that token's logprob, and the chain rule through log-softmax turns that into the
 * gradient on the logits that the engine backpropagates.
 *
 *   cross_entropy        ℓ = -logp
 *   importance_sampling  ℓ = -r·A                          r = exp(logp - samplingLogp)
 *   ppo                  ℓ = -min(r·A, clip(r, 1-εlow, 1+εhigh)·A)
 *   cispo                ℓ = -sg(clip(r, 1-εlow, 1+εhigh))·A·logp     (sg: no gradient through the weight)
 *   KL penalty (any)     ℓ += β·(exp(δ) - δ - 1)            δ = refLogp - logp (the k3 estimator, ≥ 0)
 *   entropy bonus (any)  ℓ -= η·H(p)                        H over the whole next-token distribution
 *   value head           ℓ += c·½(v - R)²
 *
 * Every term is multiplied by the token's weight, summed, and divided by the summed weights ("tokens") or not
 * ("none").
 */
import { nativeOps } from "@/lib/model/native-ops";
import { z } from "zod";
import { type Batch, type PackedBatch, logprobOf } from "./batch";

export const lossNames = ["cross_entropy", "importance_sampling", "ppo", "cispo"] as const;
export type LossName = (typeof lossNames)[number];

export const lossConfigSchema = z.object({
  temperature: z.number().positive().default(1).describe("logprobs are of softmax(logits / temperature); use the temperature the samples were drawn at"),
  clipLow: z.number().min(0).optional().describe("ppo/cispo: the ratio is clipped below at 1 - clipLow (default 0.2 for ppo, no lower clip for cispo)"),
  clipHigh: z.number().min(0).optional().describe("ppo/cispo: the ratio is clipped above at 1 + clipHigh (default 0.2)"),
  klCoef: z.number().min(0).default(0).describe("weight of the KL penalty against the reference policy (0 = off)"),
  valueCoef: z.number().min(0).default(0.5).describe("weight of the value head's MSE loss, used when the batch has returns"),
  entropyCoef: z
    .number()
    .min(0)
    .default(0)
    .describe("weight η of an entropy bonus at the weighted tokens: the loss subtracts η·H, keeping the policy exploring (0 = off)"),
  normalize: z.enum(["tokens", "none"]).default("tokens").describe("tokens: divide the summed loss by the summed weights; none: keep the sum"),
});
export type LossConfig = z.infer<typeof lossConfigSchema>;
export type LossConfigInput = z.input<typeof lossConfigSchema>;

export function parseLossConfig(loss: string, input: LossConfigInput | undefined): LossConfig {
  if (!(lossNames as readonly string[]).includes(loss)) {
    throw new Error(`unknown loss '${loss}'; expected one of ${lossNames.join(", ")}`);
  }
  const parsed = lossConfigSchema.safeParse(input ?? {});
  if (!parsed.success) throw new Error(`invalid loss config: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

export function requireLossInputs(loss: LossName, batch: Batch, config: LossConfig): void {
  if (loss === "cross_entropy") return;
  for (const key of ["samplingLogprobs", "advantages"] as const) {
    if (!batch[key]) throw new Error(`loss '${loss}' needs batch.${key}, aligned with batch.tokens`);
  }
  if (config.klCoef < 0) throw new Error(`klCoef must be ≥ 0, got ${config.klCoef}`);
}

export interface LossOutput {
  dLogits: Float32Array; // [B*T, V]
  dValues: Float32Array | null; // [B*T]
  loss: number;
  metrics: Record<string, number>;
}

/** The summed weight of the tokens a batch's loss counts (every token after the first of each sequence; weight 1 by default). */
export function lossWeight(batch: Batch): number {
  let sum = 0;
  batch.tokens.forEach((sequence, b) => {
    for (let i = 1; i < sequence.length; i++) sum += batch.weights?.[b][i] ?? 1;
  });
  return sum;
}

/** A loss computed over a pass's rows in any number of consecutive ranges (the engine's chunks of the logits). */
export interface LossAccumulator {
  /**
   * The rows [rowStart, rowStart + rowCount) of the pass, whose logits are `logits` ([rowCount, V]): their
   * contribution to the loss and metrics, and the gradient on those logits ([rowCount, V], valid until the next
   * call) and on the values (all rows [B*T], filled as their rows come).
   */
  rows(logits: Float32Array, values: Float32Array | null, rowStart: number, rowCount: number): { dLogits: Float32Array; dValues: Float32Array | null };
  /** The loss and metrics once every row has been given. */
  finish(): { loss: number; metrics: Record<string, number> };
}

/**
 * Loss, metrics and the gradients on logits and values for a packed batch; logits row b*T+i-1 predicts token i
 * of sequence b, and the value at that row estimates the return from the state that produced token i.
 */
export function computeLoss(
  loss: LossName,
  config: LossConfig,
  batch: Batch,
  packed: PackedBatch,
  logits: Float32Array,
  values: Float32Array | null,
  V: number,
  referenceLogprobs: number[][] | null,
  /** What the summed loss is divided by, when the batch is a part of a larger one (its weight, or 1); default: this batch's own. */
  denominator?: number,
): LossOutput {
  const accumulator = lossAccumulator(loss, config, batch, packed, V, referenceLogprobs, denominator);
  const N = packed.B * packed.T;
  const { dLogits, dValues } = accumulator.rows(logits, values, 0, N);
  return { dLogits, dValues, ...accumulator.finish() };
}

/** computeLoss over rows given a range at a time. */
export function lossAccumulator(
  loss: LossName,
  config: LossConfig,
  batch: Batch,
  packed: PackedBatch,
  V: number,
  referenceLogprobs: number[][] | null,
  denominator?: number,
): LossAccumulator {
  const { B, T, tokens, lengths } = packed;
  const tau = config.temperature;
  const clipLow = config.clipLow ?? (loss === "cispo" ? 1 : 0.2);
  const clipHigh = config.clipHigh ?? 0.2;
  let dLogits = new Float32Array(0);
  let dValues: Float32Array | null = null;

  const weightSum = lossWeight(batch);
  const denom = denominator ?? (config.normalize === "tokens" ? Math.max(weightSum, 1e-12) : 1);

  let policyLoss = 0,
    klSum = 0,
    valueLoss = 0,
    entropySum = 0;
  let ratioSum = 0,
    ratioMin = Infinity,
    ratioMax = -Infinity,
    clipped = 0;
  const native = nativeOps();
  const probs = new Float64Array(native ? 0 : V);

  /** A token's loss terms into the sums; returns dℓ/dlogp (the policy's and the KL penalty's). */
  function tokenGradient(b: number, i: number, w: number, logp: number): number {
    let l: number, g: number; // the token's loss and dℓ/dlogp
    if (loss === "cross_entropy") {
      l = -logp;
      g = -1;
    } else {
      const A = batch.advantages![b][i];
      const r = Math.exp(logp - batch.samplingLogprobs![b][i]);
      ratioSum += w * r;
      if (r < ratioMin) ratioMin = r;
      if (r > ratioMax) ratioMax = r;
      const rClipped = Math.min(Math.max(r, 1 - clipLow), 1 + clipHigh);
      if (loss === "importance_sampling") {
        l = -r * A;
        g = -r * A;
      } else if (loss === "ppo") {
        const unclipped = r * A,
          clippedObjective = rClipped * A;
        if (unclipped <= clippedObjective) {
          l = -unclipped;
          g = -r * A;
        } else {
          l = -clippedObjective;
          g = 0;
          clipped += w;
        }
      } else {
        l = -rClipped * A * logp;
        g = -rClipped * A;
        if (rClipped !== r) clipped += w;
      }
    }
    policyLoss += w * l;
    if (config.klCoef > 0) {
      const delta = referenceLogprobs![b][i] - logp;
      const e = Math.exp(delta);
      klSum += w * (e - delta - 1);
      g += config.klCoef * (1 - e);
    }
    return g;
  }

  /** The value head's loss at row n (token i of sequence b) into the sum, its gradient into dValues. */
  function valueTerm(values: Float32Array | null, n: number, b: number, i: number, w: number): void {
    if (!dValues || !values) return;
    const diff = values[n] - batch.returns![b][i];
    valueLoss += w * 0.5 * diff * diff;
    dValues[n] = (config.valueCoef * w * diff) / denom;
  }

  /** The rows the loss counts: n predicts token i of sequence b, with weight w (others have no gradient). */
  function* counted(rowStart: number, rowCount: number) {
    for (let n = rowStart; n < rowStart + rowCount; n++) {
      const b = Math.floor(n / T),
        i = (n % T) + 1;
      if (i >= lengths[b]) continue;
      const w = batch.weights?.[b][i] ?? 1;
      if (w !== 0) yield { n, b, i, w };
    }
  }

  function rows(logits: Float32Array, values: Float32Array | null, rowStart: number, rowCount: number) {
    // one gradient array for every range of this size, rewritten each time
    if (dLogits.length !== rowCount * V) dLogits = new Float32Array(rowCount * V);
    else dLogits.fill(0);
    if (values && batch.returns && !dValues) dValues = new Float32Array(B * T);
    if (native) {
      // every counted row's softmax at once, then the token terms, then every row's gradient at once (shared by
      // the native kernel's threads)
      const list = [...counted(rowStart, rowCount)];
      const at = Int32Array.from(list, (t) => t.n - rowStart);
      const targets = Int32Array.from(list, (t) => tokens[t.b * T + t.i]);
      const stats = new Float64Array(2 * list.length);
      native.softmaxStatsRows(logits, V, 1 / tau, at, stats);
      const scales = new Float32Array(list.length),
        ents = new Float32Array(list.length);
      list.forEach(({ n, b, i, w }, k) => {
        const logSumExp = stats[2 * k],
          entropy = stats[2 * k + 1];
        entropySum += w * entropy;
        const logp = logits[at[k] * V + targets[k]] * (1 / tau) - logSumExp;
        scales[k] = (w * tokenGradient(b, i, w, logp)) / denom / tau;
        ents[k] = config.entropyCoef > 0 ? (w * config.entropyCoef) / denom / tau : 0;
        valueTerm(values, n, b, i, w);
      });
      native.lossGradientRows(dLogits, logits, V, 1 / tau, at, targets, scales, ents, stats);
      return { dLogits, dValues };
    }
    for (const { n, b, i, w } of counted(rowStart, rowCount)) {
      const row = (n - rowStart) * V;
      const target = tokens[b * T + i];
      const { logprob: logp, logSumExp } = logprobOf(logits, row, V, tau, target, probs);
      let entropy = 0;
      for (let j = 0; j < V; j++) if (probs[j] > 0) entropy -= probs[j] * (logits[row + j] / tau - logSumExp);
      entropySum += w * entropy;
      const scale = (w * tokenGradient(b, i, w, logp)) / denom / tau;
      for (let j = 0; j < V; j++) dLogits[row + j] = -scale * probs[j];
      dLogits[row + target] += scale;
      if (config.entropyCoef > 0) {
        // d(−ηH)/dz_j = η·p_j·(log p_j + H)/τ: pushes the likely tokens down and the unlikely ones up.
        const e = (w * config.entropyCoef) / denom / tau;
        for (let j = 0; j < V; j++) if (probs[j] > 0) dLogits[row + j] += e * probs[j] * (logits[row + j] / tau - logSumExp + entropy);
      }
      valueTerm(values, n, b, i, w);
    }
    return { dLogits, dValues };
  }

  function finish() {
    const total = (policyLoss + config.klCoef * klSum + config.valueCoef * valueLoss - config.entropyCoef * entropySum) / denom;
    const metrics: Record<string, number> = {
      loss: total,
      "loss/policy": policyLoss / denom,
      entropy: entropySum / Math.max(weightSum, 1e-12),
      tokens: weightSum,
    };
    if (config.klCoef > 0) {
      metrics.kl = klSum / Math.max(weightSum, 1e-12);
      metrics["loss/kl"] = (config.klCoef * klSum) / denom;
    }
    if (dValues) metrics["loss/value"] = (config.valueCoef * valueLoss) / denom;
    if (config.entropyCoef > 0) metrics["loss/entropy"] = (-config.entropyCoef * entropySum) / denom;
    if (loss !== "cross_entropy") {
      metrics["ratio/mean"] = ratioSum / Math.max(weightSum, 1e-12);
      metrics["ratio/min"] = ratioMin;
      metrics["ratio/max"] = ratioMax;
    }
    if (loss === "ppo" || loss === "cispo") metrics.clip_frac = clipped / Math.max(weightSum, 1e-12);
    return { loss: total, metrics };
  }

  return { rows, finish };
}
