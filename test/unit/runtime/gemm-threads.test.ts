import { afterAll, describe, expect, it } from "vitest";
import type { GradientTargets, ModelView } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { Rng } from "@/lib/model/rng";
import { simdGemm } from "@/lib/model/simd-gemm";
import { cloneGPTWeights, initGPTWeights, listGPTParameters } from "@/lib/model/weights";
import { gemmHelperCalls, gemmHelperRunning, startGemmHelper, stopGemmHelper } from "@/server/runtime/gemm-threads";

afterAll(() => stopGemmHelper());

describe.skipIf(!simdGemm?.sharing)("the helper thread for matrix products", () => {
  it("gives bit-identical logits and gradients to one thread", async () => {
    // Big enough that the linear layers' products are split between the threads.
    const config = { vocabSize: 64, contextLength: 64, dModel: 64, nLayers: 1, nHeads: 4 };
    const rng = new Rng(1);
    const model: ModelView = { config, weights: initGPTWeights(config, rng), lora: null, valueHead: null };
    const B = 8,
      T = 64;
    const tokens = Int32Array.from({ length: B * T }, () => Math.floor(rng.uniform() * config.vocabSize));
    const dLogits = Float32Array.from({ length: B * T * config.vocabSize }, () => rng.normal());
    const pass = () => {
      const grads: GradientTargets = { weights: cloneGPTWeights(model.weights, 0) };
      const { logits } = jsEngine.run({ model, tokens, batch: B, seqLen: T, backward: { grads, lossGradient: () => ({ dLogits, dValues: null }) } });
      return { logits, grads: listGPTParameters(grads.weights!, config).map((p) => p.data) };
    };
    const alone = pass();
    expect(startGemmHelper()).toBe(true);
    expect(gemmHelperRunning()).toBe(true);
    // The helper shares the work: with a free core it takes some of the calls; when the machine is busy the
    // calling thread may take them all, so several passes give it the chance.
    let helped = pass();
    for (let i = 0; i < 20 && gemmHelperCalls() === 0; i++) helped = pass();
    expect(gemmHelperCalls()).toBeGreaterThan(0);
    expect(Buffer.from(helped.logits.buffer).equals(Buffer.from(alone.logits.buffer))).toBe(true);
    helped.grads.forEach((g, i) => expect(Buffer.from(g.buffer).equals(Buffer.from(alone.grads[i].buffer))).toBe(true));
    await stopGemmHelper();
    expect(gemmHelperRunning()).toBe(false);
  });
});
