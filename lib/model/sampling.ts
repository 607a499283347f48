/**
 * The rule that draws the next token from a row of logits, shared by the server's sampler
 * (server/runtime/sampler.ts) and the browser's playground (components/playground), so that the same logits,
 * settings and seed draw the same token on both:
 * temperature 0 takes the first most likely token; otherwise softmax(logits / temperature) is sampled, cut first
 * to the K most likely tokens (topK > 0) and then to the shortest most-likely-first prefix whose mass reaches topP.
 */
import type { Rng } from "./rng";

export interface DrawSettings {
  /** softmax temperature; 0 picks the most likely token */
  temperature: number;
  /** keep the K most likely tokens (0 = all) */
  topK: number;
  /** keep the shortest most-likely-first prefix whose probability reaches topP (1 = all) */
  topP: number;
}

/**
 * Draws one token id from the row of `V` logits at `offset`. `probs` (at least V long) is scratch: it is left holding
 * the row's unnormalized weights exp(logit / temperature - max) (untouched when greedy).
 */
export function drawToken(logits: Float32Array, offset: number, V: number, p: DrawSettings, rng: Rng, probs: Float64Array): number {
  if (p.temperature === 0) {
    let best = 0;
    for (let j = 1; j < V; j++) if (logits[offset + j] > logits[offset + best]) best = j;
    return best;
  }
  const inv = 1 / p.temperature;
  let max = -Infinity;
  for (let j = 0; j < V; j++) max = Math.max(max, logits[offset + j] * inv);
  let sum = 0;
  for (let j = 0; j < V; j++) {
    probs[j] = Math.exp(logits[offset + j] * inv - max);
    sum += probs[j];
  }
  if (p.topK === 0 && p.topP >= 1) {
    let u = rng.uniform() * sum;
    for (let j = 0; j < V; j++) {
      u -= probs[j];
      if (u < 0) return j;
    }
    return V - 1;
  }
  // Truncation: the most likely tokens first, the top K of them, then the shortest prefix reaching topP.
  const order = Array.from({ length: V }, (_, j) => j).sort((a, b) => probs[b] - probs[a] || a - b);
  const k = p.topK > 0 ? Math.min(p.topK, V) : V;
  let kept = 0,
    mass = 0,
    keptMass = 0;
  for (let i = 0; i < k; i++) mass += probs[order[i]];
  for (; kept < k; kept++) {
    keptMass += probs[order[kept]];
    if (keptMass >= p.topP * mass) {
      kept++;
      break;
    }
  }
  let u = rng.uniform() * keptMass;
  for (let i = 0; i < kept; i++) {
    u -= probs[order[i]];
    if (u < 0) return order[i];
  }
  return order[kept - 1];
}
