/**
 * A job holding several clients on one base (server/scheduler/resources.ts, `clients`): separate policies hold one
 * per agent, a league run its learner and each snapshot it keeps. Each client's weights or adapter, gradients and
 * optimizer count once per client; activations once; a LoRA job's shared base once.
 */
import { describe, expect, it } from "vitest";
import { checkEverFits, estimateFootprint, type JobResourceSpec } from "@/server/scheduler/resources";

const model = { name: "m-1b", parameters: 1e9, dModel: 2048, nLayers: 16 };
const spec = (overrides: Partial<JobResourceSpec>): JobResourceSpec => ({
  kind: "rl",
  mode: "lora",
  model,
  batchSize: 1,
  contextLength: 1024,
  loraRank: 8,
  computeSlots: 1,
  ...overrides,
});

describe("a footprint of several clients", () => {
  it("counts each client's adapter, gradients and Adam state, the base and activations once", () => {
    const one = estimateFootprint(spec({}));
    const two = estimateFootprint(spec({ clients: 2 }));
    expect(two.breakdown).toEqual({ baseWeights: 3815, "adapter ×2": 28, "adapterGradients ×2": 28, "adapterAdam ×2": 56, activations: 1024 });
    expect(two.ownMemoryMb).toBe(one.ownMemoryMb + 14 + 14 + 28);
    expect(two.baseMemoryMb).toBe(one.baseMemoryMb);
    expect(estimateFootprint(spec({ clients: 1 }))).toEqual(one);
  });

  it("counts each full-weight client's own copy, and refuses a league too large for any device, naming the parts", () => {
    const small = { name: "m-100m", parameters: 1e8, dModel: 768, nLayers: 12 };
    const footprint = estimateFootprint(spec({ mode: "full", model: small, clients: 17 }));
    // 1e8 fp32 weights = 382 MiB; each of 17 clients holds weights, gradients and two Adam moments.
    expect(footprint.breakdown).toMatchObject({ "weights ×17": 17 * 382, "gradients ×17": 17 * 382, "adam ×17": 17 * 763 });
    const device = [{ id: "gpu", kind: "gpu" as const, memoryMb: 16_384, computeSlots: 4 }];
    const check = checkEverFits(footprint, device);
    expect(check.fits).toBe(false);
    if (!check.fits) expect(check.message).toMatch(/^needs 2[\d,]+ MiB \(weights ×17 6,494 MiB, gradients ×17 6,494 MiB, adam ×17 12,971 MiB/);
    expect(checkEverFits(estimateFootprint(spec({ mode: "full", model: small, clients: 4 })), device)).toEqual({ fits: true });
  });

  it("refuses a count of clients that is not a whole number from 1", () => {
    expect(() => estimateFootprint(spec({ clients: 0 }))).toThrow(/whole number of clients ≥ 1; got 0/);
  });
});
