import { afterAll, describe, expect, it } from "vitest";
import type { GPTConfig } from "@/lib/model/config";
import type { ModelView } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { type SimdMode, setSimdMode, simdAvailable } from "@/lib/model/kernels";
import { Rng } from "@/lib/model/rng";
import { initGPTWeights, listGPTParameters } from "@/lib/model/weights";

afterAll(() => setSimdMode("auto"));

// The key/value-cache decoder (SIMD attention over the cache, or the plain loops) against the full forward pass:
// after each token, its logits must be those the forward pass computes at that position.
describe.each(["never", ...(simdAvailable() ? ["auto"] : [])] as SimdMode[])("the cached decoder (SIMD %s)", (mode) => {
  it.each([
    ["head width a multiple of 4", { vocabSize: 13, contextLength: 12, dModel: 16, nLayers: 2, nHeads: 2 }],
    ["head width 3 (plain loops only)", { vocabSize: 13, contextLength: 12, dModel: 12, nLayers: 2, nHeads: 4 }],
    [
      "llama: rotary positions, grouped-query attention, tied embeddings",
      { architecture: "llama", vocabSize: 13, contextLength: 12, dModel: 16, nLayers: 2, nHeads: 4, nKvHeads: 2, dFF: 24, tiedEmbeddings: true, qkvBias: true },
    ],
    ["llama: head width 6 (plain loops only)", { architecture: "llama", vocabSize: 13, contextLength: 12, dModel: 12, nLayers: 2, nHeads: 2, dFF: 20 }],
  ] as [string, GPTConfig][])("gives the forward pass's logits token by token, %s", (_, config) => {
    setSimdMode(mode);
    const rng = new Rng(5);
    const weights = initGPTWeights(config, rng);
    for (const p of listGPTParameters(weights, config)) for (let i = 0; i < p.data.length; i++) p.data[i] += 0.3 * rng.normal();
    const model: ModelView = { config, weights, lora: null, valueHead: null };
    const T = config.contextLength,
      V = config.vocabSize,
      rows = 3;
    const sequences = Array.from({ length: rows }, () => Array.from({ length: T }, () => Math.floor(rng.uniform() * V)));
    const { logits } = jsEngine.run({ model, tokens: Int32Array.from(sequences.flat()), batch: rows, seqLen: T });
    const decoder = jsEngine.createDecoder(model, rows);
    try {
      const prompt = 5; // a prefill of rows × 5 tokens (more than `rows` tokens), then one token at a time
      let step = decoder.extend(
        [0, 1, 2],
        sequences.map((s) => s.slice(0, prompt)),
      );
      for (let t = prompt - 1; t < T; t++) {
        for (let r = 0; r < rows; r++) {
          for (let v = 0; v < V; v++) {
            const expected = logits[(r * T + t) * V + v];
            expect(Math.abs(step[r * V + v] - expected), `row ${r} position ${t} logit ${v}`).toBeLessThan(1e-4);
          }
        }
        if (t + 1 < T)
          step = decoder.extend(
            [0, 1, 2],
            sequences.map((s) => [s[t + 1]]),
          );
      }
    } finally {
      decoder.dispose();
    }
  });
});
