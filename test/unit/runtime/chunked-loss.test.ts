import { describe, expect, it } from "vitest";
import type { GPTConfig } from "@/lib/model/config";
import type { GradientTargets, ModelView } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { Rng } from "@/lib/model/rng";
import { cloneGPTWeights, initGPTWeights, listGPTParameters, initValueHead } from "@/lib/model/weights";
import { type Batch, maskDisallowed, packBatch } from "@/server/runtime/batch";
import { lossAccumulator, parseLossConfig } from "@/server/runtime/losses";

// forwardBackward computes the output layer and the loss a range of rows at a time (the logits of a large
// vocabulary never exist whole): any range size must give the loss, metrics and gradients of one range.
describe("the loss over ranges of rows", () => {
  it.each([
    ["gpt, untied, PPO with a value head, KL and entropy", { vocabSize: 29, contextLength: 16, dModel: 16, nLayers: 1, nHeads: 2 }],
    ["llama, tied", { architecture: "llama", vocabSize: 29, contextLength: 16, dModel: 16, nLayers: 1, nHeads: 4, nKvHeads: 2, dFF: 24, tiedEmbeddings: true }],
  ] as [string, GPTConfig][])("gives what one range gives, %s", (_, config) => {
    const rng = new Rng(3);
    const V = config.vocabSize;
    const valueHead = initValueHead(config);
    for (let c = 0; c < valueHead.weight.length; c++) valueHead.weight[c] = 0.3 * rng.normal();
    const model: ModelView = { config, weights: initGPTWeights(config, rng), lora: null, valueHead };
    const lengths = [11, 7, 16];
    const batch: Batch = {
      tokens: lengths.map((n) => Array.from({ length: n }, () => Math.floor(rng.uniform() * V))),
    };
    batch.weights = batch.tokens.map((r) => r.map((_, i) => (i % 4 === 3 ? 0 : 1)));
    batch.samplingLogprobs = batch.tokens.map((r) => r.map(() => -3 + rng.normal() * 0.3));
    batch.advantages = batch.tokens.map((r) => r.map(() => rng.normal()));
    batch.returns = batch.tokens.map((r) => r.map(() => rng.normal()));
    const referenceLogprobs = batch.tokens.map((r) => r.map(() => -3 + rng.normal() * 0.3));
    // legal actions at a few positions, some of them on either side of a range's edge
    batch.allowedTokens = batch.tokens.map((r, b) => r.map((t, i) => (b === 1 && i >= 3 && i <= 6 ? [t, (t + 1) % V, 2] : null)));
    const packed = packBatch(batch, V, config.contextLength);
    const config_ = parseLossConfig("ppo", { klCoef: 0.1, entropyCoef: 0.01 });
    const pass = (chunkRows?: number) => {
      const grads: GradientTargets = {
        weights: cloneGPTWeights(model.weights, 0),
        valueHead: { weight: new Float32Array(config.dModel), bias: new Float32Array(1) },
      };
      const accumulator = lossAccumulator("ppo", config_, batch, packed, V, referenceLogprobs);
      const result = jsEngine.run({
        model,
        tokens: packed.tokens,
        batch: packed.B,
        seqLen: packed.T,
        backward: {
          grads,
          chunkRows,
          lossGradient: (logits, values, rowStart, rowCount) => {
            maskDisallowed(logits, batch.allowedTokens, packed, V, undefined, { rowStart, rowCount });
            return accumulator.rows(logits, values, rowStart, rowCount);
          },
        },
      });
      return { result, ...accumulator.finish(), grads: [...listGPTParameters(grads.weights!, config).map((p) => p.data), grads.valueHead!.weight] };
    };
    const whole = pass();
    expect(whole.result.logits.length).toBe(packed.B * packed.T * V);
    for (const rows of [1, 5, 16, 17]) {
      const chunked = pass(rows);
      expect(chunked.result.logits.length).toBe(0); // never whole
      expect(chunked.loss).toBeCloseTo(whole.loss, 5);
      for (const [k, v] of Object.entries(whole.metrics)) expect(chunked.metrics[k], k).toBeCloseTo(v, 5);
      chunked.grads.forEach((g, i) => {
        for (let j = 0; j < g.length; j++) expect(Math.abs(g[j] - whole.grads[i][j])).toBeLessThan(1e-5 + 1e-4 * Math.abs(whole.grads[i][j]));
      });
    }
  });
});
