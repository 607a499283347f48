import type { GPTConfig, LoraConfig, LoraTarget } from "./config";
import type { Rng } from "./rng";
import type { NamedParameter, GPTWeights } from "./weights";
import { cloneGPTWeights } from "./weights";
import { matmulAccumulate } from "./kernels";

/** One low-rank update on a linear layer: y += (alpha / rank) * (x @ A) @ B. */
export interface LoraPair {
  A: Float32Array; // [nIn, rank]
  B: Float32Array; // [rank, nOut]
}

export interface LoraAdapter {
  config: LoraConfig;
  scale: number; // alpha / rank
  blocks: Array<Partial<Record<LoraTarget, LoraPair>>>;
}

/**
 * A fresh adapter: A random (Kaiming-uniform like PEFT) and B zero, so before any training the adapted model
 * computes exactly what the base model computes.
 */
export function initLoraAdapter(base: GPTWeights, config: LoraConfig, rng: Rng): LoraAdapter {
  const r = config.rank;
  return {
    config,
    scale: config.alpha / r,
    blocks: base.blocks.map((block) => {
      const pairs: Partial<Record<LoraTarget, LoraPair>> = {};
      for (const target of config.targets) {
        const { nIn, nOut } = block[target];
        const bound = 1 / Math.sqrt(nIn);
        const A = new Float32Array(nIn * r);
        for (let i = 0; i < A.length; i++) A[i] = (2 * rng.uniform() - 1) * bound;
        pairs[target] = { A, B: new Float32Array(r * nOut) };
      }
      return pairs;
    }),
  };
}

export function listLoraParameters(adapter: LoraAdapter, base: GPTWeights): NamedParameter[] {
  const r = adapter.config.rank;
  const out: NamedParameter[] = [];
  adapter.blocks.forEach((pairs, l) => {
    for (const target of adapter.config.targets) {
      const pair = pairs[target]!;
      const { nIn, nOut } = base.blocks[l][target];
      out.push({ name: `lora.blocks.${l}.${target}.A`, shape: [nIn, r], data: pair.A, decay: true });
      out.push({ name: `lora.blocks.${l}.${target}.B`, shape: [r, nOut], data: pair.B, decay: true });
    }
  });
  return out;
}

export function cloneLoraAdapter(adapter: LoraAdapter, fill?: number): LoraAdapter {
  const copy = (a: Float32Array) => (fill === undefined ? a.slice() : new Float32Array(a.length).fill(fill));
  return {
    config: adapter.config,
    scale: adapter.scale,
    blocks: adapter.blocks.map((pairs) => {
      const out: Partial<Record<LoraTarget, LoraPair>> = {};
      for (const [target, pair] of Object.entries(pairs) as [LoraTarget, LoraPair][]) {
        out[target] = { A: copy(pair.A), B: copy(pair.B) };
      }
      return out;
    }),
  };
}

/** A new set of weights with every update folded in (W + scale * A @ B); the base is left untouched. */
export function mergeLoraAdapter(base: GPTWeights, adapter: LoraAdapter, config: GPTConfig): GPTWeights {
  if (adapter.blocks.length !== config.nLayers) {
    throw new Error(`adapter has ${adapter.blocks.length} blocks, model has nLayers=${config.nLayers}`);
  }
  const merged = cloneGPTWeights(base);
  merged.blocks.forEach((block, l) => {
    for (const [target, pair] of Object.entries(adapter.blocks[l]) as [LoraTarget, LoraPair][]) {
      const { nIn, nOut, weight } = block[target];
      matmulAccumulate(weight, pair.A, pair.B, nIn, adapter.config.rank, nOut, adapter.scale);
    }
  });
  return merged;
}
