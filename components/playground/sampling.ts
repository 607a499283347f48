/**
 * What the playground shows of each drawn token: its probability and the most likely alternatives. The draw
 * itself is lib/model/sampling.ts's, the server sampler's rule.
 */
import type { TokenChoice } from "./protocol";

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
