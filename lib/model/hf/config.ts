/**
 * A Hugging Face `config.json` as this engine's GPTConfig, for the two block families the engine computes:
 *
 * - `model_type` "gpt2" → architecture "gpt" (LayerNorm, learned positions, tanh GELU, tied output layer);
 * - "llama", "qwen2", "mistral" → architecture "llama" (RMSNorm, rotary positions, GQA, SwiGLU).
 *
 * Every field that changes what the model computes is either carried over or checked against what the engine
 * computes; a checkpoint that needs anything else is refused with the field, the value found and what is supported,
 * rather than loaded into a model that would compute something else. Fields left out of a config.json take the
 * defaults of the transformers class for that model_type, as transformers itself does on load.
 */
import { type GPTConfig, parseGPTConfig, type RopeScaling } from "../config";

const supportedModelTypes = ["gpt2", "llama", "qwen2", "mistral"] as const;
export type HFModelType = (typeof supportedModelTypes)[number];

export interface HFImportOptions {
  /** Longest sequence the imported model attends over; default min(max_position_embeddings, 2048). */
  contextLength?: number;
  /** Rows of the token embedding, which win over the config's vocab_size (loadHFModel passes them). */
  vocabSize?: number;
}

/** Contexts longer than this are opt-in: the attention caches of a decoder grow with it. */
const defaultMaxContextLength = 2048;

/** transformers' GPT-2 GELU is the tanh approximation under these names; the engine computes only that form. */
const gpt2Activations = ["gelu_new", "gelu_pytorch_tanh"];
const ropeTypesSupported = "none/default, linear, llama3";

type Json = Record<string, unknown>;

export function hfModelType(hf: unknown): HFModelType {
  const config = asObject(hf);
  const type = config.model_type;
  if (typeof type !== "string") {
    throw new Error(`config.json has no model_type (found ${show(type)}); supported: ${supportedModelTypes.join(", ")}`);
  }
  if (!(supportedModelTypes as readonly string[]).includes(type)) {
    throw new Error(
      `config.json model_type is ${show(type)}; supported: ${supportedModelTypes.join(", ")} (GPT-2 and Llama-family blocks: SmolLM, Qwen2/2.5, Llama 3, Mistral)`,
    );
  }
  return type as HFModelType;
}

export function hfConfigToGPTConfig(hf: unknown, options: HFImportOptions = {}): GPTConfig {
  const config = asObject(hf);
  if (config.quantization_config !== undefined && config.quantization_config !== null) {
    const method = (config.quantization_config as Json)?.quant_method;
    throw new Error(
      `config.json has a quantization_config${typeof method === "string" ? ` (quant_method ${show(method)})` : ""}: quantized checkpoints are not supported; import the unquantized float32, float16 or bfloat16 weights`,
    );
  }
  const type = hfModelType(config);
  const fields = new Fields(config, type);
  const result = type === "gpt2" ? gpt2Config(fields, options) : llamaConfig(fields, type, options);
  return parseGPTConfig(result);
}

function gpt2Config(f: Fields, options: HFImportOptions): GPTConfig {
  // Old GPT-2 configs name the context n_ctx.
  const maxPositions = f.config.n_positions === undefined && f.config.n_ctx !== undefined ? f.positiveInt("n_ctx") : f.positiveInt("n_positions");
  const dModel = f.positiveInt("n_embd");
  const nInner = f.config.n_inner;
  f.oneOf("activation_function", gpt2Activations, "gelu_new");
  f.equals("layer_norm_epsilon", 1e-5, 1e-5, "the engine's LayerNorm uses epsilon 1e-5");
  f.equals("scale_attn_weights", true, true, "the engine scales attention scores by 1/sqrt(head width)");
  f.equals("scale_attn_by_inverse_layer_idx", false, false, "the engine does not scale attention by the layer index");
  f.equals("add_cross_attention", false, false, "the engine's blocks are decoder-only");
  return {
    architecture: "gpt",
    vocabSize: vocabSize(f, options),
    contextLength: contextLength(maxPositions, "n_positions", options),
    dModel,
    nLayers: f.positiveInt("n_layer"),
    nHeads: f.positiveInt("n_head"),
    dFF: nInner === undefined || nInner === null ? 4 * dModel : f.positiveInt("n_inner"),
    // GPT-2 ties its output layer to wte unless a config explicitly says otherwise.
    tiedEmbeddings: f.boolean("tie_word_embeddings", true),
  };
}

function llamaConfig(f: Fields, type: HFModelType, options: HFImportOptions): GPTConfig {
  const dModel = f.positiveInt("hidden_size");
  const nHeads = f.positiveInt("num_attention_heads");
  const nKvHeads = f.config.num_key_value_heads === undefined || f.config.num_key_value_heads === null ? nHeads : f.positiveInt("num_key_value_heads");
  const maxPositions = f.positiveInt("max_position_embeddings");
  const context = contextLength(maxPositions, "max_position_embeddings", options);
  f.oneOf("hidden_act", ["silu"], "silu");
  const headDim = f.config.head_dim;
  if (headDim !== undefined && headDim !== null && headDim !== dModel / nHeads) {
    throw new Error(
      `config.json head_dim is ${show(headDim)}; supported: hidden_size / num_attention_heads = ${dModel / nHeads} (the engine's heads split the residual stream evenly)`,
    );
  }
  const partialRotary = f.config.partial_rotary_factor;
  if (partialRotary !== undefined && partialRotary !== null && partialRotary !== 1) {
    throw new Error(`config.json partial_rotary_factor is ${show(partialRotary)}; supported: 1 (rotary positions over the whole head)`);
  }
  checkSlidingWindow(f, type, context);
  const { theta, scaling } = rope(f);

  let qkvBias: boolean;
  let attnOutBias: boolean;
  let mlpBias: boolean;
  if (type === "qwen2") {
    // Qwen2's attention has query/key/value biases and none on its output; its MLP has no biases.
    qkvBias = true;
    attnOutBias = false;
    mlpBias = false;
  } else if (type === "mistral") {
    qkvBias = attnOutBias = mlpBias = false;
  } else {
    qkvBias = attnOutBias = f.boolean("attention_bias", false);
    mlpBias = f.boolean("mlp_bias", false);
  }
  const result: GPTConfig = {
    architecture: "llama",
    vocabSize: vocabSize(f, options),
    contextLength: context,
    dModel,
    nLayers: f.positiveInt("num_hidden_layers"),
    nHeads,
    nKvHeads,
    dFF: f.positiveInt("intermediate_size"),
    normEps: f.positiveNumber("rms_norm_eps", 1e-6),
    ropeTheta: theta,
    tiedEmbeddings: f.boolean("tie_word_embeddings", false),
    qkvBias,
    attnOutBias,
    mlpBias,
  };
  if (scaling) result.ropeScaling = scaling;
  return result;
}

/** The engine attends over the whole context; a window shorter than it would change what each token sees. */
function checkSlidingWindow(f: Fields, type: HFModelType, context: number): void {
  const window = f.config.sliding_window;
  if (type === "qwen2" && f.config.use_sliding_window !== true) return;
  if (type === "llama" || window === undefined || window === null) return;
  if (typeof window !== "number" || window < context) {
    throw new Error(
      `config.json sliding_window is ${show(window)}${type === "qwen2" ? " with use_sliding_window true" : ""}; supported: no sliding window, or one of at least the context length (${context}); import with a context length of at most ${typeof window === "number" ? window : "the window"}`,
    );
  }
}

/**
 * The rotary base and scaling, from `rope_theta` and `rope_scaling` (transformers 4) or from `rope_parameters`
 * (transformers 5, which holds both).
 */
function rope(f: Fields): { theta: number; scaling?: RopeScaling } {
  const params = f.config.rope_parameters;
  const where = params !== undefined && params !== null ? "rope_parameters" : "rope_scaling";
  const theta = where === "rope_parameters" ? (asObject(params, "rope_parameters").rope_theta ?? f.config.rope_theta) : f.config.rope_theta;
  if (theta !== undefined && (typeof theta !== "number" || !(theta > 0))) {
    throw new Error(`config.json rope_theta is ${show(theta)}; supported: a positive number`);
  }
  const raw = where === "rope_parameters" ? params : f.config.rope_scaling;
  if (raw === undefined || raw === null) return { theta: theta ?? 10000 };
  const s = asObject(raw, where);
  const type = s.rope_type ?? s.type;
  const field = (name: string): number => {
    const value = s[name];
    if (typeof value !== "number" || !(value > 0)) {
      throw new Error(`config.json ${where}.${name} is ${show(value)}; ${show(type)} rotary scaling needs a positive number there`);
    }
    return value;
  };
  if (type === undefined || type === "default") return { theta: theta ?? 10000 };
  if (type === "linear") return { theta: theta ?? 10000, scaling: { type: "linear", factor: field("factor") } };
  if (type === "llama3") {
    const originalContextLength = field("original_max_position_embeddings");
    if (!Number.isInteger(originalContextLength)) {
      throw new Error(`config.json ${where}.original_max_position_embeddings is ${show(originalContextLength)}; supported: a positive integer`);
    }
    const scaling: RopeScaling = {
      type: "llama3",
      factor: field("factor"),
      lowFreqFactor: field("low_freq_factor"),
      highFreqFactor: field("high_freq_factor"),
      originalContextLength,
    };
    if (scaling.highFreqFactor <= scaling.lowFreqFactor) {
      throw new Error(
        `config.json ${where}.high_freq_factor (${scaling.highFreqFactor}) must be greater than low_freq_factor (${scaling.lowFreqFactor}) for llama3 rotary scaling`,
      );
    }
    return { theta: theta ?? 10000, scaling };
  }
  throw new Error(`config.json ${where}.rope_type is ${show(type)}; supported: ${ropeTypesSupported}`);
}

function contextLength(maxPositions: number, field: string, options: HFImportOptions): number {
  if (options.contextLength === undefined) return Math.min(maxPositions, defaultMaxContextLength);
  const n = options.contextLength;
  if (!Number.isInteger(n) || n < 1) throw new Error(`context length ${n} is not a positive integer`);
  if (n > maxPositions) {
    throw new Error(`context length ${n} is more than the model's ${field} (${maxPositions}); supported: at most ${maxPositions}`);
  }
  return n;
}

function vocabSize(f: Fields, options: HFImportOptions): number {
  if (options.vocabSize !== undefined) {
    if (!Number.isInteger(options.vocabSize) || options.vocabSize < 2) throw new Error(`vocabulary size ${options.vocabSize} is not an integer of at least 2`);
    return options.vocabSize;
  }
  return f.positiveInt("vocab_size");
}

/** Typed reads of config.json fields, each failing with the field, the value found and what is accepted. */
class Fields {
  constructor(
    readonly config: Json,
    readonly type: string,
  ) {}

  private missing(name: string, what: string): never {
    throw new Error(`config.json has no ${name}; model_type ${show(this.type)} needs it (${what})`);
  }

  positiveInt(name: string): number {
    const value = this.config[name];
    if (value === undefined || value === null) this.missing(name, "a positive integer");
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
      throw new Error(`config.json ${name} is ${show(value)}; supported: a positive integer`);
    }
    return value;
  }

  positiveNumber(name: string, fallback: number): number {
    const value = this.config[name] ?? fallback;
    if (typeof value !== "number" || !(value > 0)) throw new Error(`config.json ${name} is ${show(value)}; supported: a positive number`);
    return value;
  }

  boolean(name: string, fallback: boolean): boolean {
    const value = this.config[name] ?? fallback;
    if (typeof value !== "boolean") throw new Error(`config.json ${name} is ${show(value)}; supported: true or false`);
    return value;
  }

  oneOf(name: string, accepted: string[], fallback: string): void {
    const value = this.config[name] ?? fallback;
    if (!accepted.includes(value as string)) {
      throw new Error(`config.json ${name} is ${show(value)}; supported for model_type ${show(this.type)}: ${accepted.join(", ")}`);
    }
  }

  equals(name: string, expected: unknown, fallback: unknown, why: string): void {
    const value = this.config[name] ?? fallback;
    if (value !== expected) throw new Error(`config.json ${name} is ${show(value)}; supported: ${show(expected)} (${why})`);
  }
}

function asObject(value: unknown, what = "config.json"): Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`${what} must be a JSON object; found ${show(value)}`);
  }
  return value as Json;
}

function show(value: unknown): string {
  if (value === undefined) return "missing";
  // 1e-6, not 0.000001: epsilons read as they are written in config.json.
  if (typeof value === "number" && value !== 0 && Math.abs(value) < 1e-3) return value.toExponential();
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
