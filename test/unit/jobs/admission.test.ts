/** Every job kind carries a cost bound checked at launch (server/jobs/admission.ts). */
import { describe, expect, it } from "vitest";
import { defineExperiment } from "@/lib/sdk/experiment";
import { jobCost, overCostLimit } from "@/server/jobs/admission";

const model = { parameters: 1e6, contextLength: 256 };
const config = defineExperiment({
  name: "cost",
  environment: "arithmetic",
  agent: { base: "arithmetic-base", sampling: { maxTokens: 8 } },
  algorithm: { name: "grpo", steps: 10, groupSize: 4, groupsPerStep: 2 },
  evaluation: { every: 5, episodes: 16 },
} as never);

describe("jobCost", () => {
  it("bounds an evaluation by its episodes × turns × tokens", () => {
    const cost = jobCost({ kind: "eval", config, model, maxTurns: 3 });
    expect(cost).toMatchObject({ episodes: 16, sampledTokens: 16 * 3 * 8, trainedTokens: 0 });
    expect(cost.flops).toBe(2 * 1e6 * 16 * 3 * 8);
  });

  it("bounds an RL run by its training episodes, its evaluations, and the tokens it trains on", () => {
    const cost = jobCost({ kind: "rl", config, model, maxTurns: 1 });
    // 10 steps × 8 episodes, and evaluations before, after step 5 and step 10 (counted with one to spare)
    expect(cost.episodes).toBe(80 + 4 * 16);
    expect(cost.trainedTokens).toBe(80 * 256);
    expect(cost.flops).toBe(2 * 1e6 * cost.sampledTokens + 6 * 1e6 * 80 * 256);
  });

  it("grows with what the user asks for, and a job over the limit is refused with the numbers that make it", () => {
    const small = jobCost({ kind: "eval", config, model, maxTurns: 1 });
    const big = jobCost({
      kind: "eval",
      config: { ...config, evaluation: { ...config.evaluation, episodes: 10_000 } },
      model: { ...model, parameters: 135e6 },
      maxTurns: 1000,
    });
    expect(big.flops).toBeGreaterThan(small.flops * 1000);
    expect(overCostLimit(small, 1e16, model.parameters)).toBeNull();
    const refusal = overCostLimit(big, 1e16, 135e6);
    expect(refusal).toMatch(/could cost up to 2\.2e16 floating-point operations: 1\.0e4 episodes × up to 1000 turns/);
    expect(refusal).toMatch(/TINKERLAB_MAX_JOB_FLOPS/);
  });

  it("charges a remote session nothing here: its lease bounds it", () => {
    expect(jobCost({ kind: "session", config, model, maxTurns: 1 }).flops).toBe(0);
  });
});
