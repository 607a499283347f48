/**
 * The exporter's other shapes (lib/onnx/export.ts): the llama architecture (RMSNorm, rotary positions with scaling,
 * grouped-query attention, SwiGLU, biases by flag) and GPT-2's block with tied embeddings and an MLP width other
 * than 4·dModel. For each, a random model's file computes the engine's logits over a whole sequence, and decoding
 * with the file's key/value cache, one token at a time, gives the engine's decoder's logits at every step. The file
 * keeps the interface the browser and the server code against (export.test.ts checks it for GPT-2's bases), holds
 * standard operators only, and a decoding step of a llama of the shipped bases' sizes never wakes onnxruntime's
 * thread pool.
 */
import { afterAll, describe, expect, it } from "vitest";
import { type GPTConfig, parseGPTConfig } from "@/lib/model/config";
import type { ModelView } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { Rng } from "@/lib/model/rng";
import { initGPTWeights, listGPTParameters } from "@/lib/model/weights";
import { exportGptToOnnx, ONNX_OPSET, onnxInputNames, onnxOutputNames } from "@/lib/onnx/export";
import { decodeModel } from "@/lib/onnx/proto";
import { optimizedKernels, ort, type Session, type Tensor, threadPoolUse } from "./ort-support";

const TOLERANCE = 1e-4;

const cases: { name: string; short: string; config: GPTConfig }[] = [
  {
    name: "llama: grouped-query attention, tied embeddings, query/key/value biases, llama3 rotary scaling",
    short: "llama GQA",
    config: {
      architecture: "llama",
      vocabSize: 262,
      contextLength: 32,
      dModel: 32,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dFF: 48,
      normEps: 1e-6,
      tiedEmbeddings: true,
      qkvBias: true,
      // head width 8: wavelengths 6.3, 63, 628 and 6283 positions; one kept, one smoothed, two stretched
      ropeScaling: { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 64 },
    },
  },
  {
    name: "llama: one key/value head, every bias, linear rotary scaling, an untied lm_head",
    short: "llama MQA",
    config: {
      architecture: "llama",
      vocabSize: 262,
      contextLength: 32,
      dModel: 24,
      nLayers: 2,
      nHeads: 3,
      nKvHeads: 1,
      dFF: 40,
      ropeTheta: 500,
      ropeScaling: { type: "linear", factor: 2 },
      qkvBias: true,
      attnOutBias: true,
      mlpBias: true,
    },
  },
  {
    name: "gpt: tied embeddings, dFF ≠ 4·dModel",
    short: "gpt tied",
    config: { vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 2, nHeads: 4, dFF: 72, tiedEmbeddings: true },
  },
];

/** The largest difference seen between ONNX and engine logits, per case, reported at the end. */
const worst = new Map<string, number>();
afterAll(() => console.log(`onnx export, max abs logit difference: ${[...worst].map(([k, v]) => `${k} ${v.toExponential(2)}`).join(", ")}`));

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>, name: string): number {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  worst.set(name, Math.max(worst.get(name) ?? 0, max));
  return max;
}

/**
 * A random model whose every parameter matters: the engine's initialisation, then gains around 1 and noise on every
 * weight and bias the architecture has (a bias it has not stays zero, as the engine keeps it), and embeddings large
 * enough that the logits spread to ±10 and beyond.
 */
function randomModel(config: GPTConfig, seed: number): ModelView {
  const rng = new Rng(seed);
  const weights = initGPTWeights(config, rng);
  for (const p of listGPTParameters(weights, config)) {
    const gain = p.name.endsWith(".gain");
    const std = gain ? 0.2 : p.name === "wte" || p.name === "lm_head" ? 0.6 : 0.2;
    for (let i = 0; i < p.data.length; i++) p.data[i] = (gain ? 1 : p.data[i]!) + rng.normal() * std;
  }
  return { config, weights, lora: null, valueHead: null };
}

const ids = (rows: number[][]) => new ort.Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0]!.length]);

function emptyCache(config: GPTConfig, batch: number): Record<string, Tensor> {
  const feeds: Record<string, Tensor> = {};
  // as the browser's player makes it: nHeads heads of dModel / nHeads
  for (let l = 0; l < config.nLayers; l++)
    for (const kv of ["key", "value"])
      feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [batch, config.nHeads, 0, config.dModel / config.nHeads]);
  return feeds;
}

/** One call: the new tokens on top of a cache; returns the logits and the cache to pass next. */
async function step(session: Session, config: GPTConfig, rows: number[][], cache: Record<string, Tensor>) {
  const out = await session.run({ input_ids: ids(rows), ...cache });
  const next: Record<string, Tensor> = {};
  for (let l = 0; l < config.nLayers; l++) for (const kv of ["key", "value"]) next[`past_key_values.${l}.${kv}`] = out[`present.${l}.${kv}`]!;
  return { logits: out.logits!.data as Float32Array, dims: out.logits!.dims, next, present: out["present.0.key"]! };
}

function engineLogits(model: ModelView, rows: number[][]): Float32Array {
  return jsEngine.run({ model, tokens: Int32Array.from(rows.flat()), batch: rows.length, seqLen: rows[0]!.length }).logits;
}

describe.each(cases)("exporting $name", ({ short: name, config }) => {
  const model = randomModel(config, 7);
  const bytes = exportGptToOnnx(config, model.weights);
  const { contextLength: T, vocabSize: V, nHeads: H } = config;
  const hd = config.dModel / H;
  const rng = new Rng(3);
  const sequence = Array.from({ length: T }, () => Math.floor(rng.uniform() * V));
  let session: Session;

  it("keeps the file's interface: the cache of nHeads heads, standard operators only (a GPT's: and three fused), the whole config", async () => {
    const decoded = decodeModel(bytes);
    const llama = config.architecture === "llama";
    expect(decoded.opsetImport).toEqual(llama ? [{ version: ONNX_OPSET }] : [{ version: ONNX_OPSET }, { domain: "com.microsoft", version: 1 }]);
    const graph = decoded.graph;
    expect(graph.input.map((v) => v.name)).toEqual(onnxInputNames(config));
    expect(graph.output.map((v) => v.name)).toEqual(onnxOutputNames(config));
    const shape = (v: (typeof graph.input)[number]) => v.type.tensorType.shape.dim.map((d) => ("dimParam" in d ? d.dimParam : d.dimValue));
    expect(shape(graph.input[1]!)).toEqual(["batch", H, "past_seq", hd]);
    expect(shape(graph.output[0]!)).toEqual(["batch", "seq", V]);
    expect(shape(graph.output[2]!)).toEqual(["batch", H, "total_seq", hd]);
    const contrib = new Set(graph.node.filter((n) => n.domain).map((n) => n.opType));
    expect(contrib).toEqual(new Set(llama ? [] : ["SkipLayerNormalization", "MultiHeadAttention", "FastGelu"]));
    expect(graph.node.filter((n) => n.opType === "Split").every((n) => n.input.length === 2)).toBe(true);
    // tied: one copy of the embedding in the file
    if (config.tiedEmbeddings) expect(graph.initializer.map((t) => t.name)).not.toContain("lm_head");
    const meta = Object.fromEntries((decoded.metadataProps ?? []).map((e) => [e.key, e.value]));
    expect(parseGPTConfig(JSON.parse(meta["tinkerlab.config"]!))).toEqual(config);

    session = await ort.InferenceSession.create(bytes);
    expect(session.inputNames).toEqual(onnxInputNames(config));
  });

  it("computes the engine's logits for a whole sequence, and for a batch of two", async () => {
    const one = await step(session, config, [sequence], emptyCache(config, 1));
    expect(one.dims).toEqual([1, T, V]);
    expect(one.present.dims).toEqual([1, H, T, hd]);
    expect(maxAbsDiff(one.logits, engineLogits(model, [sequence]), name)).toBeLessThan(TOLERANCE);
    const rows = [sequence.slice(0, 20), sequence.slice(12)];
    const two = await step(session, config, rows, emptyCache(config, 2));
    expect(maxAbsDiff(two.logits, engineLogits(model, rows), name)).toBeLessThan(TOLERANCE);
  });

  it("decodes over the cache as the engine's decoder: a prompt, one token at a time, then a few at once", async () => {
    const full = engineLogits(model, [sequence]);
    const decoder = jsEngine.createDecoder(model, 1);
    try {
      const head = 5;
      let { logits, next } = await step(session, config, [sequence.slice(0, head)], emptyCache(config, 1));
      expect(maxAbsDiff(logits, full.subarray(0, head * V), name)).toBeLessThan(TOLERANCE);
      expect(maxAbsDiff(logits.subarray((head - 1) * V), decoder.extend([0], [sequence.slice(0, head)]), name)).toBeLessThan(TOLERANCE);
      for (let t = head; t < T - 4; t++) {
        const r = await step(session, config, [[sequence[t]!]], next);
        expect(r.present.dims).toEqual([1, H, t + 1, hd]);
        expect(maxAbsDiff(r.logits, decoder.extend([0], [[sequence[t]!]]), name), `position ${t}`).toBeLessThan(TOLERANCE);
        expect(maxAbsDiff(r.logits, full.subarray(t * V, (t + 1) * V), name), `position ${t}`).toBeLessThan(TOLERANCE);
        next = r.next;
      }
      // several new tokens on a non-empty cache, up to the last position
      ({ logits } = await step(session, config, [sequence.slice(T - 4)], next));
      expect(maxAbsDiff(logits, full.subarray((T - 4) * V), name)).toBeLessThan(TOLERANCE);
      expect(maxAbsDiff(logits.subarray(3 * V), decoder.extend([0], [sequence.slice(T - 4)]), name)).toBeLessThan(TOLERANCE);
    } finally {
      decoder.dispose();
    }
  });

  it("refuses positions past the context length", async () => {
    const quiet = await ort.InferenceSession.create(bytes, { logSeverityLevel: 4 });
    const { next } = await step(session, config, [sequence], emptyCache(config, 1));
    // the llama's rotary table has no row for it; the GPT's first SkipLayerNormalization gets no position row
    await expect(quiet.run({ input_ids: ids([[1]]), ...next })).rejects.toThrow(/out of data bounds|skip/);
  });
});

it("refuses weights of another shape than the config's, naming the tensor", () => {
  const config = cases[0]!.config;
  const gptWeights = initGPTWeights({ ...config, architecture: undefined, nKvHeads: undefined, ropeScaling: undefined }, new Rng(1));
  expect(() => exportGptToOnnx(config, gptWeights)).toThrow("the weights' wpe has 1024 values, the config needs 0");
  gptWeights.positionEmbedding = new Float32Array(0);
  expect(() => exportGptToOnnx(config, gptWeights)).toThrow("the weights' blocks.0.attn_qkv is [32, 96], the config needs [32, 64]");
});

describe("a llama's graph after onnxruntime's optimizer", () => {
  /** a llama of the dModel-64 bases' sizes, and one of generalist-base's */
  const sizes: GPTConfig = { vocabSize: 262, contextLength: 64, dModel: 64, nLayers: 2, nHeads: 4 };
  const llama: GPTConfig = { ...sizes, architecture: "llama", nKvHeads: 2, dFF: 172, tiedEmbeddings: true };
  const llama128: GPTConfig = { ...llama, dModel: 128, nLayers: 4, dFF: 344, contextLength: 256 };

  it("runs few kernels: at most 38 a layer (GPT-2's: 33), each RMSNorm fused into one, each silu into one", async () => {
    const config = llama;
    const bytes = exportGptToOnnx(config, randomModel(config, 1).weights);
    const kernels = await optimizedKernels(bytes);
    const count = (op: string) => kernels.filter((k) => k === op).length;
    const L = config.nLayers;
    expect(count("SimplifiedLayerNormalization")).toBe(2 * L + 1);
    expect(count("QuickGelu")).toBe(L);
    for (const op of ["Pow", "ReduceMean", "Sqrt", "Div", "Sigmoid"]) expect(count(op), op).toBe(0);
    // the tied output layer's Transpose of wte is folded into a constant: only the keys' and values' remain
    expect(count("Transpose")).toBe(2 * L);
    // once a call: positions, the mask, the rotary tables' rows, the embedding, the final norm and the output layer
    const once = 15;
    expect(kernels.length).toBeLessThanOrEqual(once + 38 * L);
  });

  it("decodes a token without handing work to onnxruntime's thread pool (dModel 64 and 128); a long prompt's forward pass may", async () => {
    for (const config of [llama, llama128]) {
      const { nLayers: L, nHeads: H, dModel: C, contextLength: T } = config;
      const bytes = exportGptToOnnx(config, randomModel(config, 2).weights);
      const past = 63;
      const rng = new Rng(5);
      const feeds: Record<string, Tensor> = { input_ids: ids([[65]]) };
      for (let l = 0; l < L; l++)
        for (const kv of ["key", "value"])
          feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor(
            "float32",
            Float32Array.from({ length: H * past * (C / H) }, () => rng.normal()),
            [1, H, past, C / H],
          );
      expect(await threadPoolUse(bytes, feeds), `dModel ${C}, one token`).toEqual([]);
      if (config === llama128) {
        // the probe sees the pool when it is used
        const prompt = { input_ids: ids([Array.from({ length: T }, (_, i) => (i * 37 + 5) % config.vocabSize)]), ...emptyCache(config, 1) };
        expect(await threadPoolUse(bytes, prompt), `dModel ${C}, a prompt of ${T} tokens`).not.toEqual([]);
      }
    }
  });
});
