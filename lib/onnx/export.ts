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
 * The graph computes what the engine computes, op for op: LayerNormalization with epsilon 1e-5, attention scaled
 * by 1/sqrt(headDim), GELU with the tanh approximation 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))) from
 * Mul/Add/Tanh (opset 17 has no Gelu), and a separate lm_head without bias. Only standard ai.onnx operators.
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
  const axis0 = g.ints("const.axes0", [0]);
  const axis1 = g.ints("const.axes1", [1]);
  const two = g.ints("const.two", [2], true);
  const splitSizes = g.ints("const.split_qkv", [C, C, C]);
  const headsShape = g.ints("const.heads_shape", [0, 0, H, hd]);
  const mergedShape = g.ints("const.merged_shape", [0, 0, C]);
  const attnScale = g.scalar("const.attn_scale", 1 / Math.sqrt(hd));
  const masked = g.scalar("const.masked", -3.4028234663852886e38); // the lowest float32: exp() of it minus the row's max is 0
  const half = g.scalar("const.half", 0.5);
  const oneF = g.scalar("const.one_f", 1);
  const geluKc = g.scalar("const.gelu_k", geluK);
  const geluCc = g.scalar("const.gelu_c", geluC);

  // ---- weights ----
  const linear = (name: string, lin: Linear) => ({
    w: g.floats(`${name}.weight`, [lin.nIn, lin.nOut], lin.weight),
    b: g.floats(`${name}.bias`, [lin.nOut], lin.bias),
  });
  const norm = (name: string, ln: LayerNormWeights) => ({ gain: g.floats(`${name}.gain`, [C], ln.gain), bias: g.floats(`${name}.bias`, [C], ln.bias) });
  const wte = g.floats("wte", [V, C], weights.tokenEmbedding);
  const wpe = g.floats("wpe", [T, C], weights.positionEmbedding);

  // ---- positions and the causal mask ----
  const seqLen = g.op("Gather", [g.op("Shape", ["input_ids"], "ids_shape"), one], "seq_len", { axis: 0 });
  const pastLen = g.op("Gather", [g.op("Shape", ["past_key_values.0.key"], "past_shape"), two], "past_len", { axis: 0 });
  const totalLen = g.op("Add", [pastLen, seqLen], "total_len");
  const positions = g.op("Range", [pastLen, totalLen, one], "positions"); // [seq]
  const keyPositions = g.op("Range", [zero, totalLen, one], "key_positions"); // [total]
  // mask[j, t] = key t is at or before query j
  const mask = g.op("LessOrEqual", [g.op("Unsqueeze", [keyPositions, axis0], "key_row"), g.op("Unsqueeze", [positions, axis1], "query_col")], "causal_mask");

  // ---- embeddings ----
  let x = g.op("Add", [g.op("Gather", [wte, "input_ids"], "tok_emb", { axis: 0 }), g.op("Gather", [wpe, positions], "pos_emb", { axis: 0 })], "x_emb");

  const layerNorm = (input: string, ln: { gain: string; bias: string }, hint: string) =>
    g.op("LayerNormalization", [input, ln.gain, ln.bias], hint, { axis: -1, epsilon: { float: layerNormEps } });
  const affine = (input: string, lin: { w: string; b: string }, hint: string) => g.op("Add", [g.op("MatMul", [input, lin.w], `${hint}_mm`), lin.b], hint);
  const toHeads = (input: string, hint: string) => g.op("Transpose", [g.op("Reshape", [input, headsShape], `${hint}_split`)], hint, { perm: [0, 2, 1, 3] });

  for (let l = 0; l < L; l++) {
    const blk = weights.blocks[l]!;
    const p = `blocks.${l}`;
    const ln1 = norm(`${p}.ln1`, blk.ln1);
    const qkvW = linear(`${p}.attn_qkv`, blk.attn_qkv);
    const projW = linear(`${p}.attn_proj`, blk.attn_proj);
    const ln2 = norm(`${p}.ln2`, blk.ln2);
    const fcW = linear(`${p}.mlp_fc`, blk.mlp_fc);
    const outW = linear(`${p}.mlp_proj`, blk.mlp_proj);

    // attention: queries, keys and values side by side in [C, 3C], heads contiguous within each
    const h = layerNorm(x, ln1, `l${l}_ln1`);
    const qkv = affine(h, qkvW, `l${l}_qkv`);
    const [q, k, v] = g.node("Split", [qkv, splitSizes], { outputs: 3, hint: `l${l}_qkv_split`, attrs: { axis: -1 } }) as [string, string, string];
    const keys = g.node("Concat", [`past_key_values.${l}.key`, toHeads(k, `l${l}_k`)], { outputs: [`present.${l}.key`], attrs: { axis: 2 } })[0]!;
    const values = g.node("Concat", [`past_key_values.${l}.value`, toHeads(v, `l${l}_v`)], { outputs: [`present.${l}.value`], attrs: { axis: 2 } })[0]!;
    const scores = g.op(
      "Mul",
      [g.op("MatMul", [toHeads(q, `l${l}_q`), g.op("Transpose", [keys], `l${l}_kT`, { perm: [0, 1, 3, 2] })], `l${l}_qk`), attnScale],
      `l${l}_scores`,
    );
    const probs = g.op("Softmax", [g.op("Where", [mask, scores, masked], `l${l}_masked`)], `l${l}_probs`, { axis: -1 });
    const heads = g.op("Transpose", [g.op("MatMul", [probs, values], `l${l}_attn`)], `l${l}_attn_t`, { perm: [0, 2, 1, 3] });
    const attnY = g.op("Reshape", [heads, mergedShape], `l${l}_attn_y`);
    const xMid = g.op("Add", [x, affine(attnY, projW, `l${l}_proj`)], `l${l}_x_mid`);

    // MLP with GELU (tanh approximation)
    const fc = affine(layerNorm(xMid, ln2, `l${l}_ln2`), fcW, `l${l}_fc`);
    const cube = g.op("Mul", [fc, g.op("Mul", [fc, fc], `l${l}_fc_sq`)], `l${l}_fc_cube`);
    const inner = g.op("Mul", [geluKc, g.op("Add", [fc, g.op("Mul", [geluCc, cube], `l${l}_gelu_cx3`)], `l${l}_gelu_sum`)], `l${l}_gelu_inner`);
    const gate = g.op("Mul", [half, g.op("Add", [oneF, g.op("Tanh", [inner], `l${l}_gelu_tanh`)], `l${l}_gelu_1p`)], `l${l}_gelu_gate`);
    const gelu = g.op("Mul", [fc, gate], `l${l}_gelu`);
    x = g.op("Add", [xMid, affine(gelu, outW, `l${l}_mlp_out`)], `l${l}_x_out`);
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
