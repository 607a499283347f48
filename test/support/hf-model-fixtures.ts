/**
 * Tiny random checkpoints in Hugging Face's layout (config.json + model.safetensors, or shards with
 * model.safetensors.index.json), for testing the import against an independent reference without downloading
 * anything. Weights are drawn with a spread of 0.1–0.3 (norm gains 1 ± 0.2), far from any trained or initial
 * values, so that a tensor read from the wrong place, or left out, changes the logits. Vocabularies are a few
 * hundred ids, at least the size of the tokenizer fixtures' (hf-fixtures.ts), so a folder can hold both.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "@/lib/model/rng";
import { encodeSafetensors, type SafetensorsDtype, type TensorMap } from "@/lib/model/safetensors";
import { writeTokenizerFolder } from "./hf-fixtures";

/**
 * - gpt2: GPT-2's block with tied output layer and learned positions, named like the hub's gpt2 (GPT2Model's bare
 *   names, with the attention-mask buffers old checkpoints carry), or like GPT2LMHeadModel's with `prefix`.
 * - qwen2: Qwen2's block: 4 query heads sharing 2 key/value heads, query/key/value biases, tied embeddings,
 *   rope_theta 1e6.
 * - llama3: Llama 3's block: grouped-query attention, a separate lm_head, llama3 rotary scaling whose thresholds
 *   put the head's frequencies in all three of its bands (kept, smoothed, divided), no biases.
 */
export type HFModelVariant = "gpt2" | "qwen2" | "llama3";

export interface HFModelFixtureOptions {
  seed?: number;
  /** How the tensors are stored; default F32. */
  dtype?: SafetensorsDtype;
  /** More than 1: that many model-0000k-of-0000n.safetensors files and an index. */
  shards?: number;
  /** gpt2: name tensors "transformer.*" as GPT2LMHeadModel saves them. */
  prefix?: boolean;
  /** Also write the tokenizer files of test/support/hf-fixtures.ts (chatml for gpt2 and qwen2, llama3 for llama3). */
  tokenizer?: boolean;
  /** Fields merged over config.json (undefined removes a field). */
  config?: Record<string, unknown>;
}

export interface HFModelFixture {
  hfConfig: Record<string, unknown>;
  /** The values drawn, in float32, before any rounding to the stored dtype. */
  tensors: TensorMap;
}

const torchDtype: Record<SafetensorsDtype, string> = { F32: "float32", BF16: "bfloat16", F16: "float16" };

export function makeHFModel(variant: HFModelVariant, options: HFModelFixtureOptions = {}): HFModelFixture {
  const rng = new Rng(options.seed ?? 1);
  const tensors: TensorMap = new Map();
  const add = (name: string, shape: number[], fill: (i: number) => number) => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = fill(i);
    tensors.set(name, { shape, data });
  };
  const normal = (name: string, shape: number[], std: number) => add(name, shape, () => std * rng.normal());
  const gain = (name: string, C: number) => add(name, [C], () => 1 + 0.2 * rng.normal());

  let hfConfig: Record<string, unknown>;
  if (variant === "gpt2") {
    const [V, P, C, L] = [352, 64, 32, 2];
    hfConfig = {
      architectures: ["GPT2LMHeadModel"],
      model_type: "gpt2",
      vocab_size: V,
      n_positions: P,
      n_ctx: P,
      n_embd: C,
      n_layer: L,
      n_head: 4,
      n_inner: null,
      activation_function: "gelu_new",
      layer_norm_epsilon: 1e-5,
      resid_pdrop: 0.1,
      embd_pdrop: 0.1,
      attn_pdrop: 0.1,
      initializer_range: 0.02,
      scale_attn_weights: true,
      use_cache: true,
      bos_token_id: V - 1,
      eos_token_id: V - 1,
    };
    const p = options.prefix ? "transformer." : "";
    normal(`${p}wte.weight`, [V, C], 0.3);
    normal(`${p}wpe.weight`, [P, C], 0.3);
    for (let l = 0; l < L; l++) {
      const h = `${p}h.${l}.`;
      gain(`${h}ln_1.weight`, C);
      normal(`${h}ln_1.bias`, [C], 0.1);
      // The causal mask buffer that checkpoints saved by older transformers carry; not a parameter.
      add(`${h}attn.bias`, [1, 1, P, P], (i) => (i % P <= Math.floor(i / P) ? 1 : 0));
      normal(`${h}attn.c_attn.weight`, [C, 3 * C], 0.15);
      normal(`${h}attn.c_attn.bias`, [3 * C], 0.1);
      normal(`${h}attn.c_proj.weight`, [C, C], 0.15);
      normal(`${h}attn.c_proj.bias`, [C], 0.1);
      gain(`${h}ln_2.weight`, C);
      normal(`${h}ln_2.bias`, [C], 0.1);
      normal(`${h}mlp.c_fc.weight`, [C, 4 * C], 0.15);
      normal(`${h}mlp.c_fc.bias`, [4 * C], 0.1);
      normal(`${h}mlp.c_proj.weight`, [4 * C, C], 0.1);
      normal(`${h}mlp.c_proj.bias`, [C], 0.1);
    }
    gain(`${p}ln_f.weight`, C);
    normal(`${p}ln_f.bias`, [C], 0.1);
  } else {
    const qwen = variant === "qwen2";
    const [V, C, L, H, KV, F] = qwen ? [384, 32, 2, 4, 2, 48] : [384, 64, 2, 4, 2, 96];
    const hd = C / H;
    hfConfig = qwen
      ? {
          architectures: ["Qwen2ForCausalLM"],
          model_type: "qwen2",
          vocab_size: V,
          hidden_size: C,
          intermediate_size: F,
          num_hidden_layers: L,
          num_attention_heads: H,
          num_key_value_heads: KV,
          max_position_embeddings: 128,
          rms_norm_eps: 1e-6,
          rope_theta: 1000000.0,
          rope_scaling: null,
          tie_word_embeddings: true,
          hidden_act: "silu",
          use_sliding_window: false,
          sliding_window: 128,
          max_window_layers: L,
          attention_dropout: 0.0,
          initializer_range: 0.02,
          use_cache: true,
          bos_token_id: V - 2,
          eos_token_id: V - 1,
        }
      : {
          architectures: ["LlamaForCausalLM"],
          model_type: "llama",
          vocab_size: V,
          hidden_size: C,
          intermediate_size: F,
          num_hidden_layers: L,
          num_attention_heads: H,
          num_key_value_heads: KV,
          head_dim: hd,
          max_position_embeddings: 256,
          rms_norm_eps: 1e-5,
          rope_theta: 500000.0,
          // head width 16, theta 5e5: wavelengths 6.3 (< 64/4: kept), 32.5 (between: smoothed), then > 64 (divided)
          rope_scaling: { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 64, rope_type: "llama3" },
          tie_word_embeddings: false,
          attention_bias: false,
          attention_dropout: 0.0,
          mlp_bias: false,
          hidden_act: "silu",
          pretraining_tp: 1,
          initializer_range: 0.02,
          use_cache: true,
          bos_token_id: V - 2,
          eos_token_id: V - 1,
        };
    normal("model.embed_tokens.weight", [V, C], 0.3);
    for (let l = 0; l < L; l++) {
      const at = `model.layers.${l}.`;
      gain(`${at}input_layernorm.weight`, C);
      normal(`${at}self_attn.q_proj.weight`, [C, C], 0.15);
      normal(`${at}self_attn.k_proj.weight`, [KV * hd, C], 0.15);
      normal(`${at}self_attn.v_proj.weight`, [KV * hd, C], 0.15);
      if (qwen) {
        normal(`${at}self_attn.q_proj.bias`, [C], 0.2);
        normal(`${at}self_attn.k_proj.bias`, [KV * hd], 0.2);
        normal(`${at}self_attn.v_proj.bias`, [KV * hd], 0.2);
      }
      normal(`${at}self_attn.o_proj.weight`, [C, C], 0.15);
      gain(`${at}post_attention_layernorm.weight`, C);
      normal(`${at}mlp.gate_proj.weight`, [F, C], 0.2);
      normal(`${at}mlp.up_proj.weight`, [F, C], 0.2);
      normal(`${at}mlp.down_proj.weight`, [C, F], 0.15);
    }
    gain("model.norm.weight", C);
    if (!qwen) normal("lm_head.weight", [V, C], 0.3);
  }
  hfConfig.torch_dtype = torchDtype[options.dtype ?? "F32"];
  hfConfig.transformers_version = "4.46.0";
  for (const [key, value] of Object.entries(options.config ?? {})) {
    if (value === undefined) delete hfConfig[key];
    else hfConfig[key] = value;
  }
  return { hfConfig, tensors };
}

/** Writes the variant into `dir` (created if needed) and returns what was drawn. */
export function writeHFModelFolder(dir: string, variant: HFModelVariant, options: HFModelFixtureOptions = {}): HFModelFixture {
  const fixture = makeHFModel(variant, options);
  writeHFFolder(dir, fixture, options);
  if (options.tokenizer) writeTokenizerFolder(dir, variant === "llama3" ? "llama3" : "chatml");
  return fixture;
}

/** Writes a config and tensors (perhaps altered by a test) as a model folder. */
export function writeHFFolder(dir: string, fixture: HFModelFixture, options: { dtype?: SafetensorsDtype; shards?: number } = {}): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), `${JSON.stringify(fixture.hfConfig, null, 2)}\n`);
  const dtype = options.dtype ?? "F32";
  const metadata = { format: "pt" };
  const shards = options.shards ?? 1;
  const entries = [...fixture.tensors];
  if (shards <= 1) {
    writeFileSync(join(dir, "model.safetensors"), encodeSafetensors(fixture.tensors, metadata, { dtype }));
    return;
  }
  const weightMap: Record<string, string> = {};
  let totalSize = 0;
  const perShard = Math.ceil(entries.length / shards);
  for (let k = 0; k < shards; k++) {
    const file = `model-${String(k + 1).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.safetensors`;
    const part: TensorMap = new Map(entries.slice(k * perShard, (k + 1) * perShard));
    for (const [name, t] of part) {
      weightMap[name] = file;
      totalSize += t.data.length * (dtype === "F32" ? 4 : 2);
    }
    writeFileSync(join(dir, file), encodeSafetensors(part, metadata, { dtype }));
  }
  writeFileSync(join(dir, "model.safetensors.index.json"), `${JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2)}\n`);
}
