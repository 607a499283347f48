import { describe, expect, it } from "vitest";
import { useCases } from "@/lib/envs";
import { parseDataset } from "@/lib/sdk/dataset";
import { defineExperiment, learningRateAt } from "@/lib/sdk/experiment";

describe("experiment configs", () => {
  it("accept every built-in template", () => {
    for (const useCase of Object.values(useCases)) expect(() => defineExperiment(useCase.template)).not.toThrow();
  });

  it("name the field and the accepted range of an invalid value", () => {
    const bad = { name: "x", environment: "arithmetic", agent: { base: "arithmetic-base" }, algorithm: { learningRate: 5, groupSize: 0, name: "dqn" } };
    expect(() => defineExperiment(bad as never)).toThrow(
      /algorithm\.name: must be one of grpo, grpo-per-turn, ppo, rloo, reinforce, sft \(got "dqn"\)[\s\S]*algorithm\.groupSize: must be a whole number from 1 to 1024 \(got 0\)[\s\S]*algorithm\.learningRate: must be a number from 1e-7 to 1 \(got 5\)/,
    );
  });

  it("add a value head when the algorithm is PPO", () => {
    const config = defineExperiment({ name: "p", environment: "arithmetic", agent: { base: "b" }, algorithm: { name: "ppo" } });
    expect(config.agent.valueHead).toBe(true);
  });

  it("schedule the learning rate: warm-up, then cosine or linear decay to the floor at the last step", () => {
    const algorithm = (extra: object) =>
      defineExperiment({ name: "s", environment: "arithmetic", agent: { base: "b" }, algorithm: { steps: 11, learningRate: 1e-3, ...extra } }).algorithm;
    const constant = algorithm({});
    expect([0, 5, 10].map((s) => learningRateAt(constant, s))).toEqual([1e-3, 1e-3, 1e-3]);
    const cosine = algorithm({ lrSchedule: "cosine", minLrRatio: 0.1 });
    expect(learningRateAt(cosine, 0)).toBeCloseTo(1e-3, 12);
    expect(learningRateAt(cosine, 5)).toBeCloseTo(0.55e-3, 12);
    expect(learningRateAt(cosine, 10)).toBeCloseTo(1e-4, 12);
    const linear = algorithm({ lrSchedule: "linear", warmupSteps: 1, minLrRatio: 0 });
    expect(learningRateAt(linear, 0)).toBeCloseTo(0.5e-3, 12); // warm-up: half the peak at the first of 1 warm-up step
    expect(learningRateAt(linear, 1)).toBeCloseTo(1e-3, 12);
    expect(learningRateAt(linear, 10)).toBeCloseTo(0, 12);
    expect(() => algorithm({ lrSchedule: "step" })).toThrow(/algorithm\.lrSchedule: must be one of constant, cosine, linear/);
  });

  it("describe every field for the editor's forms", () => {
    const config = defineExperiment({ name: "p", environment: "arithmetic", agent: { base: "b" } });
    expect(Object.keys(config.algorithm).length).toBeGreaterThan(10);
  });
});

describe("datasets", () => {
  it("parse JSONL and CSV rows, numbers as numbers", () => {
    expect(parseDataset('{"q":"1+1","a":2}\n\n{"q":"2+2","a":4}\n', "jsonl")).toEqual([
      { q: "1+1", a: 2 },
      { q: "2+2", a: 4 },
    ]);
    expect(parseDataset('question,answer\n"a, ""quoted"" one",3\nplain,4.5\n', "csv")).toEqual([
      { question: 'a, "quoted" one', answer: 3 },
      { question: "plain", answer: 4.5 },
    ]);
  });

  it("name the line of a bad row", () => {
    expect(() => parseDataset('{"q":1}\n{oops}\n', "jsonl", "upload.jsonl")).toThrow(/^upload\.jsonl:2: not valid JSON/);
    expect(() => parseDataset("[1,2]\n", "jsonl", "u")).toThrow(/u:1: each line must be a JSON object .* got an array/);
    expect(() => parseDataset("a,b\n1\n", "csv", "u.csv")).toThrow("u.csv: row 2 has 1 fields; the header has 2");
    expect(() => parseDataset('a\n"open\n', "csv", "u.csv")).toThrow(/a quoted field is not closed/);
  });
});
