import { describe, expect, it } from "vitest";
import type { GPTConfig } from "@/lib/model/config";
import { jsEngine } from "@/lib/model/gpt";
import { initLoraAdapter, listLoraParameters, mergeLoraAdapter } from "@/lib/model/lora";
import { Rng } from "@/lib/model/rng";
import { initGPTWeights, listGPTParameters } from "@/lib/model/weights";

const config: GPTConfig = { vocabSize: 20, contextLength: 10, dModel: 16, nLayers: 2, nHeads: 2 };
const rng = new Rng(3);
const weights = initGPTWeights(config, rng);
const tokens = Int32Array.from({ length: 2 * 8 }, (_, i) => (i * 7) % config.vocabSize);
const run = (w = weights, lora: ReturnType<typeof initLoraAdapter> | null = null) =>
  jsEngine.run({ model: { config, weights: w, lora, valueHead: null }, tokens, batch: 2, seqLen: 8 }).logits;

describe("LoRA adapters", () => {
  it("with B at zero give exactly the base model's logits", () => {
    const adapter = initLoraAdapter(weights, { rank: 4, alpha: 8, dropout: 0, targets: ["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"] }, rng);
    expect(listLoraParameters(adapter, weights).some((p) => p.name.endsWith(".A") && p.data.some((v) => v !== 0))).toBe(true);
    expect(run(weights, adapter)).toEqual(run());
  });

  it("once trained, change the logits; merged into the base, they give the same logits as the adapter", () => {
    const adapter = initLoraAdapter(weights, { rank: 2, alpha: 4, dropout: 0, targets: ["attn_qkv", "mlp_proj"] }, rng);
    for (const p of listLoraParameters(adapter, weights)) for (let i = 0; i < p.data.length; i++) p.data[i] += rng.normal() * 0.1;
    const withAdapter = run(weights, adapter);
    const base = run();
    expect(Math.max(...withAdapter.map((v, i) => Math.abs(v - base[i])))).toBeGreaterThan(1e-3);

    const before = listGPTParameters(weights, config).map((p) => p.data.slice());
    const merged = mergeLoraAdapter(weights, adapter, config);
    const fromMerged = run(merged);
    for (let i = 0; i < fromMerged.length; i++) expect(Math.abs(fromMerged[i] - withAdapter[i])).toBeLessThan(1e-5);
    // Merging builds new weights; the shared base stays as it was.
    listGPTParameters(weights, config).forEach((p, k) => expect(p.data).toEqual(before[k]));
  });
});
