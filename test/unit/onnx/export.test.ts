/**
 * A model exported to ONNX (lib/onnx/export.ts) computes what the engine computes, run by onnxruntime-node: the
 * logits of a whole sequence, the same logits one token at a time over the key/value cache, the same greedy
 * continuation as the runtime's sampler, and the same for a LoRA checkpoint merged into its base. The file declares
 * opset 17 with onnxruntime's contrib operators, the I/O names the browser codes against, and the model's config and
 * tokenizer. After onnxruntime's optimizer the graph runs ten kernels a layer (docs/BROWSER.md, "The graph"), which
 * decode the shipped bases' tokens as the engine does. architectures.test.ts does the same for the llama architecture
 * and tied embeddings.
 *
 * onnxruntime-node is an optional dependency that CI installs: if it cannot be loaded, this file fails.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { GPTConfig } from "@/lib/model/config";
import { jsEngine } from "@/lib/model/gpt";
import { Rng } from "@/lib/model/rng";
import { ByteTokenizer } from "@/lib/model/tokenizer";
import type { GPTWeights } from "@/lib/model/weights";
import { KeptCacheEntry } from "@/components/playground/kept-cache";
import { exportGptToOnnx, ONNX_OPSET, onnxInputNames, onnxNewKeyValueNames, onnxOutputNames } from "@/lib/onnx/export";
import { DataType, decodeModel } from "@/lib/onnx/proto";
import { BaseModel } from "@/server/runtime/base-model";
import { baseModelDir, builtinBaseNames } from "@/server/bases";
import { TrainingClient } from "@/server/runtime/training-client";
import { type InferenceSessionOptions, ort, type Session, type Tensor } from "./ort-support";

const TOLERANCE = 1e-4;
const config: GPTConfig = { vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 2, nHeads: 4 };
const hd = config.dModel / config.nHeads;
const prompt = [257, 259, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100];
const dir = mkdtempSync(join(tmpdir(), "tinkerlab-onnx-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The largest difference seen between ONNX and engine logits, reported at the end. */
let worst = 0;
afterAll(() => console.log(`onnx export: max abs logit difference ${worst.toExponential(2)}`));

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  worst = Math.max(worst, max);
  return max;
}

/**
 * A random model whose every parameter matters: GPT-2 initialisation, then non-trivial LayerNorm gains and biases,
 * linear biases, and weights scaled up so the logits spread widely (greedy choices are then far from ties).
 */
function randomModel(seed: number): BaseModel {
  const model = BaseModel.create(config, { seed });
  const rng = new Rng(seed + 100);
  const jitter = (a: Float32Array, around: number, std: number) => {
    for (let i = 0; i < a.length; i++) a[i] = around + rng.normal() * std;
  };
  const scale = (a: Float32Array, by: number) => {
    for (let i = 0; i < a.length; i++) a[i] *= by;
  };
  const w = model.weights;
  scale(w.tokenEmbedding, 20);
  scale(w.positionEmbedding, 20);
  scale(w.lmHead, 30);
  for (const blk of w.blocks) {
    for (const ln of [blk.ln1, blk.ln2]) {
      jitter(ln.gain, 1, 0.2);
      jitter(ln.bias, 0, 0.1);
    }
    for (const lin of [blk.attn_qkv, blk.attn_proj, blk.mlp_fc, blk.mlp_proj]) {
      scale(lin.weight, 8);
      jitter(lin.bias, 0, 0.1);
    }
  }
  jitter(w.lnFinal.gain, 1, 0.2);
  jitter(w.lnFinal.bias, 0, 0.1);
  return model;
}

/** The engine's logits [B*T, V] for rows of one length. */
function engineLogits(weights: GPTWeights, rows: number[][]): Float32Array {
  const T = rows[0]!.length;
  return jsEngine.run({ model: { config, weights, lora: null, valueHead: null }, tokens: Int32Array.from(rows.flat()), batch: rows.length, seqLen: T }).logits;
}

const ids = (rows: number[][]) => new ort.Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0]!.length]);

function emptyCache(batch: number): Record<string, Tensor> {
  const feeds: Record<string, Tensor> = {};
  for (let l = 0; l < config.nLayers; l++)
    for (const kv of ["key", "value"]) feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [batch, config.nHeads, 0, hd]);
  return feeds;
}

/** One call: the new tokens on top of a cache; returns the logits and the cache to pass next. */
async function step(session: Session, rows: number[][], cache: Record<string, Tensor>) {
  const out = await session.run({ input_ids: ids(rows), ...cache });
  const next: Record<string, Tensor> = {};
  for (let l = 0; l < config.nLayers; l++) for (const kv of ["key", "value"]) next[`past_key_values.${l}.${kv}`] = out[`present.${l}.${kv}`]!;
  return { logits: out.logits!.data as Float32Array, dims: out.logits!.dims, next, present: out["present.0.key"]! };
}

/** Greedy continuation through the ONNX model: the prompt, then one token at a time over the cache. */
async function onnxGreedy(session: Session, tokens: number[], n: number): Promise<number[]> {
  const V = config.vocabSize;
  let { logits, next } = await step(session, [tokens], emptyCache(1));
  let last = logits.subarray(logits.length - V);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let j = 1; j < V; j++) if (last[j]! > last[best]!) best = j;
    out.push(best);
    if (i === n - 1) break;
    ({ logits, next } = await step(session, [[best]], next));
    last = logits;
  }
  return out;
}

const model = randomModel(11);
const bytes = exportGptToOnnx(model.config, model.weights, { metadata: { "tinkerlab.model": "random" } });
let session: Session;

describe("exporting a GPT to ONNX", () => {
  it("declares opset 17 and onnxruntime's contrib operators, IR 8, the cache I/O with symbolic dimensions, and the config and tokenizer", async () => {
    const decoded = decodeModel(bytes);
    expect(decoded.irVersion).toBe(8);
    expect(decoded.opsetImport).toEqual([{ version: ONNX_OPSET }, { domain: "com.microsoft", version: 1 }]);
    expect(ONNX_OPSET).toBe(17);
    const graph = decoded.graph;
    expect(graph.input.map((v) => v.name)).toEqual([
      "input_ids",
      "past_key_values.0.key",
      "past_key_values.0.value",
      "past_key_values.1.key",
      "past_key_values.1.value",
    ]);
    expect(graph.output.map((v) => v.name)).toEqual([
      "logits",
      "present.0.key",
      "present.0.value",
      "present.1.key",
      "present.1.value",
      "new_key_values.0.key",
      "new_key_values.0.value",
      "new_key_values.1.key",
      "new_key_values.1.value",
    ]);
    expect(graph.input.map((v) => v.name)).toEqual(onnxInputNames(config));
    expect(graph.output.map((v) => v.name)).toEqual(onnxOutputNames(config));
    const shape = (v: (typeof graph.input)[number]) => v.type.tensorType.shape.dim.map((d) => ("dimParam" in d ? d.dimParam : d.dimValue));
    expect(graph.input[0]!.type.tensorType.elemType).toBe(DataType.INT64);
    expect(shape(graph.input[0]!)).toEqual(["batch", "seq"]);
    expect(shape(graph.input[1]!)).toEqual(["batch", 4, "past_seq", 8]);
    expect(graph.output[0]!.type.tensorType.elemType).toBe(DataType.FLOAT);
    expect(shape(graph.output[0]!)).toEqual(["batch", "seq", 262]);
    expect(shape(graph.output[1]!)).toEqual(["batch", 4, "total_seq", 8]);
    // standard operators and three of onnxruntime's fused ones, which its WebAssembly and WebGPU kernels run; no Gelu (opset 20)
    const ops = new Set(graph.node.map((n) => n.opType));
    const contrib = new Set(graph.node.filter((n) => n.domain).map((n) => `${n.domain}.${n.opType}`));
    expect(contrib).toEqual(new Set(["com.microsoft.SkipLayerNormalization", "com.microsoft.MultiHeadAttention", "com.microsoft.FastGelu"]));
    expect(ops.has("Gelu")).toBe(false);
    // every Split names its sizes: onnxruntime-web's WebGPU kernel gets an even split by output count wrong
    expect(graph.node.filter((n) => n.opType === "Split").every((n) => n.input.length === 2)).toBe(true);

    const meta = Object.fromEntries((decoded.metadataProps ?? []).map((e) => [e.key, e.value]));
    expect(JSON.parse(meta["tinkerlab.config"]!)).toEqual(config);
    const tokenizer = JSON.parse(meta["tinkerlab.tokenizer"]!);
    expect(tokenizer).toMatchObject({ type: "byte", vocabSize: 262, specialTokens: { bos: 257, endOfTurn: 261 } });
    expect(ByteTokenizer.fromJSON(tokenizer).vocabSize).toBe(262);
    expect(meta["tinkerlab.model"]).toBe("random");

    session = await ort.InferenceSession.create(bytes);
    expect(session.inputNames).toEqual(onnxInputNames(config));
    expect(session.outputNames).toEqual(onnxOutputNames(config));
  });

  it("computes the engine's logits for a whole sequence, and for a batch of two", async () => {
    const one = await step(session, [prompt], emptyCache(1));
    expect(one.dims).toEqual([1, prompt.length, config.vocabSize]);
    expect(one.present.dims).toEqual([1, config.nHeads, prompt.length, hd]);
    expect(maxAbsDiff(one.logits, engineLogits(model.weights, [prompt]))).toBeLessThan(TOLERANCE);

    const rows = [prompt, [...prompt].reverse()];
    const two = await step(session, rows, emptyCache(2));
    expect(two.dims).toEqual([2, prompt.length, config.vocabSize]);
    expect(maxAbsDiff(two.logits, engineLogits(model.weights, rows))).toBeLessThan(TOLERANCE);
  });

  it("decodes incrementally: a prompt, then one token at a time (and a few at once) over the cache, as the full sequence", async () => {
    const V = config.vocabSize;
    const sequence = [...prompt, 10, 84, 104, 101, 32, 101, 110, 100, 46, 261, 257, 33];
    const full = engineLogits(model.weights, [sequence]);
    const head = 5;
    let { logits, next } = await step(session, [sequence.slice(0, head)], emptyCache(1));
    expect(maxAbsDiff(logits, full.subarray(0, head * V))).toBeLessThan(TOLERANCE);
    for (let t = head; t < 20; t++) {
      const r = await step(session, [[sequence[t]!]], next);
      expect(r.present.dims).toEqual([1, config.nHeads, t + 1, hd]);
      expect(maxAbsDiff(r.logits, full.subarray(t * V, (t + 1) * V))).toBeLessThan(TOLERANCE);
      next = r.next;
    }
    // several new tokens on a non-empty cache: each attends to the cache and to the new tokens before it
    ({ logits } = await step(session, [sequence.slice(20, 26)], next));
    expect(maxAbsDiff(logits, full.subarray(20 * V, 26 * V))).toBeLessThan(TOLERANCE);
  });

  it("hands out each step's new keys and values, which appended to the cache by the worker give present.* and the same logits", async () => {
    const V = config.vocabSize;
    const H = config.nHeads;
    const sequence = [...prompt, 10, 84, 104, 101, 32, 101, 110, 100];
    const full = engineLogits(model.weights, [sequence]);
    const names = onnxNewKeyValueNames(config);
    const fetches = ["logits", ...names];
    // the cache kept as the playground keeps it on WASM: only logits and new_key_values.* are fetched
    const kept = names.map(() => new KeptCacheEntry(H, hd, config.contextLength));
    const keptFeeds = () => {
      const feeds: Record<string, Tensor> = {};
      names.forEach(
        (_, i) =>
          (feeds[`past_key_values.${Math.floor(i / 2)}.${i % 2 ? "value" : "key"}`] = new ort.Tensor("float32", kept[i]!.data, [1, H, kept[i]!.length, hd])),
      );
      return feeds;
    };
    let position = 0;
    for (const chunk of [sequence.slice(0, 6), ...sequence.slice(6, 12).map((t) => [t]), sequence.slice(12)]) {
      const fetched = await session.run({ input_ids: ids([chunk]), ...keptFeeds() }, fetches);
      expect(Object.keys(fetched).sort()).toEqual([...fetches].sort());
      expect(fetched[names[0]!]!.dims).toEqual([1, chunk.length, config.dModel]);
      expect(maxAbsDiff(fetched.logits!.data as Float32Array, full.subarray(position * V, (position + chunk.length) * V))).toBeLessThan(TOLERANCE);
      const reference = await session.run({ input_ids: ids([chunk]), ...keptFeeds() });
      names.forEach((name, i) => {
        kept[i]!.append(fetched[name]!.data as Float32Array, chunk.length);
        // exactly what the model's own present.* holds
        expect(Array.from(kept[i]!.data)).toEqual(Array.from(reference[`present.${Math.floor(i / 2)}.${i % 2 ? "value" : "key"}`]!.data as Float32Array));
      });
      position += chunk.length;
      expect(kept[0]!.length).toBe(position);
    }
    // emptied for the next generation, its buffers kept
    kept[0]!.reset();
    expect(kept[0]!.data.length).toBe(0);
    kept[0]!.append(new Float32Array(config.contextLength * config.dModel), config.contextLength);
    expect(() => kept[0]!.append(new Float32Array(config.dModel), 1)).toThrow(/at most 32 positions/);
    expect(position).toBe(sequence.length);
  });

  it("refuses positions past the context length", async () => {
    const quiet = await ort.InferenceSession.create(bytes, { logSeverityLevel: 4 }); // the runtime would log the failure too
    const tooLong = Array.from({ length: config.contextLength + 1 }, (_, i) => i % 256);
    // wpe has fewer rows than the tokens then, which the first SkipLayerNormalization refuses
    await expect(quiet.run({ input_ids: ids([tooLong]), ...emptyCache(1) })).rejects.toThrow(/skip/);
    const { next } = await step(session, [tooLong.slice(0, config.contextLength)], emptyCache(1));
    await expect(quiet.run({ input_ids: ids([[1]]), ...next })).rejects.toThrow(/skip/);
  });

  it("continues a prompt greedily as the runtime's sampler does at temperature 0", async () => {
    const n = config.contextLength - prompt.length;
    const sampled = await new TrainingClient(model).sample([prompt], 1, { temperature: 0, maxTokens: n, stop: [] });
    const expected = sampled.samples[0]![0]!.tokens;
    expect(expected).toHaveLength(n);
    expect(new Set(expected).size).toBeGreaterThan(3); // a real continuation, not one token repeated
    expect(await onnxGreedy(session, prompt, n)).toEqual(expected);
  });

  it("exports a LoRA checkpoint merged into its base, which computes the trained policy", async () => {
    const client = new TrainingClient(model, { lora: { rank: 4, alpha: 8 }, seed: 3 });
    const data = { tokens: [prompt, [257, 259, 49, 43, 49, 61, 50, 261]] };
    const before = await client.forward(data);
    for (let i = 0; i < 3; i++) {
      await client.forwardBackward(data, "cross_entropy");
      await client.optimStep({ lr: 2e-2 });
    }
    await client.saveState(join(dir, "lora"));
    const merged = BaseModel.fromCheckpoint(join(dir, "lora"), model);
    // the adapter moved the weights
    const moved = maxAbsDiffQuiet(merged.weights.blocks[0]!.attn_qkv.weight, model.weights.blocks[0]!.attn_qkv.weight);
    expect(moved).toBeGreaterThan(1e-3);

    const loraSession = await ort.InferenceSession.create(exportGptToOnnx(merged.config, merged.weights));
    const { logits } = await step(loraSession, [prompt], emptyCache(1));
    expect(maxAbsDiff(logits, engineLogits(merged.weights, [prompt]))).toBeLessThan(TOLERANCE);
    expect(maxAbsDiffQuiet(logits, engineLogits(model.weights, [prompt]))).toBeGreaterThan(1e-2);

    // and the ONNX logprobs are the LoRA client's own (adapter unmerged) for the same tokens
    const after = (await client.forward({ tokens: [prompt] })).logprobs[0]!;
    const V = config.vocabSize;
    for (let t = 1; t < prompt.length; t++) {
      const row = logits.subarray((t - 1) * V, t * V);
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
      expect(Math.abs(row[prompt[t]!]! - lse - after[t]!)).toBeLessThan(TOLERANCE);
    }
    expect(Math.abs(after[3]! - before.logprobs[0]![3]!)).toBeGreaterThan(1e-4);

    // greedy decoding through the merged model matches the LoRA client's sampler
    const n = 10;
    const sampled = await client.sample([prompt], 1, { temperature: 0, maxTokens: n, stop: [] });
    expect(await onnxGreedy(loraSession, prompt, n)).toEqual(sampled.samples[0]![0]!.tokens);
  });

  it("runs ten kernels a layer after onnxruntime's optimizer, four for the positions and two for the output", async () => {
    const optimized = join(dir, "optimized.onnx");
    await ort.InferenceSession.create(bytes, { optimizedModelFilePath: optimized, logSeverityLevel: 3 } as InferenceSessionOptions);
    const kernels = decodeModel(new Uint8Array(readFileSync(optimized))).graph.node.map((n) => n.opType);
    const layer = [
      "SkipLayerNormalization",
      "MatMul",
      "Add",
      "Split",
      "MultiHeadAttention",
      "MatMul",
      "SkipLayerNormalization",
      "MatMul",
      "FastGelu",
      "MatMul",
    ];
    // the positions' rows of wpe (Shape, Shape, Add, Slice), the tokens' (Gather); each layer; ln_f and lm_head
    expect(kernels).toEqual([
      "Shape",
      "Shape",
      "Add",
      "Slice",
      "Gather",
      ...Array.from({ length: config.nLayers }, () => layer).flat(),
      "SkipLayerNormalization",
      "MatMul",
    ]);
  });
});

describe("the shipped bases", () => {
  it("each exports and computes the engine's logits over its whole context (within 1e-5 of the largest logit)", async () => {
    const report: string[] = [];
    for (const name of builtinBaseNames()) {
      const base = BaseModel.load(baseModelDir(name));
      const { contextLength: T, nLayers: L, nHeads: H, dModel: C, vocabSize: V } = base.config;
      const tokens = Array.from({ length: T }, (_, i) => (i * 37 + 5) % V);
      const feeds: Record<string, Tensor> = { input_ids: ids([tokens]) };
      for (let l = 0; l < L; l++)
        for (const kv of ["key", "value"]) feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [1, H, 0, C / H]);
      const got = (await (await ort.InferenceSession.create(exportGptToOnnx(base.config, base.weights))).run(feeds)).logits!.data as Float32Array;
      const expected = jsEngine.run({
        model: { config: base.config, weights: base.weights, lora: null, valueHead: null },
        tokens: Int32Array.from(tokens),
        batch: 1,
        seqLen: T,
      });
      const largest = expected.logits.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
      const diff = maxAbsDiffQuiet(got, expected.logits);
      report.push(`${name} ${diff.toExponential(2)} (largest logit ${largest.toFixed(1)})`);
      expect(diff, name).toBeLessThan(1e-5 * Math.max(1, largest));
    }
    expect(report.length).toBeGreaterThan(0);
    console.log(`onnx export, max abs logit difference of the shipped bases: ${report.join(", ")}`);
  });
});

function maxAbsDiffQuiet(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}
