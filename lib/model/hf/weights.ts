/**
 * A Hugging Face checkpoint's tensors as the engine's GPTWeights.
 *
 * The engine stores every linear layer [nIn, nOut] so its forward pass is x @ W. transformers' nn.Linear (Llama,
 * Qwen2, Mistral) stores [out, in] and is transposed here; GPT-2's Conv1D already stores [in, out]. Llama's
 * separate q/k/v projections become one attn_qkv with columns [q | k | v], and gate/up become one mlp_fc with
 * columns [gate | up], the layouts that gpt.ts and llama-ops.ts compute with.
 */
import { type GPTConfig, modelShape } from "../config";
import { readSafetensorsFolder, type TensorMap } from "../safetensors";
import type { BlockWeights, GPTWeights, LayerNormWeights, Linear } from "../weights";
import { hfConfigToGPTConfig, hfModelType } from "./config";
import { nodeFs } from "../node-fs";

export interface HFModel {
  config: GPTConfig;
  weights: GPTWeights;
  /** config.json as read */
  hfConfig: Record<string, unknown>;
}

/**
 * Reads a model folder (config.json and model.safetensors, or shards listed by model.safetensors.index.json).
 * The config is checked before any weights are read, so an unsupported model fails fast.
 */
export function loadHFModel(dir: string, options: { contextLength?: number } = {}): HFModel {
  const fs = nodeFs("loading a Hugging Face model folder");
  const configPath = `${dir}/config.json`;
  if (!fs.existsSync(configPath)) {
    throw new Error(
      `${dir} has no config.json; a Hugging Face model folder holds config.json and model.safetensors (or its shards and model.safetensors.index.json)`,
    );
  }
  let hfConfig: Record<string, unknown>;
  try {
    hfConfig = JSON.parse(fs.readFileSync(configPath, "utf8"));
  } catch (error) {
    throw new Error(`${configPath} is not valid JSON: ${(error as Error).message}`);
  }
  try {
    hfConfigToGPTConfig(hfConfig, options);
    const tensors = readSafetensorsFolder(dir);
    const config = hfConfigToGPTConfig(hfConfig, { ...options, vocabSize: embeddingRows(tensors, hfConfig) });
    return { config, weights: hfTensorsToWeights(tensors, config, hfConfig, { owned: true }), hfConfig };
  } catch (error) {
    throw new Error(`cannot import ${dir}: ${(error as Error).message}`);
  }
}

/**
 * Builds the engine's weights from a checkpoint's tensors, after checking that every tensor the config implies is
 * there with its shape. Tensors the engine does not use are ignored when they lie outside the transformer (a value
 * head, a classifier) and refused when they lie inside it (a per-head query norm, an extra layer), since those mean
 * a block this engine does not compute.
 */
export function hfTensorsToWeights(tensors: TensorMap, config: GPTConfig, hf: unknown, options: { owned?: boolean } = {}): GPTWeights {
  const type = hfModelType(hf);
  const s = modelShape(config);
  if ((type !== "gpt2") !== s.llama) {
    throw new Error(
      `config.json model_type ${JSON.stringify(type)} does not match the model config's architecture ${JSON.stringify(config.architecture ?? "gpt")}`,
    );
  }
  const naming = type === "gpt2" ? gpt2Naming : llamaNaming;
  const prefix = naming.prefixes.find((p) => tensors.has(p + naming.embedding));
  if (prefix === undefined) {
    throw new Error(
      `checkpoint has no token embedding: expected ${naming.prefixes.map((p) => `'${p}${naming.embedding}'`).join(" or ")} for model_type ${JSON.stringify(type)}; its tensors include ${list(
        [...tensors.keys()].map((n) => `'${n}'`),
        5,
      )}`,
    );
  }
  const reader = new TensorReader(tensors, options.owned ?? false);
  const weights = type === "gpt2" ? gpt2Weights(reader, prefix, config, hf as Record<string, unknown>) : llamaWeights(reader, prefix, config);
  reader.checkTiedHead(config, weights.tokenEmbedding);
  reader.throwProblems();
  const extras = reader.unused().filter((name) => !naming.ignorable.test(name) && naming.inside(name, prefix));
  if (extras.length > 0) {
    throw new Error(
      `checkpoint has ${extras.length} tensor(s) that a ${type} block of this engine does not have, so it is likely another architecture: ${list(extras)}`,
    );
  }
  return weights;
}

interface Naming {
  /** The tensor-name prefixes of the transformer: the causal-LM class's (first) and the bare model class's. */
  prefixes: string[];
  embedding: string;
  /** Tensors a checkpoint may hold that carry no parameters (precomputed masks and frequencies). */
  ignorable: RegExp;
  /** Whether a tensor belongs to the transformer's own modules. */
  inside(name: string, prefix: string): boolean;
}

const gpt2Naming: Naming = {
  prefixes: ["transformer.", ""],
  embedding: "wte.weight",
  ignorable: /^(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)$/,
  inside: (name, prefix) => (prefix ? name.startsWith(prefix) : /^(wte|wpe|h|ln_f)\./.test(name)),
};

const llamaNaming: Naming = {
  prefixes: ["model.", ""],
  embedding: "embed_tokens.weight",
  ignorable: /(^|\.)rotary_emb\.inv_freq$/,
  inside: (name, prefix) => (prefix ? name.startsWith(prefix) : /^(embed_tokens|layers|norm)\./.test(name)),
};

/** The token embedding's row count: the vocabulary the model actually has, whatever config.json's vocab_size says. */
function embeddingRows(tensors: TensorMap, hf: unknown): number | undefined {
  const naming = hfModelType(hf) === "gpt2" ? gpt2Naming : llamaNaming;
  for (const p of naming.prefixes) {
    const t = tensors.get(p + naming.embedding);
    if (t && t.shape.length === 2) return t.shape[0];
  }
  return undefined;
}

function gpt2Weights(r: TensorReader, p: string, config: GPTConfig, hf: Record<string, unknown>): GPTWeights {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L } = config;
  const s = modelShape(config);
  const maxPositions = typeof hf.n_positions === "number" ? hf.n_positions : typeof hf.n_ctx === "number" ? hf.n_ctx : T;
  const norm = (name: string): LayerNormWeights => ({ gain: r.get(`${name}.weight`, [C]), bias: r.get(`${name}.bias`, [C]) });
  // Conv1D stores [in, out], the engine's own layout.
  const conv = (name: string, nIn: number, nOut: number): Linear => ({
    nIn,
    nOut,
    weight: r.get(`${name}.weight`, [nIn, nOut]),
    bias: r.get(`${name}.bias`, [nOut]),
  });
  const blocks = Array.from(
    { length: L },
    (_, l): BlockWeights => ({
      ln1: norm(`${p}h.${l}.ln_1`),
      attn_qkv: conv(`${p}h.${l}.attn.c_attn`, C, 3 * C),
      attn_proj: conv(`${p}h.${l}.attn.c_proj`, C, C),
      ln2: norm(`${p}h.${l}.ln_2`),
      mlp_fc: conv(`${p}h.${l}.mlp.c_fc`, C, s.dFF),
      mlp_proj: conv(`${p}h.${l}.mlp.c_proj`, s.dFF, C),
    }),
  );
  return {
    tokenEmbedding: r.get(`${p}wte.weight`, [V, C]),
    // The engine's context may be shorter than the checkpoint's: the first rows are those positions.
    positionEmbedding: r.get(`${p}wpe.weight`, [maxPositions, C], false).slice(0, T * C),
    blocks,
    lnFinal: norm(`${p}ln_f`),
    lmHead: s.tied ? new Float32Array(0) : transposed(r.get("lm_head.weight", [V, C], false), V, C),
  };
}

function llamaWeights(r: TensorReader, p: string, config: GPTConfig): GPTWeights {
  const { vocabSize: V, dModel: C, nLayers: L } = config;
  const s = modelShape(config);
  const rms = (name: string): LayerNormWeights => ({ gain: r.get(`${name}.weight`, [C]), bias: new Float32Array(C) });
  /** nn.Linear layers side by side as one [nIn, Σ out] layer, their biases concatenated (zeros without). */
  const linear = (names: string[], outs: number[], nIn: number, hasBias: boolean): Linear => {
    const nOut = outs.reduce((a, b) => a + b, 0);
    const weight = new Float32Array(nIn * nOut);
    const bias = new Float32Array(nOut);
    let column = 0;
    names.forEach((name, k) => {
      const rows = outs[k];
      const w = r.get(`${name}.weight`, [rows, nIn], false);
      for (let o = 0; o < rows; o++) for (let i = 0; i < nIn; i++) weight[i * nOut + column + o] = w[o * nIn + i];
      if (hasBias) bias.set(r.get(`${name}.bias`, [rows], false), column);
      column += rows;
    });
    return { nIn, nOut, weight, bias };
  };
  const blocks = Array.from({ length: L }, (_, l): BlockWeights => {
    const at = `${p}layers.${l}.`;
    return {
      ln1: rms(`${at}input_layernorm`),
      attn_qkv: linear([`${at}self_attn.q_proj`, `${at}self_attn.k_proj`, `${at}self_attn.v_proj`], [C, s.kvDim, s.kvDim], C, s.qkvBias),
      attn_proj: linear([`${at}self_attn.o_proj`], [C], C, s.attnOutBias),
      ln2: rms(`${at}post_attention_layernorm`),
      mlp_fc: linear([`${at}mlp.gate_proj`, `${at}mlp.up_proj`], [s.dFF, s.dFF], C, s.mlpBias),
      mlp_proj: linear([`${at}mlp.down_proj`], [C], s.dFF, s.mlpBias),
    };
  });
  return {
    tokenEmbedding: r.get(`${p}embed_tokens.weight`, [V, C]),
    positionEmbedding: new Float32Array(0),
    blocks,
    lnFinal: rms(`${p}norm`),
    lmHead: s.tied ? new Float32Array(0) : transposed(r.get("lm_head.weight", [V, C], false), V, C),
  };
}

/** [rows, cols] → [cols, rows] */
function transposed(a: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(a.length);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = a[i * cols + j];
  return out;
}

/**
 * Hands out tensors by name while noting every one that is missing or misshapen, so that one error lists all of
 * them, and remembers which were used, so that the rest can be judged.
 */
class TensorReader {
  private readonly used = new Set<string>();
  private readonly problems: string[] = [];

  /** `owned`: the map was read for this conversion alone, so its arrays become the weights without a copy. */
  constructor(
    private readonly tensors: TensorMap,
    private readonly owned: boolean,
  ) {}

  /**
   * The tensor's values (zeros of the expected size when it is missing or misshapen): a copy, so the weights never
   * share memory with the caller's map, unless the caller only reads them to build arrays of its own.
   */
  get(name: string, shape: number[], copy = true): Float32Array {
    this.used.add(name);
    const size = shape.reduce((a, b) => a * b, 1);
    const t = this.tensors.get(name);
    if (!t) this.problems.push(`tensor '${name}' is missing (expected shape [${shape.join(", ")}])`);
    else if (t.shape.join(",") !== shape.join(",")) {
      this.problems.push(`tensor '${name}' has shape [${t.shape.join(", ")}], expected [${shape.join(", ")}]`);
    } else return copy && !this.owned ? t.data.slice() : t.data;
    return new Float32Array(size);
  }

  /**
   * With tied embeddings the output layer is the token embedding; a checkpoint that also stores an lm_head must
   * store that same matrix, or the model it was trained as had a head of its own.
   */
  checkTiedHead(config: GPTConfig, embedding: Float32Array): void {
    if (!modelShape(config).tied) return;
    const head = this.tensors.get("lm_head.weight");
    if (!head) return;
    this.used.add("lm_head.weight");
    const same = head.data.length === embedding.length && head.data.every((x, i) => x === embedding[i]);
    if (!same) {
      this.problems.push(
        "tensor 'lm_head.weight' differs from the token embedding although config.json ties them (tie_word_embeddings); set tie_word_embeddings to false in config.json to import the separate output layer",
      );
    }
  }

  throwProblems(): void {
    if (this.problems.length === 0) return;
    throw new Error(`checkpoint does not match its config.json: ${list(this.problems)}`);
  }

  unused(): string[] {
    return [...this.tensors.keys()].filter((name) => !this.used.has(name));
  }
}

function list(items: string[], shown = 8): string {
  const head = items.slice(0, shown).join("; ");
  return items.length > shown ? `${head}; and ${items.length - shown} more` : head;
}
