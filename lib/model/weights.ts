import { type GPTConfig, modelShape } from "./config";
import type { Rng } from "./rng";
import type { TensorMap } from "./safetensors";

/** A linear layer y = x @ weight + bias, with weight stored [nIn, nOut] so the forward pass is a plain matmul. */
export interface Linear {
  nIn: number;
  nOut: number;
  weight: Float32Array; // [nIn, nOut]
  bias: Float32Array; // [nOut]
}

/** A LayerNorm, or an RMSNorm (llama), whose bias stays zero and is not a parameter. */
export interface LayerNormWeights {
  gain: Float32Array; // [C]
  bias: Float32Array; // [C]
}

/**
 * A bias that the architecture does not have (llama's, unless its config says) is an array of zeros that is not
 * listed as a parameter: never trained, saved or loaded, so the model computes exactly what it was trained as.
 */
export interface BlockWeights {
  ln1: LayerNormWeights;
  attn_qkv: Linear; // [C, C + 2 * kvDim]: queries, keys, values side by side (gpt: kvDim = C)
  attn_proj: Linear; // [C, C]
  ln2: LayerNormWeights;
  mlp_fc: Linear; // gpt: [C, dFF]; llama: [C, 2 * dFF], the gate then the up projection
  mlp_proj: Linear; // [dFF, C]
}

export interface GPTWeights {
  tokenEmbedding: Float32Array; // [V, C]
  positionEmbedding: Float32Array; // [T, C]; empty with rotary positions
  blocks: BlockWeights[];
  lnFinal: LayerNormWeights;
  lmHead: Float32Array; // [C, V], no bias; empty when tied to the token embedding
}

/**
 * GPT-2's initialisation: N(0, 0.02), with the residual projections scaled down by sqrt(2 * nLayers); with no
 * generator, zero matrices (and unit norm gains), to be filled by a checkpoint.
 */
export function initGPTWeights(config: GPTConfig, rng: Rng | null): GPTWeights {
  // Without a generator the matrices stay zero: for weights about to be loaded, drawing 100M normals costs seconds.
  return buildGPTWeights(config, (_name, _shape, init) => init(rng));
}

/**
 * The weights a checkpoint's tensors hold, as those very arrays, not copies (a loaded base's peak memory is then
 * its file's size): each tensor named and shaped as `listGPTParameters` lists it. The caller hands the arrays over.
 */
export function gptWeightsFromTensors(config: GPTConfig, tensors: TensorMap, source: string): GPTWeights {
  return buildGPTWeights(config, (name, shape) => {
    const t = tensors.get(name);
    if (!t) throw new Error(`${source} has no tensor '${name}'`);
    if (t.shape.join(",") !== shape.join(",")) throw new Error(`${source} has '${name}' with shape [${t.shape}], model expects [${shape}]`);
    return t.data;
  });
}

/**
 * The model's arrays, each parameter made by `parameter` from its checkpoint name (as `listGPTParameters` names
 * it), its shape, and its initialisation; what the architecture lacks (a bias, a gain's bias) is zero and no
 * parameter.
 */
function buildGPTWeights(config: GPTConfig, parameter: (name: string, shape: number[], init: (rng: Rng | null) => Float32Array) => Float32Array): GPTWeights {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L } = config;
  const s = modelShape(config);
  const normal = (n: number, std: number) => (rng: Rng | null) => {
    const a = new Float32Array(n);
    if (rng) for (let i = 0; i < n; i++) a[i] = rng.normal() * std;
    return a;
  };
  const zeros = (n: number) => () => new Float32Array(n);
  const residualStd = 0.02 / Math.sqrt(2 * L);
  const linear = (name: string, nIn: number, nOut: number, std: number, bias: boolean): Linear => ({
    nIn,
    nOut,
    weight: parameter(`${name}.weight`, [nIn, nOut], normal(nIn * nOut, std)),
    bias: bias ? parameter(`${name}.bias`, [nOut], zeros(nOut)) : new Float32Array(nOut),
  });
  const layerNorm = (name: string): LayerNormWeights => ({
    gain: parameter(`${name}.gain`, [C], () => new Float32Array(C).fill(1)),
    bias: s.normBias ? parameter(`${name}.bias`, [C], zeros(C)) : new Float32Array(C),
  });
  return {
    tokenEmbedding: parameter("wte", [V, C], normal(V * C, 0.02)),
    positionEmbedding: s.learnedPositions ? parameter("wpe", [T, C], normal(T * C, 0.02)) : new Float32Array(0),
    blocks: Array.from({ length: L }, (_, l) => {
      const p = `blocks.${l}.`;
      return {
        ln1: layerNorm(`${p}ln1`),
        attn_qkv: linear(`${p}attn_qkv`, C, C + 2 * s.kvDim, 0.02, s.qkvBias),
        attn_proj: linear(`${p}attn_proj`, C, C, residualStd, s.attnOutBias),
        ln2: layerNorm(`${p}ln2`),
        mlp_fc: linear(`${p}mlp_fc`, C, s.llama ? 2 * s.dFF : s.dFF, 0.02, s.mlpBias),
        mlp_proj: linear(`${p}mlp_proj`, s.dFF, C, residualStd, s.mlpBias),
      };
    }),
    lnFinal: layerNorm("ln_f"),
    lmHead: s.tied ? new Float32Array(0) : parameter("lm_head", [C, V], normal(C * V, 0.02)),
  };
}

export interface NamedParameter {
  name: string;
  shape: number[];
  data: Float32Array;
  /** weight decay applies to matrices and embeddings, not to biases and LayerNorm gains */
  decay: boolean;
}

/** Every tensor of the model with its checkpoint name, in a fixed order. */
export function listGPTParameters(w: GPTWeights, config: GPTConfig): NamedParameter[] {
  const { vocabSize: V, contextLength: T, dModel: C } = config;
  const s = modelShape(config);
  const out: NamedParameter[] = [{ name: "wte", shape: [V, C], data: w.tokenEmbedding, decay: true }];
  if (s.learnedPositions) out.push({ name: "wpe", shape: [T, C], data: w.positionEmbedding, decay: true });
  const norm = (name: string, n: LayerNormWeights) => {
    out.push({ name: `${name}.gain`, shape: [C], data: n.gain, decay: false });
    if (s.normBias) out.push({ name: `${name}.bias`, shape: [C], data: n.bias, decay: false });
  };
  const linear = (name: string, l: Linear, bias: boolean) => {
    out.push({ name: `${name}.weight`, shape: [l.nIn, l.nOut], data: l.weight, decay: true });
    if (bias) out.push({ name: `${name}.bias`, shape: [l.nOut], data: l.bias, decay: false });
  };
  w.blocks.forEach((b, l) => {
    const p = `blocks.${l}.`;
    norm(`${p}ln1`, b.ln1);
    linear(`${p}attn_qkv`, b.attn_qkv, s.qkvBias);
    linear(`${p}attn_proj`, b.attn_proj, s.attnOutBias);
    norm(`${p}ln2`, b.ln2);
    linear(`${p}mlp_fc`, b.mlp_fc, s.mlpBias);
    linear(`${p}mlp_proj`, b.mlp_proj, s.mlpBias);
  });
  norm("ln_f", w.lnFinal);
  if (!s.tied) out.push({ name: "lm_head", shape: [C, V], data: w.lmHead, decay: true });
  return out;
}

/** A structure of the same shape whose every array is a fresh copy (`fill` given: filled with that value). */
export function cloneGPTWeights(w: GPTWeights, fill?: number): GPTWeights {
  const copy = (a: Float32Array) => (fill === undefined ? a.slice() : new Float32Array(a.length).fill(fill));
  const linear = (l: Linear): Linear => ({ nIn: l.nIn, nOut: l.nOut, weight: copy(l.weight), bias: copy(l.bias) });
  const ln = (n: LayerNormWeights): LayerNormWeights => ({ gain: copy(n.gain), bias: copy(n.bias) });
  return {
    tokenEmbedding: copy(w.tokenEmbedding),
    positionEmbedding: copy(w.positionEmbedding),
    blocks: w.blocks.map((b) => ({
      ln1: ln(b.ln1),
      attn_qkv: linear(b.attn_qkv),
      attn_proj: linear(b.attn_proj),
      ln2: ln(b.ln2),
      mlp_fc: linear(b.mlp_fc),
      mlp_proj: linear(b.mlp_proj),
    })),
    lnFinal: ln(w.lnFinal),
    lmHead: copy(w.lmHead),
  };
}

/** A value head for PPO: a linear map from the final hidden state to one number per token. */
export interface ValueHeadWeights {
  weight: Float32Array; // [C]
  bias: Float32Array; // [1]
}

export function initValueHead(config: GPTConfig): ValueHeadWeights {
  // Zero init: the first value estimates are 0 and the head learns from the returns alone.
  return { weight: new Float32Array(config.dModel), bias: new Float32Array(1) };
}

export function listValueHeadParameters(v: ValueHeadWeights): NamedParameter[] {
  return [
    { name: "value_head.weight", shape: [v.weight.length], data: v.weight, decay: true },
    { name: "value_head.bias", shape: [1], data: v.bias, decay: false },
  ];
}

/**
 * Copies tensors from a checkpoint into parameters of the same names, failing with the first name that is
 * missing or whose shape differs, so a wrong file never loads half-way silently.
 */
export function assignParameters(params: NamedParameter[], tensors: TensorMap, source: string): void {
  for (const p of params) {
    const t = tensors.get(p.name);
    if (!t) throw new Error(`${source} has no tensor '${p.name}'`);
    if (t.shape.join(",") !== p.shape.join(",")) {
      throw new Error(`${source} has '${p.name}' with shape [${t.shape}], model expects [${p.shape}]`);
    }
  }
  for (const p of params) p.data.set(tensors.get(p.name)!.data);
}

export function parametersToTensorMap(params: NamedParameter[], prefix = ""): TensorMap {
  return new Map(params.map((p) => [prefix + p.name, { shape: p.shape, data: p.data }]));
}
