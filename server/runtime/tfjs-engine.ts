/**
 * The model on a tfjs backend (tfjs-node-gpu, tfjs-node, wasm or cpu), with gradients from tfjs's autodiff.
 * The canonical weights stay in Float32Arrays shared with the rest of the runtime; each pass uploads them,
 * runs the same computation as lib/model/gpt.ts, and adds the downloaded gradients into the client's buffers.
 * Embeddings are a one-hot matmul because the wasm backend has no gradient for gather.
 * Sampling reuses the TypeScript KV-cache decoder (for the tiny models here it is the fastest inference path).
 */
import type * as tfc from "@tensorflow/tfjs-core";
import type { Engine, ModelView, RunRequest, RunResult } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { layerNormEps } from "@/lib/model/kernels";
import { listLoraParameters } from "@/lib/model/lora";
import { modelShape } from "@/lib/model/config";
import { type NamedParameter, listGPTParameters, listValueHeadParameters } from "@/lib/model/weights";

type TF = typeof tfc;
type Tensor = tfc.Tensor;

export function createTfjsEngine(tf: TF, name: string): Engine {
  function forward(P: Map<string, Tensor>, request: RunRequest, masks: Map<string, Tensor>) {
    const { model, tokens, batch: B, seqLen: T } = request;
    const { dModel: C, nHeads: H, vocabSize: V, nLayers: L } = model.config;
    const hd = C / H;
    const N = B * T;
    const get = (key: string) => {
      const t = P.get(key);
      if (!t) throw new Error(`tfjs engine: no tensor '${key}'`);
      return t;
    };
    const layerNorm = (x: Tensor, prefix: string) => {
      const { mean, variance } = tf.moments(x, -1, true);
      return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, layerNormEps))), get(`${prefix}.gain`)), get(`${prefix}.bias`));
    };
    const linear = (x: Tensor, l: number, target: string) => {
      let y = tf.add(tf.matMul(x as tfc.Tensor2D, get(`blocks.${l}.${target}.weight`) as tfc.Tensor2D), get(`blocks.${l}.${target}.bias`));
      const A = P.get(`lora.blocks.${l}.${target}.A`);
      if (A) {
        const dropped = masks.has(`${l}.${target}`) ? tf.mul(x, masks.get(`${l}.${target}`)!) : x;
        const down = tf.matMul(dropped as tfc.Tensor2D, A as tfc.Tensor2D);
        y = tf.add(y, tf.mul(tf.matMul(down, get(`lora.blocks.${l}.${target}.B`) as tfc.Tensor2D), model.lora!.scale));
      }
      return y;
    };
    const geluK = Math.sqrt(2 / Math.PI);
    const gelu = (x: Tensor) => tf.mul(tf.mul(x, 0.5), tf.add(1, tf.tanh(tf.mul(tf.add(x, tf.mul(tf.pow(x, 3), 0.044715)), geluK))));

    const oneHot = tf.cast(tf.oneHot(tf.tensor1d(tokens, "int32"), V), "float32"); // [N, V]
    const positions = tf.slice(get("wpe"), [0, 0], [T, C]); // [T, C]
    let x = tf.reshape(tf.add(tf.reshape(tf.matMul(oneHot, get("wte") as tfc.Tensor2D), [B, T, C]), positions), [N, C]);
    // Additive causal mask: -1e9 above the diagonal, whose exp underflows to exactly 0.
    const causal = tf.mul(tf.sub(1, tf.linalg.bandPart(tf.ones([T, T]), -1, 0)), -1e9); // [T, T]
    const heads = (t: Tensor) => tf.transpose(tf.reshape(t, [B, T, H, hd]), [0, 2, 1, 3]); // [B, H, T, hd]
    for (let l = 0; l < L; l++) {
      const qkv = linear(layerNorm(x, `blocks.${l}.ln1`), l, "attn_qkv"); // [N, 3C]
      const [q, k, v] = tf.split(qkv, 3, 1).map(heads);
      const att = tf.softmax(tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(hd)), causal)); // [B, H, T, T]
      const y = tf.reshape(tf.transpose(tf.matMul(att, v), [0, 2, 1, 3]), [N, C]);
      x = tf.add(x, linear(y, l, "attn_proj"));
      x = tf.add(x, linear(gelu(linear(layerNorm(x, `blocks.${l}.ln2`), l, "mlp_fc")), l, "mlp_proj"));
    }
    const lnf = layerNorm(x, "ln_f");
    const logits = tf.matMul(lnf as tfc.Tensor2D, get("lm_head") as tfc.Tensor2D); // [N, V]
    const values = P.has("value_head.weight")
      ? tf.add(tf.reshape(tf.matMul(lnf as tfc.Tensor2D, tf.reshape(get("value_head.weight"), [C, 1]) as tfc.Tensor2D), [N]), get("value_head.bias"))
      : null; // [N]
    return { logits, values };
  }

  /** Dropout masks drawn in the order the TypeScript engine draws them, so both see the same masks. */
  function dropoutMasks(request: RunRequest): Map<string, Tensor> {
    const masks = new Map<string, Tensor>();
    const lora = request.model.lora;
    if (!lora || lora.config.dropout === 0 || !request.dropoutRng) return masks;
    const N = request.batch * request.seqLen;
    const keep = 1 / (1 - lora.config.dropout);
    for (let l = 0; l < request.model.config.nLayers; l++) {
      for (const target of ["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"] as const) {
        if (!lora.blocks[l][target]) continue;
        const nIn = request.model.weights.blocks[l][target].nIn;
        const mask = new Float32Array(N * nIn);
        for (let i = 0; i < mask.length; i++) mask[i] = request.dropoutRng.uniform() >= lora.config.dropout ? keep : 0;
        masks.set(`${l}.${target}`, tf.tensor2d(mask, [N, nIn]));
      }
    }
    return masks;
  }

  function parameterLists(model: ModelView): NamedParameter[][] {
    return [
      listGPTParameters(model.weights, model.config),
      model.lora ? listLoraParameters(model.lora, model.weights) : [],
      model.valueHead ? listValueHeadParameters(model.valueHead) : [],
    ];
  }

  function run(request: RunRequest): RunResult {
    const { model } = request;
    const shape = modelShape(model.config);
    if (shape.llama || shape.tied || shape.dFF !== 4 * model.config.dModel) {
      throw new Error(
        `the ${name} engine computes GPT-2's block with an untied lm_head and dFF = 4 * dModel only; this base (architecture ${model.config.architecture ?? "gpt"}, tiedEmbeddings ${shape.tied}, dFF ${shape.dFF}) runs on the js engine (TINKERLAB_BACKEND=js)`,
      );
    }
    const [baseParams, loraParams, valueParams] = parameterLists(model);
    const grads = request.backward?.grads;
    // Which tensors get gradients, and the buffers those gradients are added to.
    const trained: { param: NamedParameter; grad: Float32Array }[] = [];
    if (grads?.weights) listGPTParameters(grads.weights, model.config).forEach((g, i) => trained.push({ param: baseParams[i], grad: g.data }));
    if (grads?.lora) listLoraParameters(grads.lora, model.weights).forEach((g, i) => trained.push({ param: loraParams[i], grad: g.data }));
    if (grads?.valueHead) listValueHeadParameters(grads.valueHead).forEach((g, i) => trained.push({ param: valueParams[i], grad: g.data }));
    const trainedNames = new Set(trained.map((t) => t.param.name));

    let result: RunResult | null = null;
    tf.tidy(() => {
      const constants = new Map<string, Tensor>();
      for (const p of [...baseParams, ...loraParams, ...valueParams]) {
        if (!trainedNames.has(p.name)) constants.set(p.name, tf.tensor(p.data, p.shape));
      }
      const masks = dropoutMasks(request);
      if (!request.backward) {
        const { logits, values } = forward(constants, request, masks);
        result = { logits: logits.dataSync() as Float32Array, values: values ? (values.dataSync() as Float32Array) : null };
        return;
      }
      const { lossGradient } = request.backward;
      const inputs = trained.map((t) => tf.tensor(t.param.data, t.param.shape));
      const gradients = tf.grads((...xs: Tensor[]) => {
        const P = new Map(constants);
        trained.forEach((t, i) => P.set(t.param.name, xs[i]));
        const { logits, values } = forward(P, request, masks);
        const logitsData = logits.dataSync() as Float32Array;
        const valuesData = values ? (values.dataSync() as Float32Array) : null;
        result = { logits: logitsData, values: valuesData };
        const { dLogits, dValues } = lossGradient(logitsData, valuesData, 0, request.batch * request.seqLen);
        // A surrogate whose gradient with respect to the logits (and values) is exactly dLogits (and dValues).
        let surrogate = tf.sum(tf.mul(logits, tf.tensor(dLogits, logits.shape)));
        if (values && dValues) surrogate = tf.add(surrogate, tf.sum(tf.mul(values, tf.tensor(dValues, values.shape))));
        return surrogate;
      })(inputs);
      gradients.forEach((g, i) => {
        const data = g.dataSync();
        const target = trained[i].grad;
        for (let j = 0; j < target.length; j++) target[j] += data[j];
      });
    });
    return result!;
  }

  return Object.freeze({ name, run, createDecoder: jsEngine.createDecoder });
}
