/**
 * A model of the engine (lib/model/gpt.ts), either architecture, as an ONNX model, opset 17, that decodes
 * incrementally over a key/value cache:
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
 * query at position p attends to keys 0 … p. A position at or past contextLength is an error of the runtime (the
 * GPT graph's first SkipLayerNormalization gets fewer position rows than tokens; the llama graph's Gather into its
 * rotary table fails). The cache holds nHeads heads in either architecture, so a reader of the file needs only
 * nHeads and dModel from its config to make an empty one.
 *
 * The graph computes what the engine computes. For "gpt" (gptGraph): LayerNormalization with epsilon 1e-5,
 * attention scaled by 1/sqrt(headDim), GELU with the tanh approximation 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))),
 * and lm_head without bias (or wte transposed, when tied), in opset 17 and three of onnxruntime's fused contrib
 * operators (com.microsoft: SkipLayerNormalization, MultiHeadAttention, FastGelu), which both its WebAssembly (CPU)
 * and WebGPU kernels run: ten kernels a layer. onnxruntime-web on these small models costs per kernel far more than
 * per multiply: the graph of standard operators took 163 kernels a step on generalist-base, this one 47.
 *
 * For "llama" (llamaGraph): RMSNorm, rotary positions, grouped-query attention, SwiGLU, in standard ai.onnx
 * operators only, laid out for onnxruntime's CPU kernels:
 *   - positions and the causal mask (an additive bias: 0, or the lowest float) are computed once, not per layer;
 *   - the attention scale is folded into the query weights;
 *   - each head's attention products (scores, then weighted values) are MatMuls of their own, batched over
 *     [batch, seq] only (one product when decoding): onnxruntime runs a MatMul batched over heads on its thread
 *     pool, and waking a pool thread for one token costs more than the product;
 *   - an MLP too wide for one thread is split in parts (swigluParts);
 *   - linear layers are MatMul + Add on [batch, seq, C]: on [batch·seq, C] onnxruntime fuses them into Gemm, whose
 *     WebGPU kernel in onnxruntime-web is several times slower than its MatMul.
 *
 * Metadata: `tinkerlab.config` (the GPTConfig as JSON), `tinkerlab.tokenizer` (the model's tokenizer as a checkpoint
 * stores it, which tokenizerFromSpec rebuilds: the byte tokenizer's unless `options.tokenizer` says otherwise), and
 * whatever the caller adds.
 */
import { type GPTConfig, gptConfigSchema, type ModelShape, modelShape, parseGPTConfig } from "@/lib/model/config";
import { ropeTable } from "@/lib/model/llama-ops";
import { layerNormEps } from "@/lib/model/simd-ops";
import { ByteTokenizer, type Tokenizer } from "@/lib/model/tokenizer";
import { tokenizerSpec } from "@/lib/model/tokenizer-spec";
import type { GPTWeights, LayerNormWeights, Linear } from "@/lib/model/weights";
import { onnxNewKeyValueNames } from "./names";
import { type AttributeProto, AttributeType, DataType, type Dimension, encodeModel, type NodeProto, type TensorProto, type ValueInfoProto } from "./proto";

export { onnxInputNames, onnxNewKeyValueNames, onnxOutputNames } from "./names";

export const ONNX_OPSET = 17;

/**
 * The graph's layout, raised whenever the same weights export to another graph, so that a file exported by an
 * earlier layout is not served from a cache (server/onnx.ts keeps each layout's files apart). 2: the GPT graph in
 * fused contrib operators (SkipLayerNormalization, MultiHeadAttention, FastGelu); 3: and its new_key_values.* outputs.
 */
export const ONNX_GRAPH_LAYOUT = 3;
const ONNX_IR_VERSION = 8;

export interface OnnxExportOptions {
  /** producer_name of the model; default "tinkerlab" */
  producer?: string;
  /** the model's tokenizer, written as `tinkerlab.tokenizer`; default the byte tokenizer */
  tokenizer?: Tokenizer;
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
  /** the operator domains other than ai.onnx that the nodes use */
  readonly domains = new Set<string>();
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
  node(
    opType: string,
    inputs: string[],
    options: { outputs?: string[] | number; hint?: string; attrs?: Record<string, Attr>; domain?: string } = {},
  ): string[] {
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
    const domain = options.domain ? { domain: options.domain } : {};
    if (options.domain) this.domains.add(options.domain);
    this.nodes.push({ name: `${opType}_${this.counter++}`, opType, ...domain, input: inputs, output: outputs, attribute });
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

/**
 * attn_qkv of a llama block ([C, C + 2·kvDim]: q, then nKvHeads key heads, then as many value heads) in GPT-2's
 * layout [C, 3C]: every query head gets its own copy of the key and value head it shares, so the graph is plain
 * multi-head attention and the cache holds nHeads heads, as the engine's does. The queries are scaled as in
 * scaleQueries. Copying costs (nHeads - nKvHeads)·headDim·2 columns of weights and product, and no kernel.
 */
function expandKeyValueHeads(lin: Linear, C: number, H: number, s: ModelShape, scale: number): Linear {
  const hd = s.headDim;
  const group = H / s.nKvHeads;
  const nOut = 3 * C;
  // source column of each output column
  const from = new Int32Array(nOut);
  for (let c = 0; c < C; c++) from[c] = c;
  for (let h = 0; h < H; h++) {
    const kv = Math.floor(h / group) * hd;
    for (let d = 0; d < hd; d++) {
      from[C + h * hd + d] = C + kv + d;
      from[2 * C + h * hd + d] = C + s.kvDim + kv + d;
    }
  }
  const weight = new Float32Array(C * nOut);
  const bias = new Float32Array(nOut);
  for (let o = 0; o < nOut; o++) {
    const f = from[o]!;
    const k = o < C ? scale : 1;
    bias[o] = lin.bias[f]! * k;
    for (let i = 0; i < C; i++) weight[i * nOut + o] = lin.weight[i * lin.nOut + f]! * k;
  }
  return { nIn: C, nOut, weight, bias };
}

/**
 * onnxruntime's CPU matrix product (MLAS) runs on more than one thread from 64Ki multiply-adds
 * (MLAS_SGEMM_THREAD_COMPLEXITY); one row below that, it stays on the calling thread. With dModel up to 128 and the
 * MLP in parts, every product of a one-token step stays below it.
 */
const SERIAL_GEMM_LIMIT = 64 * 1024;

/** The gate's bias of SwiGLU's constant hidden unit (its up projection's bias is 1): silu(20) is 20 to float precision. */
const CONSTANT_GATE_INPUT = 20;

/**
 * Parts pay only while they are few (generalist-base's MLP takes two): a wider MLP, a Hugging Face base's, has
 * products worth the thread pool, and hundreds of units a part would only add kernels.
 */
const MAX_MLP_PARTS = 4;

/**
 * `units` hidden units in the fewest parts of at most `perPart`, as even as can be, or in one part where that takes
 * more than MAX_MLP_PARTS: [first unit, count] each.
 */
function partRanges(units: number, perPart: number): [number, number][] {
  const fewest = Math.ceil(units / perPart);
  const count = fewest > MAX_MLP_PARTS ? 1 : fewest;
  const size = Math.ceil(units / count);
  const ranges: [number, number][] = [];
  for (let start = 0; start < units; start += size) ranges.push([start, Math.min(size, units - start)]);
  return ranges;
}

/**
 * SwiGLU's MLP in parts of its hidden units, each part's two products under SERIAL_GEMM_LIMIT for one row: each part's fc has the gates of its n units, then their up projections
 * ([C, 2n]). With mlpBias, one more unit, last, has zero weights, the gate bias CONSTANT_GATE_INPUT and the up bias
 * 1, so silu(gate)·up is the constant silu(CONSTANT_GATE_INPUT), and its mlp_proj row carries mlp_proj's bias.
 */
function swigluParts(fc: Linear, proj: Linear, C: number, dFF: number, bias: boolean): { fc: Linear; projWeight: Float32Array }[] {
  const constantOut = CONSTANT_GATE_INPUT / (1 + Math.exp(-CONSTANT_GATE_INPUT));
  return partRanges(dFF + (bias ? 1 : 0), Math.floor((SERIAL_GEMM_LIMIT - 1) / (2 * C))).map(([start, n]) => {
    const fcWeight = new Float32Array(C * 2 * n);
    const fcBias = new Float32Array(2 * n);
    const projWeight = new Float32Array(n * C);
    for (let u = 0; u < n; u++) {
      const unit = start + u;
      if (unit === dFF) {
        fcBias[u] = CONSTANT_GATE_INPUT;
        fcBias[n + u] = 1;
        for (let o = 0; o < C; o++) projWeight[u * C + o] = proj.bias[o]! / constantOut;
      } else {
        fcBias[u] = fc.bias[unit]!;
        fcBias[n + u] = fc.bias[dFF + unit]!;
        for (let c = 0; c < C; c++) {
          fcWeight[c * 2 * n + u] = fc.weight[c * 2 * dFF + unit]!;
          fcWeight[c * 2 * n + n + u] = fc.weight[c * 2 * dFF + dFF + unit]!;
        }
        projWeight.set(proj.weight.subarray(unit * C, (unit + 1) * C), u * C);
      }
    }
    return { fc: { nIn: C, nOut: 2 * n, weight: fcWeight, bias: fcBias }, projWeight };
  });
}

/** Every array of the weights has the size the config gives it, or an error names the first that has not. */
function checkWeights(config: GPTConfig, s: ModelShape, w: GPTWeights): void {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L } = config;
  if (w.blocks.length !== L) throw new Error(`the weights have ${w.blocks.length} blocks, the config says nLayers=${L}`);
  const check = (name: string, a: Float32Array, n: number) => {
    if (a.length !== n) throw new Error(`the weights' ${name} has ${a.length} values, the config needs ${n}`);
  };
  check("wte", w.tokenEmbedding, V * C);
  check("wpe", w.positionEmbedding, s.learnedPositions ? T * C : 0);
  check("lm_head", w.lmHead, s.tied ? 0 : C * V);
  const linear = (name: string, lin: Linear, nIn: number, nOut: number) => {
    if (lin.nIn !== nIn || lin.nOut !== nOut) throw new Error(`the weights' ${name} is [${lin.nIn}, ${lin.nOut}], the config needs [${nIn}, ${nOut}]`);
    check(`${name}.weight`, lin.weight, nIn * nOut);
    check(`${name}.bias`, lin.bias, nOut);
  };
  w.blocks.forEach((b, l) => {
    linear(`blocks.${l}.attn_qkv`, b.attn_qkv, C, C + 2 * s.kvDim);
    linear(`blocks.${l}.attn_proj`, b.attn_proj, C, C);
    linear(`blocks.${l}.mlp_fc`, b.mlp_fc, C, s.llama ? 2 * s.dFF : s.dFF);
    linear(`blocks.${l}.mlp_proj`, b.mlp_proj, s.dFF, C);
  });
}

/**
 * The config as the file's metadata: the five fields every config has, in the order files have always had them, then
 * each optional field the config sets, so a reader rebuilds the same shape (parseGPTConfig) from it.
 */
function configMetadata(config: GPTConfig): string {
  const { vocabSize, contextLength, dModel, nLayers, nHeads } = config;
  const out: Record<string, unknown> = { vocabSize, contextLength, dModel, nLayers, nHeads };
  for (const key of Object.keys(gptConfigSchema.shape) as (keyof GPTConfig)[]) if (!(key in out) && config[key] !== undefined) out[key] = config[key];
  return JSON.stringify(out);
}

/** protobuf's limit on one message (2 GiB), less room for the graph's nodes and names. */
const MAX_FILE_BYTES = 2 ** 31 - 2 ** 24;

/** The lowest float32, a masked score's bias: exp() of it minus the row's max is 0. */
const MASKED = -3.4028234663852886e38;

/**
 * The query positions past_seq … past_seq+seq-1 and the causal mask as an additive bias [seq, 1, total_seq]
 * (0 where key t is at or before query j, else the lowest float), once for all layers.
 */
function positionsAndMask(g: GraphBuilder, c: { zero: string; one: string; two: string; axes12: string; zeroF: string; masked: string }) {
  const idsShape = g.op("Shape", ["input_ids"], "ids_shape"); // [batch, seq]
  const seqLen = g.op("Gather", [idsShape, c.one], "seq_len", { axis: 0 });
  const pastLen = g.op("Gather", [g.op("Shape", ["past_key_values.0.key"], "past_shape"), c.two], "past_len", { axis: 0 });
  const totalLen = g.op("Add", [pastLen, seqLen], "total_len");
  const positions = g.op("Range", [pastLen, totalLen, c.one], "positions"); // [seq]
  const keyPositions = g.op("Range", [c.zero, totalLen, c.one], "key_positions");
  const allowed = g.op("LessOrEqual", [keyPositions, g.op("Unsqueeze", [positions, c.axes12], "query_positions")], "causal");
  const maskBias = g.op("Where", [allowed, c.zeroF, c.masked], "causal_bias");
  return { positions, maskBias };
}

/**
 * Layer l's causal attention over its cache: from each head's queries ([batch, seq, 1, headDim], already scaled) and
 * the new keys and values ([batch, seq, nHeads, headDim]) to its output [batch, seq, C]. Writes present.{l}.*. Each
 * head's products are MatMuls batched over [batch, seq] only.
 */
function attention(
  g: GraphBuilder,
  l: number,
  queries: string[],
  newKeys: string,
  newValues: string,
  maskBias: string,
  c: { headSplit: string; mergedShape: string },
): string {
  const H = queries.length;
  const toCache = (t: string, hint: string) => g.op("Transpose", [t], hint, { perm: [0, 2, 1, 3] }); // [batch, nHeads, seq, headDim]
  const keys = g.node("Concat", [`past_key_values.${l}.key`, toCache(newKeys, `l${l}_k`)], { outputs: [`present.${l}.key`], attrs: { axis: 2 } })[0]!;
  const values = g.node("Concat", [`past_key_values.${l}.value`, toCache(newValues, `l${l}_v`)], {
    outputs: [`present.${l}.value`],
    attrs: { axis: 2 },
  })[0]!;
  const headKeys = g.node("Split", [keys, c.headSplit], { outputs: H, hint: `l${l}_keys`, attrs: { axis: 1 } }); // each [batch, 1, total_seq, headDim]
  const headValues = g.node("Split", [values, c.headSplit], { outputs: H, hint: `l${l}_values`, attrs: { axis: 1 } });
  const scores = queries.map((q, i) => g.op("MatMul", [q, g.op("Transpose", [headKeys[i]!], `l${l}_h${i}_kT`, { perm: [0, 1, 3, 2] })], `l${l}_h${i}_scores`));
  const maskedScores = g.op("Add", [g.op("Concat", scores, `l${l}_scores`, { axis: 2 }), maskBias], `l${l}_masked`); // [batch, seq, nHeads, total_seq]
  const probs = g.node("Split", [g.op("Softmax", [maskedScores], `l${l}_probs`, { axis: -1 }), c.headSplit], {
    outputs: H,
    hint: `l${l}_probs`,
    attrs: { axis: 2 },
  });
  const heads = probs.map((pr, i) => g.op("MatMul", [pr, headValues[i]!], `l${l}_h${i}_attn`)); // each [batch, seq, 1, headDim]
  return g.op("Reshape", [g.op("Concat", heads, `l${l}_attn`, { axis: 2 }), c.mergedShape], `l${l}_attn_y`);
}

/** The model as the bytes of an .onnx file. */
export function exportGptToOnnx(config: GPTConfig, weights: GPTWeights, options: OnnxExportOptions = {}): Uint8Array {
  parseGPTConfig(config); // the shape rules (heads divide the width, an even head width for rotary positions)
  const { vocabSize: V, nLayers: L, nHeads: H } = config;
  const s = modelShape(config);
  checkWeights(config, s, weights);
  const hd = s.headDim;
  const g = new GraphBuilder();
  if (s.llama) llamaGraph(g, config, s, weights);
  else gptGraph(g, config, s, weights);

  const weightBytes = g.initializers.reduce((n, t) => n + (t.rawData?.length ?? 0), 0);
  if (weightBytes > MAX_FILE_BYTES) {
    throw new Error(
      `the ONNX file would hold ${(weightBytes / 2 ** 30).toFixed(2)} GiB of weights, over protobuf's 2 GiB limit on one file; ` +
        "this exporter writes no external data files, so it cannot export a model this large",
    );
  }

  const cacheDims = (len: string) => ["batch", H, len, hd];
  const inputs = [valueInfo("input_ids", DataType.INT64, ["batch", "seq"])];
  const outputs = [valueInfo("logits", DataType.FLOAT, ["batch", "seq", V])];
  for (let l = 0; l < L; l++) {
    inputs.push(valueInfo(`past_key_values.${l}.key`, DataType.FLOAT, cacheDims("past_seq")));
    inputs.push(valueInfo(`past_key_values.${l}.value`, DataType.FLOAT, cacheDims("past_seq")));
    outputs.push(valueInfo(`present.${l}.key`, DataType.FLOAT, cacheDims("total_seq")));
    outputs.push(valueInfo(`present.${l}.value`, DataType.FLOAT, cacheDims("total_seq")));
  }
  if (!s.llama) for (const name of onnxNewKeyValueNames(config)) outputs.push(valueInfo(name, DataType.FLOAT, ["batch", "seq", config.dModel]));

  const metadata: Record<string, string> = {
    "tinkerlab.config": configMetadata(config),
    "tinkerlab.tokenizer": JSON.stringify(tokenizerSpec(options.tokenizer ?? new ByteTokenizer())),
    ...options.metadata,
  };
  return encodeModel({
    irVersion: ONNX_IR_VERSION,
    opsetImport: [{ domain: "", version: ONNX_OPSET }, ...[...g.domains].map((domain) => ({ domain, version: 1 }))],
    producerName: options.producer ?? "tinkerlab",
    graph: {
      name: s.llama ? "tinkerlab-llama" : "tinkerlab-gpt",
      docString: `${s.llama ? "Llama" : "GPT"} with a key/value cache: feed present.* back as past_key_values.* with only the new tokens.`,
      node: g.nodes,
      initializer: g.initializers,
      input: inputs,
      output: outputs,
    },
    metadataProps: Object.entries(metadata).map(([key, value]) => ({ key, value })),
  });
}

/** The operator domain of onnxruntime's contrib operators, which its CPU (WebAssembly) and WebGPU kernels run. */
const MS_DOMAIN = "com.microsoft";

/**
 * GPT-2's block: learned positions, LayerNorm, GELU, in onnxruntime's fused contrib operators (com.microsoft), ten
 * kernels a layer where standard operators took over thirty:
 *   - SkipLayerNormalization adds a sublayer's output, its bias and the residual stream, and normalizes the sum; it
 *     also hands on the sum, the residual stream (so the embeddings' sum, each attention's and each MLP's output
 *     with its bias are added in the LayerNormalization that follows them);
 *   - MultiHeadAttention (unidirectional: causal over past_seq + seq keys) appends the new keys and values to
 *     past_key_values.{i}.* as present.{i}.*, and attends, all heads in one kernel (scaled by 1/sqrt(headDim));
 *   - FastGelu adds the fc bias and applies GELU's tanh approximation.
 */
function gptGraph(g: GraphBuilder, config: GPTConfig, s: ModelShape, weights: GPTWeights): void {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L, nHeads: H } = config;

  const qkvSplit = g.ints("const.qkv_split", [C, C, C]);
  const floats = (name: string, data: Float32Array) => g.floats(name, [data.length], data);
  const matrix = (name: string, lin: { nIn: number; nOut: number; weight: Float32Array }) => g.floats(name, [lin.nIn, lin.nOut], lin.weight);

  const wte = g.floats("wte", [V, C], weights.tokenEmbedding);
  const wpe = g.floats("wpe", [T, C], weights.positionEmbedding);
  // the rows past_seq … past_seq+seq-1 of wpe: fewer rows where that passes contextLength, which the first
  // SkipLayerNormalization refuses (its skip is then shorter than its input)
  const pastLen = g.op("Shape", ["past_key_values.0.key"], "past_len", { start: 2, end: 3 }); // [1]
  const totalLen = g.op("Add", [pastLen, g.op("Shape", ["input_ids"], "seq_len", { start: 1, end: 2 })], "total_len");
  const positionRows = g.op("Slice", [wpe, pastLen, totalLen, g.ints("const.axis0", [0])], "pos_emb"); // [seq, C]

  /** input + skip (+ bias), and that sum layer-normalized: [normalized, sum] */
  const skipLayerNorm = (input: string, skip: string, ln: LayerNormWeights, name: string, bias: string | null, hint: string) => {
    const inputs = [input, skip, floats(`${name}.gain`, ln.gain), floats(`${name}.bias`, ln.bias), ...(bias ? [bias] : [])];
    const outputs = [`${hint}_out`, "", "", `${hint}_sum`];
    g.node("SkipLayerNormalization", inputs, { outputs, domain: MS_DOMAIN, attrs: { epsilon: { float: layerNormEps } } });
    return { normalized: outputs[0]!, sum: outputs[3]! };
  };

  // the residual stream as the next SkipLayerNormalization's three addends
  let pending: { input: string; skip: string; bias: string | null } = {
    input: g.op("Gather", [wte, "input_ids"], "tok_emb", { axis: 0 }), // [batch, seq, C]
    skip: positionRows,
    bias: null,
  };
  for (let l = 0; l < L; l++) {
    const blk = weights.blocks[l]!;
    const p = `blocks.${l}`;
    const ln1 = skipLayerNorm(pending.input, pending.skip, blk.ln1, `${p}.ln1`, pending.bias, `l${l}_ln1`);

    // the bias added before the split, not by MultiHeadAttention: onnxruntime-web's WebGPU kernel takes a bias only
    // with packed queries, keys and values, which its CPU kernel does not take
    const qkvMm = g.op("MatMul", [ln1.normalized, matrix(`${p}.attn_qkv.weight`, blk.attn_qkv)], `l${l}_qkv_mm`);
    const qkv = g.op("Add", [qkvMm, floats(`${p}.attn_qkv.bias`, blk.attn_qkv.bias)], `l${l}_qkv`);
    const [q, k, v] = g.node("Split", [qkv, qkvSplit], {
      outputs: [`l${l}_q`, `new_key_values.${l}.key`, `new_key_values.${l}.value`],
      attrs: { axis: 2 },
    }) as [string, string, string];
    const pastAndPresent = [`past_key_values.${l}.key`, `past_key_values.${l}.value`];
    const [attnY] = g.node("MultiHeadAttention", [q, k, v, "", "", "", ...pastAndPresent], {
      outputs: [`l${l}_attn_y`, `present.${l}.key`, `present.${l}.value`],
      domain: MS_DOMAIN,
      attrs: { num_heads: H, unidirectional: 1, mask_filter_value: { float: MASKED } },
    });
    const attnOut = g.op("MatMul", [attnY!, matrix(`${p}.attn_proj.weight`, blk.attn_proj)], `l${l}_proj`);
    const ln2 = skipLayerNorm(attnOut, ln1.sum, blk.ln2, `${p}.ln2`, floats(`${p}.attn_proj.bias`, blk.attn_proj.bias), `l${l}_ln2`);

    // MLP: one product each way (the browser decodes a narrow model on one thread: components/playground/decoding-threads.ts)
    const fc = g.op("MatMul", [ln2.normalized, matrix(`${p}.mlp_fc.weight`, blk.mlp_fc)], `l${l}_fc`);
    const act = g.node("FastGelu", [fc, floats(`${p}.mlp_fc.bias`, blk.mlp_fc.bias)], { hint: `l${l}_gelu`, domain: MS_DOMAIN })[0]!;
    const mlpOut = g.op("MatMul", [act, matrix(`${p}.mlp_proj.weight`, blk.mlp_proj)], `l${l}_mlp`);
    pending = { input: mlpOut, skip: ln2.sum, bias: floats(`${p}.mlp_proj.bias`, blk.mlp_proj.bias) };
  }

  const lnF = skipLayerNorm(pending.input, pending.skip, weights.lnFinal, "ln_f", pending.bias, "ln_f");
  g.node("MatMul", [lnF.normalized, outputWeight(g, s, weights, wte, C, V)], { outputs: ["logits"] });
}

/**
 * The output layer's [C, V] operand: lm_head, or with tied embeddings wte transposed by a node whose only input is
 * an initializer, which onnxruntime folds into a constant when it loads the file (the file keeps one copy of wte).
 */
function outputWeight(g: GraphBuilder, s: ModelShape, weights: GPTWeights, wte: string, C: number, V: number): string {
  return s.tied ? g.op("Transpose", [wte], "wte_t", { perm: [1, 0] }) : g.floats("lm_head", [C, V], weights.lmHead);
}

/**
 * Llama's block (lib/model/llama-ops.ts) in standard operators, in the GPT graph's layout where the two agree:
 *   - RMSNorm is Pow(x, 2) → ReduceMean → Add(eps) → Sqrt → Div → Mul(gain), the pattern onnxruntime fuses into one
 *     SimplifiedLayerNormalization;
 *   - grouped-query attention: each key/value head's columns are copied at export to every query head it serves
 *     (expandKeyValueHeads), so the attention and the cache are the GPT graph's;
 *   - rotary positions: cos and sin of every position's angles are tables [contextLength, 1, headDim] (each half of
 *     a head's width repeated, the sign of rotate_half folded into sin's first half), gathered once a call at the
 *     query positions; queries and keys of all heads are turned together as x·cos + swap(x)·sin, where swap (one
 *     Gather on the last axis) exchanges the two halves of each head;
 *   - SwiGLU is silu(gate)·up with silu = gate·Sigmoid(gate), the pattern onnxruntime fuses into QuickGelu; gate and
 *     up come from one product, split in two;
 *   - a linear layer without a bias is a MatMul alone.
 */
function llamaGraph(g: GraphBuilder, config: GPTConfig, s: ModelShape, weights: GPTWeights): void {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L, nHeads: H } = config;
  const hd = s.headDim;
  const halfHd = hd / 2;

  // ---- constants ----
  const zero = g.ints("const.zero", [0], true);
  const one = g.ints("const.one", [1], true);
  const two = g.ints("const.two", [2], true);
  const axes12 = g.ints("const.axes12", [1, 2]);
  const headsShape = g.ints("const.heads_shape", [0, 0, 3 * H, hd]);
  const mergedShape = g.ints("const.merged_shape", [0, 0, C]);
  // Splits name their sizes: onnxruntime-web's WebGPU Split gets an even split by output count wrong (sizes of 0)
  const qkvSplit = g.ints("const.qk_v_split", [2 * H, H]);
  const qkSplit = g.ints("const.q_k_split", [...new Array<number>(H).fill(1), H]);
  const headSplit = g.ints("const.head_split", new Array<number>(H).fill(1));
  const swapHalves = g.ints(
    "const.swap_halves",
    Array.from({ length: hd }, (_, i) => (i + halfHd) % hd),
  );
  const masked = g.scalar("const.masked", MASKED);
  const zeroF = g.scalar("const.zero_f", 0);
  const twoF = g.scalar("const.two_f", 2);
  const eps = g.scalar("const.norm_eps", s.normEps);

  // ---- weights and tables ----
  const table = ropeTable(config, s);
  const cosTable = new Float32Array(T * hd);
  const sinTable = new Float32Array(T * hd);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < halfHd; i++) {
      const c = table.cos[t * halfHd + i]!;
      const sn = table.sin[t * halfHd + i]!;
      cosTable[t * hd + i] = c;
      cosTable[t * hd + halfHd + i] = c;
      // rotate_half(x) = [-x2, x1]; swap(x) = [x2, x1], so the sign rides on sin
      sinTable[t * hd + i] = -sn;
      sinTable[t * hd + halfHd + i] = sn;
    }
  }
  const cos = g.floats("rope.cos", [T, 1, hd], cosTable);
  const sin = g.floats("rope.sin", [T, 1, hd], sinTable);
  const wte = g.floats("wte", [V, C], weights.tokenEmbedding);
  const gain = (name: string, n: LayerNormWeights) => g.floats(`${name}.gain`, [C], n.gain);
  /** a linear layer's weight, and its bias when the layer has one */
  const linear = (name: string, lin: Linear, bias: boolean) => ({
    w: g.floats(`${name}.weight`, [lin.nIn, lin.nOut], lin.weight),
    b: bias ? g.floats(`${name}.bias`, [lin.nOut], lin.bias) : null,
  });

  const { positions, maskBias } = positionsAndMask(g, { zero, one, two, axes12, zeroF, masked });
  const posCos = g.op("Gather", [cos, positions], "pos_cos", { axis: 0 }); // [seq, 1, headDim]
  const posSin = g.op("Gather", [sin, positions], "pos_sin", { axis: 0 });

  let x = g.op("Gather", [wte, "input_ids"], "tok_emb", { axis: 0 });

  const rmsNorm = (input: string, gainName: string, hint: string) => {
    const meanSquare = g.op("ReduceMean", [g.op("Pow", [input, twoF], `${hint}_sq`)], `${hint}_ms`, { axes: [-1], keepdims: 1 });
    const rms = g.op("Sqrt", [g.op("Add", [meanSquare, eps], `${hint}_ms_eps`)], `${hint}_rms`);
    return g.op("Mul", [g.op("Div", [input, rms], `${hint}_normed`), gainName], hint);
  };
  /** input · w (+ b): a MatMul on [batch, seq, ·], then `add` (the residual stream) when given */
  const affine = (input: string, lin: { w: string; b: string | null }, hint: string, add?: string) => {
    let y = g.op("MatMul", [input, lin.w], `${hint}_mm`);
    if (lin.b) y = g.op("Add", [y, lin.b], `${hint}_b`);
    return add ? g.op("Add", [add, y], hint) : y;
  };

  for (let l = 0; l < L; l++) {
    const blk = weights.blocks[l]!;
    const p = `blocks.${l}`;
    const ln1 = gain(`${p}.ln1`, blk.ln1);
    const qkvW = linear(`${p}.attn_qkv`, expandKeyValueHeads(blk.attn_qkv, C, H, s, 1 / Math.sqrt(hd)), s.qkvBias);
    const projW = linear(`${p}.attn_proj`, blk.attn_proj, s.attnOutBias);
    const ln2 = gain(`${p}.ln2`, blk.ln2);

    // attention: queries and keys of all heads turned to their positions, then split as in the GPT graph
    const qkv = g.op("Reshape", [affine(rmsNorm(x, ln1, `l${l}_ln1`), qkvW, `l${l}_qkv`), headsShape], `l${l}_qkv_heads`);
    const [qk, v] = g.node("Split", [qkv, qkvSplit], { outputs: 2, hint: `l${l}_qk_v`, attrs: { axis: 2 } }) as [string, string];
    const swapped = g.op("Gather", [qk, swapHalves], `l${l}_qk_swap`, { axis: 3 });
    const turned = g.op("Add", [g.op("Mul", [qk, posCos], `l${l}_qk_cos`), g.op("Mul", [swapped, posSin], `l${l}_qk_sin`)], `l${l}_qk_rope`);
    const parts = g.node("Split", [turned, qkSplit], { outputs: H + 1, hint: `l${l}_qk`, attrs: { axis: 2 } });
    const attnY = attention(g, l, parts.slice(0, H), parts[H]!, v, maskBias, { headSplit, mergedShape });
    const xMid = affine(attnY, projW, `l${l}_x_mid`, x);

    // MLP: each part's second product adds onto the residual stream
    const h2 = rmsNorm(xMid, ln2, `l${l}_ln2`);
    for (const [i, part] of swigluParts(blk.mlp_fc, blk.mlp_proj, C, s.dFF, s.mlpBias).entries()) {
      const n = part.fc.nOut / 2;
      const fc = linear(`${p}.mlp_fc.${i}`, part.fc, s.mlpBias);
      const out = { w: g.floats(`${p}.mlp_proj.${i}.weight`, [n, C], part.projWeight), b: null };
      const split = g.ints(`${p}.mlp_fc.${i}.split`, [n, n]);
      const [gate, up] = g.node("Split", [affine(h2, fc, `l${l}_fc${i}`), split], { outputs: 2, hint: `l${l}_gate_up${i}`, attrs: { axis: -1 } }) as [
        string,
        string,
      ];
      const silu = g.op("Mul", [gate, g.op("Sigmoid", [gate], `l${l}_sig${i}`)], `l${l}_silu${i}`);
      x = affine(g.op("Mul", [silu, up], `l${l}_swiglu${i}`), out, `l${l}_x_out${i}`, i === 0 ? xMid : x);
    }
  }

  g.node("MatMul", [rmsNorm(x, gain("ln_f", weights.lnFinal), "ln_f_out"), outputWeight(g, s, weights, wte, C, V)], { outputs: ["logits"] });
}
