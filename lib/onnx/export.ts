/**
 * A GPT (lib/model/gpt.ts) as an ONNX model, opset 17, that decodes incrementally over a key/value cache:
 *
 *   inputs   input_ids                     int64   [batch, seq]
 *            past_key_values.{i}.key       float32 [batch, nHeads, past_seq, headDim]   (i = 0 … nLayers-1)
 *            past_key_values.{i}.value     float32 [batch, nHeads, past_seq, headDim]
 *   outputs  logits                        float32 [batch, seq, vocabSize]
 *            present.{i}.key               float32 [batch, nHeads, total_seq, headDim]  (total_seq = past_seq + seq)
 *            present.{i}.value             float32 [batch, nHeads, total_seq, headDim]
 *
 * The first call passes caches with past_seq = 0; each later call passes the previous call's present.* as
 * past_key_values.* and only the new tokens. Positions are past_seq + 0 … seq-1, computed in the graph, and the
 * query at position p attends to keys 0 … p. A position at or past contextLength is an error of the runtime
 * (its Gather into the position table fails).
 *
 * The graph computes what the engine computes: LayerNormalization with epsilon 1e-5, attention scaled by
 * 1/sqrt(headDim), GELU with the tanh approximation 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), and a separate
 * lm_head without bias. Only standard ai.onnx operators. It is laid out for onnxruntime's CPU kernels, which on these
 * small models cost per kernel and per hand-off to another thread far more than per multiply:
 *   - positions and the causal mask (an additive bias: 0, or the lowest float) are computed once, not per layer;
 *   - the attention scale is folded into the query weights;
 *   - each head's attention products (scores, then weighted values) are MatMuls of their own, batched over
 *     [batch, seq] only (one product when decoding): onnxruntime runs a MatMul batched over heads on its thread
 *     pool, and waking a pool thread for one token costs more than the product;
 *   - GELU is Pow/Mul/Add/Tanh in the pattern onnxruntime fuses into one FastGelu (opset 17 has no Gelu);
 *   - mlp_proj's bias rides on one more hidden unit whose GELU is constant, so the MLP's output is one MatMul added
 *     onto the residual stream; an MLP too wide for one thread is split in parts (mlpParts);
 *   - linear layers are MatMul + Add on [batch, seq, C]: on [batch·seq, C] onnxruntime fuses them into Gemm, whose
 *     WebGPU kernel in onnxruntime-web is several times slower than its MatMul.
 *
 * Metadata: `tinkerlab.config` (the GPTConfig as JSON), `tinkerlab.tokenizer` (the ByteTokenizer's spec as JSON,
 * which ByteTokenizer.fromJSON rebuilds), and whatever the caller adds.
 */
import type { GPTConfig } from "@/lib/model/config";
import { geluC, geluK, layerNormEps } from "@/lib/model/simd-ops";
import { ByteTokenizer } from "@/lib/model/tokenizer";
import type { GPTWeights, LayerNormWeights, Linear } from "@/lib/model/weights";
import { type AttributeProto, AttributeType, DataType, type Dimension, encodeModel, type NodeProto, type TensorProto, type ValueInfoProto } from "./proto";

export const ONNX_OPSET = 17;
export const ONNX_IR_VERSION = 8;

/** The names of the graph's inputs, in order. */
export function onnxInputNames(config: Pick<GPTConfig, "nLayers">): string[] {
  const names = ["input_ids"];
  for (let i = 0; i < config.nLayers; i++) names.push(`past_key_values.${i}.key`, `past_key_values.${i}.value`);
  return names;
}

/** The names of the graph's outputs, in order. */
export function onnxOutputNames(config: Pick<GPTConfig, "nLayers">): string[] {
  const names = ["logits"];
  for (let i = 0; i < config.nLayers; i++) names.push(`present.${i}.key`, `present.${i}.value`);
  return names;
}

export interface OnnxExportOptions {
  /** producer_name of the model; default "tinkerlab" */
  producer?: string;
  /** more metadata_props entries (tinkerlab.config and tinkerlab.tokenizer are always written) */
  metadata?: Record<string, string>;
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function floatBytes(data: Float32Array): Uint8Array {
  if (littleEndian) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) view.setFloat32(i * 4, data[i], true);
  return out;
}

function int64Bytes(values: readonly number[]): Uint8Array {
  const out = new Uint8Array(values.length * 8);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setBigInt64(i * 8, BigInt(v), true));
  return out;
}

/** An attribute: a whole number is an INT, { float } a FLOAT, an array INTS, a string STRING. */
type Attr = number | { float: number } | number[] | string;

/** Collects nodes and initializers, naming every intermediate value uniquely. */
class GraphBuilder {
  readonly nodes: NodeProto[] = [];
  readonly initializers: TensorProto[] = [];
  private counter = 0;

  /** A float32 initializer of the given shape. */
  floats(name: string, dims: number[], data: Float32Array): string {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (data.length !== expected) throw new Error(`tensor '${name}' has ${data.length} values, shape [${dims}] needs ${expected}`);
    this.initializers.push({ name, dims, dataType: DataType.FLOAT, rawData: floatBytes(data) });
    return name;
  }

  /** An int64 initializer: a scalar (dims []) or a vector. */
  ints(name: string, values: number[], scalar = false): string {
    this.initializers.push({ name, dims: scalar ? [] : [values.length], dataType: DataType.INT64, rawData: int64Bytes(values) });
    return name;
  }

  /** A float32 scalar initializer. */
  scalar(name: string, value: number): string {
    return this.floats(name, [], new Float32Array([value]));
  }

  /** Adds a node; returns its output names (given, or made from `hint`). */
  node(opType: string, inputs: string[], options: { outputs?: string[] | number; hint?: string; attrs?: Record<string, Attr> } = {}): string[] {
    const hint = options.hint ?? opType.toLowerCase();
    const outputs =
      typeof options.outputs === "object"
        ? options.outputs
        : Array.from({ length: options.outputs ?? 1 }, (_, k) => `${hint}_${this.counter}${k ? `_${k}` : ""}`);
    const attribute: AttributeProto[] = Object.entries(options.attrs ?? {}).map(([name, value]) => {
      if (typeof value === "string") return { name, type: AttributeType.STRING, s: new TextEncoder().encode(value) };
      if (Array.isArray(value)) return { name, type: AttributeType.INTS, ints: value };
      if (typeof value === "object") return { name, type: AttributeType.FLOAT, f: value.float };
      if (!Number.isInteger(value)) throw new Error(`attribute '${name}' = ${value}: give a float attribute as { float }`);
      return { name, type: AttributeType.INT, i: value };
    });
    this.nodes.push({ name: `${opType}_${this.counter++}`, opType, input: inputs, output: outputs, attribute });
    return outputs;
  }

  /** A node with one output. */
  op(opType: string, inputs: string[], hint?: string, attrs?: Record<string, Attr>): string {
    return this.node(opType, inputs, { hint, attrs })[0]!;
  }
}

function valueInfo(name: string, elemType: number, dims: (number | string)[]): ValueInfoProto {
  const dim: Dimension[] = dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d }));
  return { name, type: { tensorType: { elemType, shape: { dim } } } };
}

/** attn_qkv with the queries' columns (the first C) scaled by 1/sqrt(headDim), instead of a Mul per layer. */
function scaleQueries(lin: Linear, C: number, scale: number): Linear {
  const weight = Float32Array.from(lin.weight, (w, i) => (i % lin.nOut < C ? w * scale : w));
  const bias = Float32Array.from(lin.bias, (b, i) => (i < C ? b * scale : b));
  return { ...lin, weight, bias };
}

/**
 * onnxruntime's CPU matrix product (MLAS) runs on more than one thread from 64Ki multiply-adds
 * (MLAS_SGEMM_THREAD_COMPLEXITY); one row below that, it stays on the calling thread. With dModel up to 128 and the
 * MLP in parts, every product of a one-token step stays below it.
 */
const SERIAL_GEMM_LIMIT = 64 * 1024;

/** The bias of the MLP's constant hidden unit: gelu(10) is 10 to float precision (tanh(43.6) rounds to 1) in any runtime. */
const CONSTANT_UNIT_INPUT = 10;

/**
 * The MLP in parts of its hidden units, each part's two products under SERIAL_GEMM_LIMIT for one row: fc's columns
 * and mlp_proj's rows for the part's units. One more hidden unit, last, has zero weights and the bias
 * CONSTANT_UNIT_INPUT, so its GELU is a constant; its mlp_proj row is mlp_proj's bias divided by that constant, so the
 * parts' products add up to the MLP's output with its bias.
 */
function mlpParts(fc: Linear, proj: Linear, C: number): { fc: Linear; projWeight: Float32Array }[] {
  const hidden = fc.nOut;
  const units = hidden + 1;
  const perPart = Math.floor((SERIAL_GEMM_LIMIT - 1) / C);
  const count = Math.ceil(units / perPart);
  const size = Math.ceil(units / count);
  const constantOut = 0.5 * CONSTANT_UNIT_INPUT * (1 + Math.tanh(geluK * (CONSTANT_UNIT_INPUT + geluC * CONSTANT_UNIT_INPUT ** 3)));
  const parts: { fc: Linear; projWeight: Float32Array }[] = [];
  for (let start = 0; start < units; start += size) {
    const n = Math.min(size, units - start);
    const fcWeight = new Float32Array(C * n);
    const fcBias = new Float32Array(n);
    const projWeight = new Float32Array(n * C);
    for (let u = 0; u < n; u++) {
      const unit = start + u;
      if (unit === hidden) {
        fcBias[u] = CONSTANT_UNIT_INPUT;
        for (let o = 0; o < C; o++) projWeight[u * C + o] = proj.bias[o]! / constantOut;
      } else {
        fcBias[u] = fc.bias[unit]!;
        for (let c = 0; c < C; c++) fcWeight[c * n + u] = fc.weight[c * hidden + unit]!;
        projWeight.set(proj.weight.subarray(unit * C, (unit + 1) * C), u * C);
      }
    }
    parts.push({ fc: { nIn: C, nOut: n, weight: fcWeight, bias: fcBias }, projWeight });
  }
  return parts;
}

/** The model as the bytes of an .onnx file. */
export function exportGptToOnnx(config: GPTConfig, weights: GPTWeights, options: OnnxExportOptions = {}): Uint8Array {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L, nHeads: H } = config;
  if (C % H !== 0) throw new Error(`dModel=${C} is not a multiple of nHeads=${H}`);
  if (weights.blocks.length !== L) throw new Error(`the weights have ${weights.blocks.length} blocks, the config says nLayers=${L}`);
  const hd = C / H;
  const g = new GraphBuilder();

  // ---- constants ----
  const zero = g.ints("const.zero", [0], true);
  const one = g.ints("const.one", [1], true);
  const two = g.ints("const.two", [2], true);
  const axes12 = g.ints("const.axes12", [1, 2]);
  const headsShape = g.ints("const.heads_shape", [0, 0, 3 * H, hd]);
  const mergedShape = g.ints("const.merged_shape", [0, 0, C]);
  const qkvSplit = g.ints("const.qkv_split", [...new Array<number>(H).fill(1), H, H]);
  // Splits name their sizes: onnxruntime-web's WebGPU Split gets an even split by output count wrong (sizes of 0)
  const headSplit = g.ints("const.head_split", new Array<number>(H).fill(1));
  const masked = g.scalar("const.masked", -3.4028234663852886e38); // the lowest float32: exp() of it minus the row's max is 0
  const zeroF = g.scalar("const.zero_f", 0);
  const gelu = { three: g.scalar("const.three", 3), c: g.scalar("const.gelu_c", geluC), k: g.scalar("const.gelu_k", geluK) };
  const oneF = g.scalar("const.one_f", 1);
  const half = g.scalar("const.half", 0.5);

  // ---- weights ----
  const norm = (name: string, ln: LayerNormWeights) => ({ gain: g.floats(`${name}.gain`, [C], ln.gain), bias: g.floats(`${name}.bias`, [C], ln.bias) });
  const linear = (name: string, lin: Linear) => ({
    w: g.floats(`${name}.weight`, [lin.nIn, lin.nOut], lin.weight),
    b: g.floats(`${name}.bias`, [lin.nOut], lin.bias),
  });
  const wte = g.floats("wte", [V, C], weights.tokenEmbedding);
  const wpe = g.floats("wpe", [T, C], weights.positionEmbedding);

  // ---- shapes, positions and the causal mask, once for all layers ----
  const idsShape = g.op("Shape", ["input_ids"], "ids_shape"); // [batch, seq]
  const seqLen = g.op("Gather", [idsShape, one], "seq_len", { axis: 0 });
  const pastLen = g.op("Gather", [g.op("Shape", ["past_key_values.0.key"], "past_shape"), two], "past_len", { axis: 0 });
  const totalLen = g.op("Add", [pastLen, seqLen], "total_len");
  const positions = g.op("Range", [pastLen, totalLen, one], "positions"); // [seq]
  // allowed[j, 0, t]: key t is at or before query j; as an additive bias [seq, 1, total_seq], 0 where allowed, else the lowest float
  const keyPositions = g.op("Range", [zero, totalLen, one], "key_positions");
  const allowed = g.op("LessOrEqual", [keyPositions, g.op("Unsqueeze", [positions, axes12], "query_positions")], "causal");
  const maskBias = g.op("Where", [allowed, zeroF, masked], "causal_bias");

  // ---- embeddings ----
  let x = g.op("Add", [g.op("Gather", [wte, "input_ids"], "tok_emb", { axis: 0 }), g.op("Gather", [wpe, positions], "pos_emb", { axis: 0 })], "x_emb");

  const layerNorm = (input: string, ln: { gain: string; bias: string }, hint: string) =>
    g.op("LayerNormalization", [input, ln.gain, ln.bias], hint, { axis: -1, epsilon: { float: layerNormEps } });
  /** input · w + c: a MatMul on [batch, seq, ·] (which stays a MatMul in every runtime) and an Add */
  const affine = (input: string, w: string, c: string, hint: string) => g.op("Add", [g.op("MatMul", [input, w], `${hint}_mm`), c], hint);
  // 0.5x · (1 + tanh(sqrt(2/π) · (x + 0.044715 · x^3))), in the form onnxruntime fuses into one FastGelu
  const geluTanh = (input: string, hint: string) => {
    const cube = g.op("Pow", [input, gelu.three], `${hint}_cube`);
    const inner = g.op("Mul", [g.op("Add", [input, g.op("Mul", [cube, gelu.c], `${hint}_cx3`)], `${hint}_sum`), gelu.k], `${hint}_inner`);
    const onePlusTanh = g.op("Add", [g.op("Tanh", [inner], `${hint}_tanh`), oneF], `${hint}_1p`);
    return g.op("Mul", [g.op("Mul", [input, half], `${hint}_half`), onePlusTanh], hint);
  };

  for (let l = 0; l < L; l++) {
    const blk = weights.blocks[l]!;
    const p = `blocks.${l}`;
    const ln1 = norm(`${p}.ln1`, blk.ln1);
    const qkvW = linear(`${p}.attn_qkv`, scaleQueries(blk.attn_qkv, C, 1 / Math.sqrt(hd)));
    const projW = linear(`${p}.attn_proj`, blk.attn_proj);
    const ln2 = norm(`${p}.ln2`, blk.ln2);

    // attention: the Gemm's output as [batch, seq, 3·nHeads, headDim], split into each head's queries and all heads'
    // keys and values; each head's products are MatMuls batched over [batch, seq] only
    const qkv = g.op("Reshape", [affine(layerNorm(x, ln1, `l${l}_ln1`), qkvW.w, qkvW.b, `l${l}_qkv`), headsShape], `l${l}_qkv_heads`);
    const parts = g.node("Split", [qkv, qkvSplit], { outputs: H + 2, hint: `l${l}_qkv`, attrs: { axis: 2 } });
    const queries = parts.slice(0, H); // each [batch, seq, 1, headDim]
    const toCache = (t: string, hint: string) => g.op("Transpose", [t], hint, { perm: [0, 2, 1, 3] }); // [batch, nHeads, seq, headDim]
    const keys = g.node("Concat", [`past_key_values.${l}.key`, toCache(parts[H]!, `l${l}_k`)], { outputs: [`present.${l}.key`], attrs: { axis: 2 } })[0]!;
    const values = g.node("Concat", [`past_key_values.${l}.value`, toCache(parts[H + 1]!, `l${l}_v`)], {
      outputs: [`present.${l}.value`],
      attrs: { axis: 2 },
    })[0]!;
    const headKeys = g.node("Split", [keys, headSplit], { outputs: H, hint: `l${l}_keys`, attrs: { axis: 1 } }); // each [batch, 1, total_seq, headDim]
    const headValues = g.node("Split", [values, headSplit], { outputs: H, hint: `l${l}_values`, attrs: { axis: 1 } });
    const scores = queries.map((q, i) =>
      g.op("MatMul", [q, g.op("Transpose", [headKeys[i]!], `l${l}_h${i}_kT`, { perm: [0, 1, 3, 2] })], `l${l}_h${i}_scores`),
    );
    const maskedScores = g.op("Add", [g.op("Concat", scores, `l${l}_scores`, { axis: 2 }), maskBias], `l${l}_masked`); // [batch, seq, nHeads, total_seq]
    const probs = g.node("Split", [g.op("Softmax", [maskedScores], `l${l}_probs`, { axis: -1 }), headSplit], {
      outputs: H,
      hint: `l${l}_probs`,
      attrs: { axis: 2 },
    });
    const heads = probs.map((pr, i) => g.op("MatMul", [pr, headValues[i]!], `l${l}_h${i}_attn`)); // each [batch, seq, 1, headDim]
    const attnY = g.op("Reshape", [g.op("Concat", heads, `l${l}_attn`, { axis: 2 }), mergedShape], `l${l}_attn_y`);
    const xMid = g.op("Add", [x, affine(attnY, projW.w, projW.b, `l${l}_proj`)], `l${l}_x_mid`);

    // MLP: each part's second product adds onto the residual stream
    const h2 = layerNorm(xMid, ln2, `l${l}_ln2`);
    for (const [i, part] of mlpParts(blk.mlp_fc, blk.mlp_proj, C).entries()) {
      const fc = linear(`${p}.mlp_fc.${i}`, part.fc);
      const out = g.floats(`${p}.mlp_proj.${i}.weight`, [part.fc.nOut, C], part.projWeight);
      x = affine(geluTanh(affine(h2, fc.w, fc.b, `l${l}_fc${i}`), `l${l}_gelu${i}`), out, i === 0 ? xMid : x, `l${l}_x_out${i}`);
    }
  }

  const lnF = norm("ln_f", weights.lnFinal);
  const lmHead = g.floats("lm_head", [C, V], weights.lmHead);
  g.node("MatMul", [layerNorm(x, lnF, "ln_f_out"), lmHead], { outputs: ["logits"] });

  const cacheDims = (len: string) => ["batch", H, len, hd];
  const inputs = [valueInfo("input_ids", DataType.INT64, ["batch", "seq"])];
  const outputs = [valueInfo("logits", DataType.FLOAT, ["batch", "seq", V])];
  for (let l = 0; l < L; l++) {
    inputs.push(valueInfo(`past_key_values.${l}.key`, DataType.FLOAT, cacheDims("past_seq")));
    inputs.push(valueInfo(`past_key_values.${l}.value`, DataType.FLOAT, cacheDims("past_seq")));
    outputs.push(valueInfo(`present.${l}.key`, DataType.FLOAT, cacheDims("total_seq")));
    outputs.push(valueInfo(`present.${l}.value`, DataType.FLOAT, cacheDims("total_seq")));
  }

  const metadata: Record<string, string> = {
    "tinkerlab.config": JSON.stringify({ vocabSize: V, contextLength: T, dModel: C, nLayers: L, nHeads: H }),
    "tinkerlab.tokenizer": JSON.stringify(new ByteTokenizer().toJSON()),
    ...options.metadata,
  };
  return encodeModel({
    irVersion: ONNX_IR_VERSION,
    opsetImport: [{ domain: "", version: ONNX_OPSET }],
    producerName: options.producer ?? "tinkerlab",
    graph: {
      name: "tinkerlab-gpt",
      docString: "GPT with a key/value cache: feed present.* back as past_key_values.* with only the new tokens.",
      node: g.nodes,
      initializer: g.initializers,
      input: inputs,
      output: outputs,
    },
    metadataProps: Object.entries(metadata).map(([key, value]) => ({ key, value })),
  });
}
