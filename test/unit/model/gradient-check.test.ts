import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GPTConfig } from "@/lib/model/config";
import type { GradientTargets, ModelView } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { type SimdMode, setSimdMode, simdAvailable } from "@/lib/model/kernels";
import { cloneLoraAdapter, initLoraAdapter, listLoraParameters } from "@/lib/model/lora";
import { Rng } from "@/lib/model/rng";
import { type NamedParameter, cloneGPTWeights, initGPTWeights, initValueHead, listGPTParameters, listValueHeadParameters } from "@/lib/model/weights";

// Deliberately odd-shaped tiny models so that index mix-ups between dimensions show up as wrong gradients: GPT-2's
// block, and Llama's with grouped-query attention (two query heads per key/value head), an MLP width that is no
// multiple of dModel, tied embeddings, query/key/value biases (as Qwen2 has) and llama3 rotary scaling.
const configs: [string, GPTConfig][] = [
  ["gpt", { vocabSize: 11, contextLength: 7, dModel: 12, nLayers: 2, nHeads: 3 }],
  [
    "llama",
    {
      architecture: "llama",
      vocabSize: 11,
      contextLength: 7,
      dModel: 16,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dFF: 10,
      normEps: 1e-6,
      ropeTheta: 500,
      ropeScaling: { type: "llama3", factor: 4, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 16 },
      tiedEmbeddings: true,
      qkvBias: true,
    },
  ],
];
let config: GPTConfig = configs[0][1];
const B = 2,
  T = 6,
  N = B * T;

function randomize(params: NamedParameter[], rng: Rng, std: number) {
  // Larger-than-init weights make every path (attention, GELU, LayerNorm) matter to the loss.
  for (const p of params) for (let i = 0; i < p.data.length; i++) p.data[i] += rng.normal() * std;
}

/**
 * loss = Σ cLogits·logits + Σ cValues·values with fixed random coefficients: its gradient on the logits is just
 * cLogits, so the check exercises the model's backward pass alone. Summed in float64 to keep the finite
 * differences free of float32 summation noise.
 */
function setup(withLora: boolean) {
  const rng = new Rng(7);
  const weights = initGPTWeights(config, rng);
  randomize(listGPTParameters(weights, config), rng, 0.3);
  const lora = withLora ? initLoraAdapter(weights, { rank: 2, alpha: 4, dropout: 0, targets: ["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"] }, rng) : null;
  if (lora) randomize(listLoraParameters(lora, weights), rng, 0.3); // B nonzero, so gradients reach A
  const valueHead = initValueHead(config);
  randomize(listValueHeadParameters(valueHead), rng, 0.5);
  const model: ModelView = { config, weights, lora, valueHead };
  const tokens = Int32Array.from({ length: N }, () => Math.floor(rng.uniform() * config.vocabSize));
  const cLogits = Float32Array.from({ length: N * config.vocabSize }, () => rng.normal());
  const cValues = Float32Array.from({ length: N }, () => rng.normal());
  const lossOf = () => {
    const { logits, values } = jsEngine.run({ model, tokens, batch: B, seqLen: T });
    let s = 0;
    for (let i = 0; i < logits.length; i++) s += cLogits[i] * logits[i];
    for (let i = 0; i < N; i++) s += cValues[i] * values![i];
    return s;
  };
  return { model, tokens, cLogits, cValues, lossOf, rng };
}

function checkParameters(params: NamedParameter[], grads: NamedParameter[], lossOf: () => number, rng: Rng) {
  const eps = 1e-2;
  let checked = 0;
  params.forEach((p, k) => {
    // A few entries of every tensor: enough to catch a wrong formula, cheap enough to run in CI.
    for (let trial = 0; trial < 3; trial++) {
      const i = Math.floor(rng.uniform() * p.data.length);
      const original = p.data[i];
      p.data[i] = original + eps;
      const up = lossOf();
      p.data[i] = original - eps;
      const down = lossOf();
      p.data[i] = original;
      const numeric = (up - down) / (2 * eps);
      const analytic = grads[k].data[i];
      const tolerance = 2e-2 * Math.max(Math.abs(numeric), Math.abs(analytic)) + 2e-3;
      expect(Math.abs(numeric - analytic), `${p.name}[${i}]: analytic ${analytic}, numeric ${numeric}`).toBeLessThan(tolerance);
      checked++;
    }
  });
  return checked;
}

afterAll(() => setSimdMode("auto"));

// Plain loops and the WebAssembly SIMD kernel are separate code paths; both must give the right gradients.
const cases = configs.flatMap(([arch, c]) => (["never", ...(simdAvailable() ? ["always"] : [])] as SimdMode[]).map((mode) => [arch, mode, c] as const));
describe.each(cases)("backward pass of the TypeScript engine (%s, SIMD %s)", (_arch, mode, archConfig) => {
  beforeAll(() => {
    setSimdMode(mode);
    config = archConfig;
  });
  it("matches finite differences for every base tensor and the value head", () => {
    const { model, tokens, cLogits, cValues, lossOf, rng } = setup(false);
    const grads: GradientTargets = { weights: cloneGPTWeights(model.weights, 0), valueHead: initValueHead(config) };
    jsEngine.run({
      model,
      tokens,
      batch: B,
      seqLen: T,
      backward: { grads, lossGradient: () => ({ dLogits: cLogits, dValues: cValues }) },
    });
    const params = [...listGPTParameters(model.weights, config), ...listValueHeadParameters(model.valueHead!)];
    const gradList = [...listGPTParameters(grads.weights!, config), ...listValueHeadParameters(grads.valueHead!)];
    // The gradient must not be trivially zero, or the comparison would prove nothing.
    expect(gradList.every((g) => g.data.some((v) => v !== 0))).toBe(true);
    expect(checkParameters(params, gradList, lossOf, rng)).toBeGreaterThan(50);
  });

  it("matches finite differences for LoRA A and B, computing no base gradient", () => {
    const { model, tokens, cLogits, cValues, lossOf, rng } = setup(true);
    const grads: GradientTargets = { lora: cloneLoraAdapter(model.lora!, 0) };
    jsEngine.run({
      model,
      tokens,
      batch: B,
      seqLen: T,
      backward: { grads, lossGradient: () => ({ dLogits: cLogits, dValues: cValues }) },
    });
    const params = listLoraParameters(model.lora!, model.weights);
    const gradList = listLoraParameters(grads.lora!, model.weights);
    expect(gradList.every((g) => g.data.some((v) => v !== 0))).toBe(true);
    expect(checkParameters(params, gradList, lossOf, rng)).toBeGreaterThan(40);
  });
});
