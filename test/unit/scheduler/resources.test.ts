import { describe, expect, it } from "vitest";
import { checkEverFits, estimateFootprint, memoryToAdd, type JobResourceSpec } from "@/server/scheduler/resources";

const model = { name: "m-1b", parameters: 1e9, dModel: 2048, nLayers: 16 };
const spec = (overrides: Partial<JobResourceSpec>): JobResourceSpec => ({
  kind: "sft",
  mode: "full",
  model,
  batchSize: 1,
  contextLength: 1024,
  computeSlots: 4,
  ...overrides,
});

describe("footprint", () => {
  it("counts weights, gradients, two Adam moments and activations for full-parameter training", () => {
    const footprint = estimateFootprint(spec({}));
    // 1e9 fp32 weights = 3,815 MiB; Adam's two moments twice that; 1x1024 tokens x 16 layers x 16 x 2048 x 4 B = 2,048 MiB
    // of activations, of which one pass holds at most 1 GiB (the engine runs a larger batch in parts).
    expect(footprint.breakdown).toEqual({ weights: 3815, gradients: 3815, adam: 7630, activations: 1024 });
    expect(footprint.ownMemoryMb).toBe(16284);
    expect(footprint.sharedBase).toBeNull();
  });

  it("counts only adapter state and activations for LoRA, plus the base when it is not resident", () => {
    const footprint = estimateFootprint(spec({ mode: "lora", loraRank: 8 }));
    // 16 layers x rank 8 x 14 x 2048 = 3.67 M adapter parameters = 14 MiB in fp32.
    expect(footprint.breakdown).toEqual({ baseWeights: 3815, adapter: 14, adapterGradients: 14, adapterAdam: 28, activations: 1024 });
    expect(footprint.sharedBase).toBe("m-1b");
    expect(memoryToAdd(footprint, true)).toBe(1080);
    expect(memoryToAdd(footprint, false)).toBe(1080 + 3815);
  });

  it("scales activations with batch and context up to what one pass holds, and weights with the dtype", () => {
    const small = { name: "m-small", parameters: 3e7, dModel: 256, nLayers: 4 };
    const base = estimateFootprint(spec({ mode: "lora", model: small }));
    const bigger = estimateFootprint(spec({ mode: "lora", model: small, batchSize: 2, contextLength: 2048 }));
    expect(base.breakdown.activations).toBe(64);
    expect(bigger.breakdown.activations).toBe(4 * base.breakdown.activations);
    // A batch past 1 GiB of activations runs in parts; serving's key/value cache is held to 1 GiB by decoding in turns.
    expect(estimateFootprint(spec({ mode: "lora", batchSize: 64, contextLength: 2048 })).breakdown.activations).toBe(1024);
    expect(estimateFootprint(spec({ kind: "eval", mode: "lora", batchSize: 256, contextLength: 2048 })).breakdown.kvCache).toBe(1024);
    expect(estimateFootprint(spec({ weightDtype: "bf16" })).breakdown.weights).toBe(1908);
  });

  it("rejects a job that can never fit, with the numbers", () => {
    const footprint = estimateFootprint(spec({ model: { ...model, parameters: 2.5e9 } }));
    const devices = [
      { id: "a", kind: "gpu" as const, memoryMb: 24_576, computeSlots: 4 },
      { id: "b", kind: "gpu" as const, memoryMb: 16_384, computeSlots: 4 },
    ];
    const check = checkEverFits(footprint, devices);
    expect(check.fits).toBe(false);
    if (!check.fits) {
      expect(check.message).toMatch(/^needs 39,172 MiB \(weights 9,537 MiB, .*\); the largest device has 24,576 MiB$/);
    }
    expect(checkEverFits(estimateFootprint(spec({})), devices)).toEqual({ fits: true });
  });
});
