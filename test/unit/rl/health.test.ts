/** Run health: a run that cannot learn says why, once per kind, instead of finishing quietly. */
import { describe, expect, it } from "vitest";
import { RunHealth, type HealthWarning } from "@/lib/rl/health";
import { trainRl } from "@/lib/rl/train";
import { defineEnvironment } from "@/lib/sdk/environment";
import { defineExperiment } from "@/lib/sdk/experiment";
import { singleTurn, type Trajectory } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";

const episode = (reward: number, over: Partial<Trajectory> = {}): Trajectory => ({
  seed: 0,
  systemPrompt: "",
  turns: [{ agent: "agent", observation: "o", action: "a", reward, promptTokens: [], actionTokens: [1], actionLogprobs: [0], info: {} }],
  totalReward: reward,
  rewards: { env: reward },
  agentReturns: { agent: reward },
  score: reward,
  truncated: false,
  invalidActions: 0,
  metrics: {},
  ...over,
});

describe("RunHealth", () => {
  it("reports rewards that are the same within every group after five steps, once", () => {
    const health = new RunHealth({ contextLength: 64, maxTokens: 8 });
    const flat = [
      [episode(1), episode(1)],
      [episode(0), episode(0)],
    ];
    const raised: HealthWarning[] = [];
    for (let step = 1; step <= 8; step++) raised.push(...health.observe(step, flat, { "train/grad_norm": 0.5 }));
    expect(raised.map((w) => [w.code, w.step])).toEqual([["no-signal", 5]]);
    expect(raised[0]!.message).toMatch(/rewards were the same within every group in each of the first 5 steps/);
  });

  it("says nothing of equal rewards and a zero gradient when every episode scores full marks (a solved task, e.g. after SFT)", () => {
    const health = new RunHealth({ contextLength: 64, maxTokens: 8 });
    const solved = [
      [episode(1), episode(1)],
      [episode(1), episode(1)],
    ];
    const raised = [1, 2, 3, 4, 5, 6].flatMap((step) => health.observe(step, solved, { "train/grad_norm": 0 }));
    expect(raised).toEqual([]);
  });

  it("needs a sign to last: one step of invalid actions or truncation is not reported", () => {
    const health = new RunHealth({ contextLength: 64, maxTokens: 8 });
    const bad = [[episode(0, { invalidActions: 1, truncated: true }), episode(1, { invalidActions: 1, truncated: true })]];
    const good = [[episode(0), episode(1)]];
    expect(health.observe(1, bad, { "train/grad_norm": 1 })).toEqual([]);
    expect(health.observe(2, good, { "train/grad_norm": 1 })).toEqual([]);
    expect(health.observe(3, bad, { "train/grad_norm": 1 })).toEqual([]);
    expect(health.observe(4, bad, { "train/grad_norm": 1 })).toEqual([]);
    expect(health.observe(5, bad, { "train/grad_norm": 1 }).map((w) => w.code)).toEqual(["truncated", "invalid-actions"]);
  });

  it("reports a zero gradient", () => {
    const health = new RunHealth({ contextLength: 64, maxTokens: 8 });
    const varied = [[episode(0), episode(1)]];
    const codes = [1, 2, 3].flatMap((step) => health.observe(step, varied, { "train/grad_norm": 0 }).map((w) => w.code));
    expect(codes).toEqual(["zero-gradient"]);
  });
});

describe("a run whose prompt does not fit the base's context", () => {
  it("ends with the warning that every episode ended before its first turn, naming the context", async () => {
    const environment = defineEnvironment<null, string>({
      name: "long-prompt",
      data: { kind: "free" },
      systemPrompt: "This system prompt is longer than the tiny model's whole context of 32 tokens.",
      maxTurns: 1,
      reset: () => ({ state: null, observation: "go" }),
      parseAction: (text) => ({ ok: true, action: text }),
      step: (state) => ({ state, reward: 1, done: true }),
    });
    const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 16, nLayers: 1, nHeads: 2 }, { seed: 1 });
    const config = defineExperiment({
      name: "truncated",
      environment: "long-prompt",
      agent: { base: "random", training: { mode: "full" }, sampling: { maxTokens: 4 } },
      algorithm: { name: "grpo", steps: 3, groupSize: 2, groupsPerStep: 2 },
      evaluation: { every: 0, episodes: 2 },
    });
    const warnings: HealthWarning[] = [];
    const result = await trainRl({
      config,
      policy: { primitives: new TrainingClient(base), tokenizer: base.tokenizer, contextLength: 32 },
      environment,
      protocol: singleTurn(),
      hooks: { onWarning: (warning) => void warnings.push(warning) },
    });
    expect(result.steps).toBe(3);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: "no-turns", step: 1 });
    expect(warnings[0]!.message).toMatch(
      /ended before its first turn: the prompt and the reply \(agent.sampling.maxTokens=4\) do not fit the base's context of 32 tokens/,
    );
  });
});

describe("RunHealth after the run has learned", () => {
  it("does not call a converged policy's equal rewards and zero gradient a broken run", () => {
    const health = new RunHealth({ contextLength: 64, maxTokens: 8 });
    const varied = [[episode(0), episode(1)]];
    const converged = [
      [episode(1), episode(1)],
      [episode(0), episode(0)],
    ];
    expect(health.observe(1, varied, { "train/grad_norm": 0.5 })).toEqual([]);
    const later = [2, 3, 4, 5, 6, 7, 8].flatMap((step) => health.observe(step, converged, { "train/grad_norm": 0 }));
    expect(later).toEqual([]);
  });
});
