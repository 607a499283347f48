/**
 * Drawing the next token in the browser, by the rules of the server's sampler (server/runtime/sampler.ts):
 * temperature 0 takes the first most likely token; otherwise the softmax at the temperature, cut to the top K
 * tokens and then to the shortest most-likely-first prefix whose mass reaches top-p, is sampled.
 */
import type { Rng } from "@/lib/model/rng";
import type { SamplingSettings, TokenChoice } from "./protocol";

/** softmax(logits / temperature) of one row of logits, written to `out`. */
export function softmax(logits: Float32Array, temperature: number, out: Float64Array): Float64Array {
  const inv = 1 / temperature;
  let max = -Infinity;
  for (let j = 0; j < logits.length; j++) max = Math.max(max, logits[j]! * inv);
  let sum = 0;
  for (let j = 0; j < logits.length; j++) {
    out[j] = Math.exp(logits[j]! * inv - max);
    sum += out[j]!;
  }
  for (let j = 0; j < logits.length; j++) out[j]! /= sum;
  return out;
}

/** The next token: `probs` is softmax(logits / temperature) of the same row (unused when greedy). */
export function drawToken(logits: Float32Array, probs: Float64Array, settings: SamplingSettings, rng: Rng): number {
  const V = logits.length;
  if (settings.temperature === 0) {
    let best = 0;
    for (let j = 1; j < V; j++) if (logits[j]! > logits[best]!) best = j;
    return best;
  }
  if (settings.topK === 0 && settings.topP >= 1) {
    let u = rng.uniform();
    for (let j = 0; j < V; j++) {
      u -= probs[j]!;
      if (u < 0) return j;
    }
    return V - 1;
  }
  const order = Array.from({ length: V }, (_, j) => j).sort((a, b) => probs[b]! - probs[a]! || a - b);
  const k = settings.topK > 0 ? Math.min(settings.topK, V) : V;
  let mass = 0;
  for (let i = 0; i < k; i++) mass += probs[order[i]!]!;
  let kept = 0;
  let keptMass = 0;
  for (; kept < k; kept++) {
    keptMass += probs[order[kept]!]!;
    if (keptMass >= settings.topP * mass) {
      kept++;
      break;
    }
  }
  let u = rng.uniform() * keptMass;
  for (let i = 0; i < kept; i++) {
    u -= probs[order[i]!]!;
    if (u < 0) return order[i]!;
  }
  return order[kept - 1]!;
}

/** The `count` most likely tokens of a distribution, most likely first. */
export function topChoices(probs: Float64Array, count: number): TokenChoice[] {
  const top: TokenChoice[] = [];
  for (let j = 0; j < probs.length; j++) {
    const probability = probs[j]!;
    if (top.length === count && probability <= top[count - 1]!.probability) continue;
    let at = top.length;
    while (at > 0 && top[at - 1]!.probability < probability) at--;
    top.splice(at, 0, { token: j, probability });
    if (top.length > count) top.pop();
  }
  return top;
}
