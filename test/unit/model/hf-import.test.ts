import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { GPTConfig } from "@/lib/model/config";
import type { ModelView } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { hfConfigToGPTConfig } from "@/lib/model/hf/config";
import { hfTensorsToWeights, loadHFModel } from "@/lib/model/hf/weights";
import { Rng } from "@/lib/model/rng";
import { decodeSafetensors, encodeSafetensors, f32ToBf16Bits, type TensorMap } from "@/lib/model/safetensors";
import { type GPTWeights, listGPTParameters } from "@/lib/model/weights";
import { type HFModelFixtureOptions, type HFModelVariant, makeHFModel, writeHFFolder, writeHFModelFolder } from "@/test/support/hf-model-fixtures";

const root = mkdtempSync(join(tmpdir(), "tinkerlab-hf-import-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let folders = 0;
const folder = (variant: HFModelVariant, options: HFModelFixtureOptions = {}) => {
  const dir = join(root, `${variant}-${folders++}`);
  writeHFModelFolder(dir, variant, options);
  return dir;
};

// ---- the PyTorch reference (test/reference/hf_model.py) ----

const python = process.env.TINKERLAB_PYTHON ?? (existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
const referenceScript = join(import.meta.dirname, "../../reference/hf_model.py");

/**
 * Logits [folder][sequence][position][token] from the reference, for each folder's sequences: one process for all
 * of them, as PyTorch takes seconds to start. Fails (never skips) when PyTorch is not installed.
 */
function referenceLogits(requests: { dir: string; sequences: number[][] }[]): number[][][][] {
  const dirs = requests.map((r) => r.dir);
  const run = spawnSync(python, [referenceScript, ...dirs], {
    input: JSON.stringify(requests.map((r) => r.sequences)),
    encoding: "utf8",
    maxBuffer: 256 << 20,
  });
  if (run.error || /No module named 'torch'/.test(run.stderr)) {
    const why = (run.stderr || run.error?.message || "").trim().split("\n").pop();
    throw new Error(
      `the parity tests compare against a PyTorch reference, and ${python} cannot import torch (${why}); install it with \`apt-get install -y python3-torch\` (CI installs it), or point TINKERLAB_PYTHON at a python3 that has torch`,
    );
  }
  if (run.status !== 0) throw new Error(`${referenceScript} ${dirs.join(" ")} failed (${run.status}): ${run.stderr}`);
  return JSON.parse(run.stdout);
}

function tokenIds(vocab: number, rows: number, length: number, seed: number): number[][] {
  const rng = new Rng(seed);
  return Array.from({ length: rows }, () => Array.from({ length }, () => Math.floor(rng.uniform() * vocab)));
}

const maxDifferences: Record<string, number> = {};
afterAll(() => {
  if (Object.keys(maxDifferences).length > 0) console.log("max |engine - reference| logit differences:", maxDifferences);
});

describe("imported Hugging Face checkpoints compute what the PyTorch reference computes", () => {
  const cases: [string, HFModelVariant, HFModelFixtureOptions][] = [
    ["gpt2 (hub naming, mask buffers)", "gpt2", {}],
    ["gpt2 (GPT2LMHeadModel naming)", "gpt2", { prefix: true, seed: 2 }],
    ["qwen2", "qwen2", {}],
    ["llama3", "llama3", {}],
    ["llama3 stored as bf16 in 3 shards", "llama3", { dtype: "BF16", shards: 3, seed: 3 }],
    [
      "llama with linear rotary scaling and attention/MLP biases",
      "llama3",
      {
        seed: 4,
        config: { rope_scaling: { type: "linear", factor: 4 }, attention_bias: true, mlp_bias: true },
      },
    ],
  ];

  // Every case's folder and sequences first, so that one reference process serves them all.
  const prepared = cases.map(([, variant, options]) => {
    const fixture = makeHFModel(variant, options);
    if (options.config?.attention_bias || options.config?.mlp_bias) addLlamaBiases(fixture.tensors, options.seed ?? 1);
    const dir = join(root, `parity-${folders++}`);
    writeHFFolder(dir, fixture, options);
    const { config, weights } = loadHFModel(dir);
    return { dir, config, weights, sequences: tokenIds(config.vocabSize, 2, 12, 11) };
  });
  let references: number[][][][] | undefined;

  it.each(cases.map(([label], i) => [label, i] as const))("%s: logits of the full pass and of the cached decoder", (label, i) => {
    const { config, weights, sequences } = prepared[i]!;
    const model: ModelView = { config, weights, lora: null, valueHead: null };
    const [B, T, V] = [2, 12, config.vocabSize];
    references ??= referenceLogits(prepared);
    const expected = references[i]!;

    const { logits } = jsEngine.run({ model, tokens: Int32Array.from(sequences.flat()), batch: B, seqLen: T });
    let worst = 0;
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(logits[(b * T + t) * V + v] - expected[b][t][v]));
    }
    maxDifferences[label] = worst;
    expect(worst, `largest logit difference from the reference (${label})`).toBeLessThan(1e-4);
    // Logits of a few units: a tolerance of 1e-4 is not met by accident.
    expect(Math.max(...expected[0][T - 1].map(Math.abs))).toBeGreaterThan(1);

    // The cached decoder: a prefill of 5 tokens, then one token at a time, each step's logits the reference's.
    const decoder = jsEngine.createDecoder(model, B);
    try {
      const prompt = 5;
      let step = decoder.extend(
        [0, 1],
        sequences.map((s) => s.slice(0, prompt)),
      );
      for (let t = prompt - 1; t < T; t++) {
        let stepWorst = 0;
        for (let b = 0; b < B; b++) for (let v = 0; v < V; v++) stepWorst = Math.max(stepWorst, Math.abs(step[b * V + v] - expected[b][t][v]));
        expect(stepWorst, `decoder logits at position ${t} (${label})`).toBeLessThan(1e-4);
        if (t + 1 < T)
          step = decoder.extend(
            [0, 1],
            sequences.map((s) => [s[t + 1]]),
          );
      }
    } finally {
      decoder.dispose();
    }
  });
});

/** Llama's optional biases (attention_bias: q, k, v, o; mlp_bias: gate, up, down), added to a fixture. */
function addLlamaBiases(tensors: TensorMap, seed: number): void {
  const rng = new Rng(seed + 100);
  for (const [name, t] of [...tensors]) {
    if (/layers\.\d+\.(self_attn|mlp)\.\w+_proj\.weight$/.test(name)) {
      const rows = t.shape[0];
      tensors.set(name.replace(/weight$/, "bias"), { shape: [rows], data: Float32Array.from({ length: rows }, () => 0.2 * rng.normal()) });
    }
  }
}

// ---- storage: dtypes and shards ----

const parameters = (w: GPTWeights, c: GPTConfig) => listGPTParameters(w, c);

function roundedF16(values: Float32Array): Float32Array {
  const bytes = encodeSafetensors(new Map([["x", { shape: [values.length], data: values }]]), {}, { dtype: "F16" });
  return decodeSafetensors(bytes).tensors.get("x")!.data;
}

function roundedBf16(values: Float32Array): Float32Array {
  const bits = Uint32Array.from(values, (x) => f32ToBf16Bits(x) << 16);
  return new Float32Array(bits.buffer);
}

describe.each(["gpt2", "qwen2", "llama3"] as HFModelVariant[])("%s folders in other storage", (variant) => {
  it("load sharded float32 bit for bit, and bf16 or f16 as the float32 values rounded to that type", () => {
    const full = loadHFModel(folder(variant, { seed: 7 }));
    const sharded = loadHFModel(folder(variant, { seed: 7, shards: 3 }));
    const bf16 = loadHFModel(folder(variant, { seed: 7, shards: 2, dtype: "BF16" }));
    const f16 = loadHFModel(folder(variant, { seed: 7, dtype: "F16" }));
    expect(sharded.config).toEqual(full.config);
    expect(bf16.config).toEqual(full.config);
    const reference = parameters(full.weights, full.config);
    expect(reference.length).toBeGreaterThan(10);
    const same = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
    parameters(sharded.weights, sharded.config).forEach((p, i) => expect(same(p.data, reference[i].data), `${p.name} (sharded)`).toBe(true));
    parameters(bf16.weights, bf16.config).forEach((p, i) => expect(same(p.data, roundedBf16(reference[i].data)), `${p.name} (bf16)`).toBe(true));
    parameters(f16.weights, f16.config).forEach((p, i) => expect(same(p.data, roundedF16(reference[i].data)), `${p.name} (f16)`).toBe(true));
    // bf16 really rounded something: the stored weights differ from the float32 ones.
    expect(same(parameters(bf16.weights, bf16.config)[0].data, reference[0].data)).toBe(false);
  });
});

// ---- the mapping from config.json ----

describe("config.json as a GPTConfig", () => {
  it("maps each variant's fields", () => {
    expect(hfConfigToGPTConfig(makeHFModel("gpt2").hfConfig)).toEqual({
      architecture: "gpt",
      vocabSize: 352,
      contextLength: 64,
      dModel: 32,
      nLayers: 2,
      nHeads: 4,
      dFF: 128,
      tiedEmbeddings: true,
    });
    expect(hfConfigToGPTConfig(makeHFModel("qwen2").hfConfig, { contextLength: 32 })).toEqual({
      architecture: "llama",
      vocabSize: 384,
      contextLength: 32,
      dModel: 32,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dFF: 48,
      normEps: 1e-6,
      ropeTheta: 1e6,
      tiedEmbeddings: true,
      qkvBias: true,
      attnOutBias: false,
      mlpBias: false,
    });
    expect(hfConfigToGPTConfig(makeHFModel("llama3").hfConfig)).toMatchObject({
      architecture: "llama",
      contextLength: 256,
      ropeTheta: 500000,
      ropeScaling: { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 64 },
      tiedEmbeddings: false,
      qkvBias: false,
      attnOutBias: false,
    });
  });

  it("caps the default context at 2048 and refuses one beyond max_position_embeddings", () => {
    const hf = { ...makeHFModel("qwen2").hfConfig, max_position_embeddings: 32768 };
    expect(hfConfigToGPTConfig(hf).contextLength).toBe(2048);
    expect(hfConfigToGPTConfig(hf, { contextLength: 4096 }).contextLength).toBe(4096);
    expect(() => hfConfigToGPTConfig(makeHFModel("qwen2").hfConfig, { contextLength: 129 })).toThrow(
      "context length 129 is more than the model's max_position_embeddings (128); supported: at most 128",
    );
  });

  it("reads transformers 5's rope_parameters", () => {
    const hf = {
      ...makeHFModel("llama3").hfConfig,
      rope_theta: undefined,
      rope_scaling: undefined,
      rope_parameters: { rope_type: "linear", rope_theta: 1000, factor: 2 },
    };
    expect(hfConfigToGPTConfig(hf)).toMatchObject({ ropeTheta: 1000, ropeScaling: { type: "linear", factor: 2 } });
  });

  it("accepts mistral only without a sliding window shorter than the context", () => {
    const hf = { ...makeHFModel("llama3").hfConfig, model_type: "mistral", rope_scaling: null, sliding_window: 64 };
    expect(() => hfConfigToGPTConfig(hf)).toThrow(/sliding_window is 64; supported: no sliding window, or one of at least the context length \(256\)/);
    expect(hfConfigToGPTConfig(hf, { contextLength: 64 })).toMatchObject({ architecture: "llama", contextLength: 64, qkvBias: false });
    expect(hfConfigToGPTConfig({ ...hf, sliding_window: null }).contextLength).toBe(256);
  });

  const refusals: [string, (hf: Record<string, unknown>) => Record<string, unknown>, HFModelVariant, RegExp][] = [
    ["another model_type", (hf) => ({ ...hf, model_type: "qwen3" }), "qwen2", /model_type is "qwen3"; supported: gpt2, llama, qwen2, mistral/],
    [
      "yarn rotary scaling",
      (hf) => ({ ...hf, rope_scaling: { rope_type: "yarn", factor: 4, original_max_position_embeddings: 32768 } }),
      "qwen2",
      /rope_scaling.rope_type is "yarn"; supported: none\/default, linear, llama3/,
    ],
    ["dynamic rotary scaling", (hf) => ({ ...hf, rope_scaling: { type: "dynamic", factor: 2 } }), "llama3", /rope_type is "dynamic"; supported/],
    [
      "a quantized checkpoint",
      (hf) => ({ ...hf, quantization_config: { quant_method: "bitsandbytes", load_in_4bit: true } }),
      "llama3",
      /quantization_config \(quant_method "bitsandbytes"\): quantized checkpoints are not supported/,
    ],
    ["a missing field", (hf) => ({ ...hf, hidden_size: undefined }), "llama3", /config.json has no hidden_size; model_type "llama" needs it/],
    ["another activation (llama)", (hf) => ({ ...hf, hidden_act: "gelu" }), "llama3", /hidden_act is "gelu"; supported for model_type "llama": silu/],
    [
      "exact GELU (gpt2)",
      (hf) => ({ ...hf, activation_function: "gelu" }),
      "gpt2",
      /activation_function is "gelu"; supported for model_type "gpt2": gelu_new, gelu_pytorch_tanh/,
    ],
    ["another LayerNorm epsilon", (hf) => ({ ...hf, layer_norm_epsilon: 1e-6 }), "gpt2", /layer_norm_epsilon is 1e-6; supported: 1e-5/],
    [
      "a head_dim that does not split hidden_size",
      (hf) => ({ ...hf, head_dim: 32 }),
      "llama3",
      /head_dim is 32; supported: hidden_size \/ num_attention_heads = 16/,
    ],
    ["nHeads not a multiple of the key/value heads", (hf) => ({ ...hf, num_key_value_heads: 3 }), "llama3", /nHeads must be a multiple of nKvHeads/],
  ];
  it.each(refusals)("refuses %s, naming the field, the value and what is supported", (_, change, variant, message) => {
    const hf = change(makeHFModel(variant).hfConfig);
    for (const key of Object.keys(hf)) if (hf[key] === undefined) delete hf[key];
    expect(() => hfConfigToGPTConfig(hf)).toThrow(message);
  });
});

// ---- the tensors ----

describe("checkpoint tensors as GPTWeights", () => {
  const load = (variant: HFModelVariant, change: (t: TensorMap) => void) => {
    const { hfConfig, tensors } = makeHFModel(variant);
    change(tensors);
    return () => hfTensorsToWeights(tensors, hfConfigToGPTConfig(hfConfig), hfConfig);
  };

  it("lays nn.Linear's [out, in] out as the engine's [in, out], q|k|v and gate|up side by side", () => {
    const { hfConfig, tensors } = makeHFModel("llama3");
    const config = hfConfigToGPTConfig(hfConfig);
    const w = hfTensorsToWeights(tensors, config, hfConfig);
    const [C, kv, F, V] = [64, 32, 96, 384];
    const at = (name: string, row: number, col: number) => {
      const t = tensors.get(name)!;
      return t.data[row * t.shape[1] + col];
    };
    const qkv = w.blocks[1].attn_qkv;
    expect([qkv.nIn, qkv.nOut]).toEqual([C, C + 2 * kv]);
    expect(qkv.weight[5 * qkv.nOut + 3]).toBe(at("model.layers.1.self_attn.q_proj.weight", 3, 5));
    expect(qkv.weight[5 * qkv.nOut + C + 7]).toBe(at("model.layers.1.self_attn.k_proj.weight", 7, 5));
    expect(qkv.weight[5 * qkv.nOut + C + kv + 7]).toBe(at("model.layers.1.self_attn.v_proj.weight", 7, 5));
    const fc = w.blocks[0].mlp_fc;
    expect(fc.weight[9 * 2 * F + F + 4]).toBe(at("model.layers.0.mlp.up_proj.weight", 4, 9));
    expect(w.blocks[0].mlp_proj.weight[4 * C + 9]).toBe(at("model.layers.0.mlp.down_proj.weight", 9, 4));
    expect(w.lmHead[2 * V + 17]).toBe(at("lm_head.weight", 17, 2));
    expect(w.positionEmbedding.length).toBe(0);
  });

  it("truncates GPT-2's learned positions to the context length", () => {
    const dir = folder("gpt2");
    const { config, weights } = loadHFModel(dir, { contextLength: 16 });
    expect(config.contextLength).toBe(16);
    expect(weights.positionEmbedding.length).toBe(16 * 32);
    expect(() => loadHFModel(dir, { contextLength: 65 })).toThrow(/context length 65 is more than the model's n_positions \(64\)/);
  });

  it("loads a folder that also holds a tokenizer, whose ids the embedding covers", () => {
    for (const variant of ["gpt2", "llama3"] as const) {
      const dir = folder(variant, { tokenizer: true });
      expect(existsSync(join(dir, "tokenizer.json"))).toBe(true);
      const tokenizer = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
      const ids = [...Object.values(tokenizer.model.vocab as Record<string, number>), ...tokenizer.added_tokens.map((t: { id: number }) => t.id)];
      expect(Math.max(...ids)).toBeLessThan(loadHFModel(dir).config.vocabSize);
    }
  });

  it("takes the vocabulary size from the embedding", () => {
    const dir = folder("qwen2", { config: { vocab_size: 999 } });
    expect(loadHFModel(dir).config.vocabSize).toBe(384);
  });

  it("refuses a missing tensor, naming it and the shape it should have", () => {
    expect(load("llama3", (t) => t.delete("model.layers.1.self_attn.k_proj.weight"))).toThrow(
      "tensor 'model.layers.1.self_attn.k_proj.weight' is missing (expected shape [32, 64])",
    );
    expect(load("llama3", (t) => t.delete("lm_head.weight"))).toThrow("tensor 'lm_head.weight' is missing (expected shape [384, 64])");
    expect(load("qwen2", (t) => t.delete("model.layers.0.self_attn.v_proj.bias"))).toThrow("tensor 'model.layers.0.self_attn.v_proj.bias' is missing");
  });

  it("refuses a tensor of the wrong shape, naming the shape found and the one expected", () => {
    expect(load("qwen2", (t) => t.set("model.layers.0.self_attn.q_proj.bias", { shape: [30], data: new Float32Array(30) }))).toThrow(
      "tensor 'model.layers.0.self_attn.q_proj.bias' has shape [30], expected [32]",
    );
    expect(load("gpt2", (t) => t.set("h.1.mlp.c_fc.weight", { shape: [128, 32], data: new Float32Array(128 * 32) }))).toThrow(
      "tensor 'h.1.mlp.c_fc.weight' has shape [128, 32], expected [32, 128]",
    );
  });

  it("refuses tensors of a block this engine does not compute, and ignores those outside the transformer", () => {
    const extra = (name: string) => (t: TensorMap) => t.set(name, { shape: [8], data: new Float32Array(8) });
    expect(load("qwen2", extra("model.layers.0.self_attn.q_norm.weight"))).toThrow(
      /tensor\(s\) that a qwen2 block of this engine does not have, so it is likely another architecture: model.layers.0.self_attn.q_norm.weight/,
    );
    expect(load("llama3", extra("model.layers.2.input_layernorm.weight"))).toThrow(/model.layers.2.input_layernorm.weight/);
    expect(load("gpt2", extra("h.0.attn.q_norm.weight"))).toThrow(/h.0.attn.q_norm.weight/);
    expect(load("llama3", extra("v_head.summary.bias"))).not.toThrow();
    expect(load("llama3", extra("model.layers.0.self_attn.rotary_emb.inv_freq"))).not.toThrow();
  });

  it("accepts a tied lm_head stored alongside the embedding only when it is the same matrix", () => {
    const copy = (t: TensorMap) => t.set("lm_head.weight", { ...t.get("model.embed_tokens.weight")!, data: t.get("model.embed_tokens.weight")!.data.slice() });
    expect(load("qwen2", copy)).not.toThrow();
    expect(
      load("qwen2", (t) => {
        copy(t);
        t.get("lm_head.weight")!.data[3] += 1;
      }),
    ).toThrow(/'lm_head.weight' differs from the token embedding although config.json ties them/);
  });

  it("refuses a checkpoint without the embedding of its model_type", () => {
    expect(load("gpt2", (t) => t.delete("wte.weight"))).toThrow(/checkpoint has no token embedding: expected 'transformer.wte.weight' or 'wte.weight'/);
  });

  it("names the folder and the problem when a folder cannot be imported", () => {
    const empty = join(root, "empty");
    expect(() => loadHFModel(empty)).toThrow(`${empty} has no config.json`);
    const dir = join(root, "no-k");
    const fixture = makeHFModel("llama3");
    fixture.tensors.delete("model.layers.0.self_attn.k_proj.weight");
    writeHFFolder(dir, fixture);
    expect(() => loadHFModel(dir)).toThrow(
      `cannot import ${dir}: checkpoint does not match its config.json: tensor 'model.layers.0.self_attn.k_proj.weight' is missing`,
    );
    const quantized = folder("qwen2", { config: { quantization_config: { quant_method: "gptq", bits: 4 } } });
    expect(() => loadHFModel(quantized)).toThrow(/quantized checkpoints are not supported/);
  });
});
