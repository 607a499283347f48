import { describe, expect, it } from "vitest";
import { arithmetic } from "@/lib/envs/arithmetic";
import { guessNumber } from "@/lib/envs/guess-number";
import { textWorld } from "@/lib/envs/text-world";
import { toolUse } from "@/lib/envs/tool-use";
import { defineEnvironment, EnvironmentSession } from "@/lib/sdk/environment";

describe("environment sessions", () => {
  it("replay the same episode from the same seed", () => {
    const a = new EnvironmentSession(textWorld);
    const b = new EnvironmentSession(textWorld);
    expect(a.reset(42)).toBe(b.reset(42));
    expect(new EnvironmentSession(textWorld).reset(43)).not.toBe(a.reset(42));
  });

  it("reward the exact sum and score accuracy", () => {
    const session = new EnvironmentSession(arithmetic);
    const [a, b] = session.reset(7).replace("=", "").split("+").map(Number);
    const step = session.step(` ${a! + b!} `);
    expect(step).toMatchObject({ reward: 1, done: true, observation: null });
    expect(session.score()).toBe(1);
    session.reset(7);
    expect(session.step(String(a! + b! + 1)).reward).toBe(0);
    expect(session.score()).toBe(0);
  });

  it("charge an unparseable action the configured penalty, and go on or end as configured", () => {
    const ends = new EnvironmentSession(arithmetic);
    ends.reset(1);
    expect(ends.step("forty")).toMatchObject({ reward: 0, done: true, metrics: { invalid_action: 1 } });
    const goesOn = new EnvironmentSession(guessNumber);
    goesOn.reset(1);
    const step = goesOn.step("abc");
    expect(step.done).toBe(false);
    expect(step.reward).toBeCloseTo(-0.2 - 0.02);
    expect(step.observation).toMatch(/^Invalid action: expected a whole number from 1 to 100/);
    expect(goesOn.summary().invalidActions).toBe(1);
    expect(goesOn.invalidActions).toBe(1);
    goesOn.reset(2);
    expect(goesOn.invalidActions).toBe(0);
  });

  it("cut an episode off at maxTurns, marked truncated", () => {
    const session = new EnvironmentSession(guessNumber);
    session.reset(3);
    let last;
    for (let i = 0; i < guessNumber.maxTurns; i++) last = session.step(session.summary().state.secret === 1 ? "2" : "1");
    expect(last).toMatchObject({ done: true, info: { truncated: true } });
    expect(() => session.step("5")).toThrow(/finished episode/);
  });

  it("answer a tool call with the tool's result and no reward, then score the final answer", () => {
    const session = new EnvironmentSession(toolUse);
    session.reset(0, { question: "A box holds 12 apples. How many apples are in 30 boxes?", answer: 360, split: "train" });
    expect(session.step("@calc(12*30)")).toMatchObject({ observation: "360", reward: 0, done: false, info: { tool: "calc" } });
    expect(session.step("@calc(12/0)").observation).toBe("error: division by zero");
    expect(session.step("@search(apples)")).toMatchObject({ done: true, info: { invalid: expect.stringContaining("unknown tool 'search'; tools: calc") } });
    session.reset(0, { question: "q", answer: 360, split: "train" });
    expect(session.step("360")).toMatchObject({ reward: 1, done: true });
  });

  it("report each reward function apart and add it to the return", () => {
    const env = defineEnvironment<{ n: number }, number>({
      name: "counter",
      data: { kind: "free" },
      systemPrompt: "",
      maxTurns: 3,
      stepCost: -0.1,
      reset: () => ({ state: { n: 0 }, observation: "0" }),
      parseAction: (text) => ({ ok: true, action: Number(text) }),
      step: (state, action) => ({ state: { n: state.n + action }, reward: action, done: state.n + action >= 2, observation: "" }),
      rewardFunctions: { brevity: (summary) => -summary.turns * 0.5 },
    });
    const session = new EnvironmentSession(env);
    session.reset(0);
    session.step("1");
    const last = session.step("1");
    expect(last.reward).toBeCloseTo(1 - 0.1 - 1);
    expect(session.rewardBreakdown()).toEqual({ env: expect.closeTo(1.8), brevity: -1 });
    expect(session.summary().totalReward).toBeCloseTo(0.8);
  });

  it("refuse a definition with a message naming each bad field", () => {
    expect(() =>
      defineEnvironment({
        name: "Bad Name",
        data: { kind: "free" },
        systemPrompt: "",
        maxTurns: 0,
        reset: undefined as never,
        parseAction: () => ({ ok: false, error: "" }),
        step: () => ({ state: null, reward: 0, done: true }),
      }),
    ).toThrow(/name must be 1-64 lowercase.*maxTurns must be a whole number from 1 to 1000; got 0.*reset must be a function/);
  });
});
