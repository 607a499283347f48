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
    // 1e9 fp32 weights = 3,815 MiB; Adam's two moments twice that; 1x1024 tokens x 16 layers x 16 x 2048 x 4 B = 2,048 MiB.
    expect(footprint.breakdown).toEqual({ weights: 3815, gradients: 3815, adam: 7630, activations: 2048 });
    expect(footprint.ownMemoryMb).toBe(17308);
    expect(footprint.sharedBase).toBeNull();
  });

  it("counts only adapter state and activations for LoRA, plus the base when it is not resident", () => {
    const footprint = estimateFootprint(spec({ mode: "lora", loraRank: 8 }));
    // 16 layers x rank 8 x 14 x 2048 = 3.67 M adapter parameters = 14 MiB in fp32.
    expect(footprint.breakdown).toEqual({ baseWeights: 3815, adapter: 14, adapterGradients: 14, adapterAdam: 28, activations: 2048 });
    expect(footprint.sharedBase).toBe("m-1b");
    expect(memoryToAdd(footprint, true)).toBe(2104);
    expect(memoryToAdd(footprint, false)).toBe(2104 + 3815);
  });

  it("scales activations with batch and context, and weights with the dtype", () => {
    const base = estimateFootprint(spec({ mode: "lora" }));
    const bigger = estimateFootprint(spec({ mode: "lora", batchSize: 2, contextLength: 2048 }));
    expect(bigger.breakdown.activations).toBe(4 * base.breakdown.activations);
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
      expect(check.message).toMatch(/^needs 40,196 MiB \(weights 9,537 MiB, .*\); the largest device has 24,576 MiB$/);
    }
    expect(checkEverFits(estimateFootprint(spec({})), devices)).toEqual({ fits: true });
  });
});
