/**
 * Smoke tests: every algorithm runs end to end on a tiny random model, on the CPU, in seconds, and does what a
 * user would notice: the reward of an easy environment rises above the starting policy's, the SFT loss falls.
 */
import { describe, expect, it } from "vitest";
import { evaluate } from "@/lib/rl/evaluate";
import type { PolicyModel, TrainingPrimitives } from "@/lib/rl/primitives";
import { sftStep } from "@/lib/rl/sft";
import type { EpisodePlayer } from "@/lib/rl/rollouts";
import { type TrainingHooks, trainRl, trainingSpecs } from "@/lib/rl/train";
import { EnvironmentSession, defineEnvironment } from "@/lib/sdk/environment";
import { defineExperiment, type AlgorithmName } from "@/lib/sdk/experiment";
import { multiTurn, runEpisodes, singleTurn, type Protocol } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";

/** Reward 1 for a reply that starts with a digit: about 1 in 26 replies of a random byte model. */
const startsWithDigit = (text: string) => (/^[0-9]/.test(text) ? 1 : 0);

const digitOnce = defineEnvironment<null, string>({
  name: "say-a-digit",
  data: { kind: "free" },
  systemPrompt: "",
  maxTurns: 1,
  reset: () => ({ state: null, observation: "go" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, text) => ({ state, reward: startsWithDigit(text), done: true }),
});

/** Three turns, a third of a point for each reply that starts with a digit. */
const digitThrice = defineEnvironment<{ turn: number; digits: number }, string>({
  name: "say-three-digits",
  data: { kind: "free" },
  systemPrompt: "",
  maxTurns: 3,
  reset: () => ({ state: { turn: 0, digits: 0 }, observation: "go" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, text) => {
    const next = { turn: state.turn + 1, digits: state.digits + startsWithDigit(text) };
    return { state: next, observation: "again", reward: startsWithDigit(text) / 3, done: next.turn === 3 };
  },
  score: ({ state }) => state.digits / 3,
});

function tinyPolicy(options: { valueHead?: boolean; seed?: number } = {}): PolicyModel {
  const contextLength = 32;
  const base = BaseModel.create({ vocabSize: 262, contextLength, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: options.seed ?? 1 });
  return { primitives: new TrainingClient(base, { valueHead: options.valueHead, seed: options.seed ?? 1 }), tokenizer: base.tokenizer, contextLength };
}

async function runAlgorithm(
  name: Exclude<AlgorithmName, "sft">,
  protocol: Protocol,
  environment: typeof digitOnce | typeof digitThrice,
  overrides = {},
  /** What the loop trains through, made of the tiny policy (default: the policy itself). */
  through: (policy: PolicyModel) => PolicyModel = (policy) => policy,
  hooks: Pick<TrainingHooks, "onRollouts"> = {},
) {
  const config = defineExperiment({
    name: `smoke-${name}`,
    environment: environment.name,
    agent: { base: "random", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 1 } },
    algorithm: { name, steps: 12, groupSize: 8, groupsPerStep: 4, learningRate: 3e-2, ...overrides },
    evaluation: { every: 0, episodes: 8 },
    seed: 3,
  });
  const policy = through(tinyPolicy({ valueHead: config.agent.valueHead }));
  const rewards: number[] = [];
  const metrics: Record<string, number>[] = [];
  const result = await trainRl({
    config,
    policy,
    environment,
    protocol,
    hooks: {
      ...hooks,
      onMetrics: (_step, m) => {
        if ("reward/mean" in m) rewards.push(m["reward/mean"]!);
        metrics.push(m);
      },
    },
  });
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return { result, rewards, metrics, first: mean(rewards.slice(0, 3)), last: mean(rewards.slice(-3)) };
}

describe("RL algorithms on a tiny model", () => {
  it.each([
    ["grpo", singleTurn(), digitOnce],
    ["rloo", singleTurn(), digitOnce],
    ["grpo-per-turn", multiTurn(), digitThrice],
    ["reinforce", multiTurn(), digitThrice],
  ] as const)("%s raises the reward above the starting policy's", async (name, protocol, environment) => {
    // Single-turn episodes give a third of the samples: twice the groups keep the signal alike.
    const { result, rewards, first, last } = await runAlgorithm(name, protocol, environment, protocol.name === "single-turn" ? { groupsPerStep: 8 } : {});
    console.log(name, rewards.map((r) => r.toFixed(2)).join(" "));
    expect(result.steps).toBe(12);
    expect(rewards).toHaveLength(12);
    expect(last).toBeGreaterThan(first + 0.2);
    // The greedy policy, evaluated before and after, went from no digit to digits.
    expect(result.evaluations[0]!.score).toBeLessThan(result.evaluations.at(-1)!.score);
  });

  it("an entropy bonus keeps the policy's entropy up as the reward rises", async () => {
    const entropyAt = (metrics: Record<string, number>[]) => metrics.filter((m) => "entropy" in m).map((m) => m.entropy!);
    const plain = await runAlgorithm("grpo", singleTurn(), digitOnce, { groupsPerStep: 8 });
    const bonus = await runAlgorithm("grpo", singleTurn(), digitOnce, { groupsPerStep: 8, entropyCoef: 0.05 });
    console.log("entropy without / with the bonus", entropyAt(plain.metrics).at(-1)!.toFixed(3), entropyAt(bonus.metrics).at(-1)!.toFixed(3));
    expect(entropyAt(bonus.metrics).at(-1)!).toBeGreaterThan(entropyAt(plain.metrics).at(-1)! + 0.1);
    expect(bonus.last).toBeGreaterThan(bonus.first);
  });

  it("dynamic sampling plays fresh prompts while groups' rewards are all alike, trains on those that differ, and learns sooner", async () => {
    // A reply starting with "7": about 1 in 256 replies of the random model, so most groups of 8 all score 0.
    const sevenOnce = defineEnvironment<null, string>({
      ...digitOnce,
      name: "say-seven",
      step: (state, text) => ({ state, reward: text.startsWith("7") ? 1 : 0, done: true }),
    });
    const run = async (resampleRounds: number) => {
      const trained: number[][][] = [];
      const { metrics, rewards, result } = await runAlgorithm(
        "grpo",
        singleTurn(),
        sevenOnce,
        { groupsPerStep: 8, steps: 16, resampleRounds },
        (policy) => policy,
        {
          onRollouts: (_step, split, groups) => void (split === "train" && trained.push(groups.map((group) => group.map((t) => t.totalReward)))),
        },
      );
      return { metrics, rewards, result, trained };
    };
    const plain = await run(0);
    const dynamic = await run(4);
    const rounds = dynamic.metrics.filter((m) => "train/sampling_rounds" in m).map((m) => m["train/sampling_rounds"]!);
    const signal = (groups: number[][]) => groups.filter((g) => g.some((r) => r !== g[0])).length;
    console.log(
      "say-seven rewards without / with dynamic sampling",
      plain.rewards.map((r) => r.toFixed(2)).join(" "),
      "|",
      dynamic.rewards.map((r) => r.toFixed(2)).join(" "),
    );
    console.log("rounds", rounds.join(" "), "signal groups trained", plain.trained.map(signal).join(" "), "|", dynamic.trained.map(signal).join(" "));
    // While groups without a signal are common, steps play extra rounds and train on the groups that differ only.
    expect(rounds[0]!).toBeGreaterThan(1);
    // A step trains on the groups that differ, when any does.
    for (const groups of dynamic.trained) if (signal(groups) > 0) expect(signal(groups)).toBe(groups.length);
    expect(dynamic.trained.reduce((n, g) => n + signal(g), 0)).toBeGreaterThan(plain.trained.reduce((n, g) => n + signal(g), 0));
    expect(plain.metrics.every((m) => !("train/sampling_rounds" in m))).toBe(true);
    // The reward counts every episode played; it reaches one half sooner with the signal found.
    const half = (rewards: number[]) => rewards.findIndex((r) => r >= 0.5);
    expect(half(dynamic.rewards)).toBeGreaterThan(-1);
    expect(half(dynamic.rewards)).toBeLessThan(half(plain.rewards) === -1 ? Infinity : half(plain.rewards));
    // A policy that has mastered its prompts plays one round a step.
    expect(dynamic.rewards.at(-1)!).toBe(1);
    expect(rounds.at(-1)!).toBe(1);
  });

  it("exploration samples hotter while no group carries a signal, and each update uses the temperature its step sampled at", async () => {
    // A reply starting with "7": about 1 in 256 replies, so most steps find no group that differs.
    const sevenOnce = defineEnvironment<null, string>({
      ...digitOnce,
      name: "say-seven",
      step: (state, text) => ({ state, reward: text.startsWith("7") ? 1 : 0, done: true }),
    });
    const never = defineEnvironment<null, string>({ ...digitOnce, name: "never", step: (state) => ({ state, reward: 0, done: true }) });
    /** Records each call's temperature in the order made, and each step's end; with `overlapsCalls`, rollouts start ahead. */
    class Recording implements TrainingPrimitives {
      readonly calls: { name: string; temperature: number | undefined }[] = [];
      constructor(
        private readonly inner: TrainingPrimitives,
        readonly overlapsCalls: boolean,
      ) {}
      forward: TrainingPrimitives["forward"] = (...args) => this.inner.forward(...args);
      forwardBackward: TrainingPrimitives["forwardBackward"] = (batch, loss, config) => {
        this.calls.push({ name: "forwardBackward", temperature: config?.temperature });
        return this.inner.forwardBackward(batch, loss, config);
      };
      optimStep: TrainingPrimitives["optimStep"] = (...args) => {
        this.calls.push({ name: "optimStep", temperature: undefined });
        return this.inner.optimStep(...args);
      };
      sample: TrainingPrimitives["sample"] = (prompts, n, params) => {
        this.calls.push({ name: "sample", temperature: params?.temperature });
        return this.inner.sample(prompts, n, params);
      };
    }
    const run = async (environment: typeof digitOnce, overlapsCalls: boolean) => {
      let recording: Recording | undefined;
      const { metrics } = await runAlgorithm(
        "grpo",
        singleTurn(),
        environment,
        { steps: 7, groupSize: 4, groupsPerStep: 2, exploreTemperature: 2 },
        (policy) => {
          recording = new Recording(policy.primitives, overlapsCalls);
          return { ...policy, primitives: recording };
        },
      );
      return { temperatures: metrics.filter((m) => "train/temperature" in m).map((m) => m["train/temperature"]!), calls: recording!.calls };
    };
    // Never rewarded: two steps without a signal, then +0.25 a step up to 2; no step updates. Rollouts started ahead
    // (while the update before is out) sample at the temperature of their time, a step behind.
    const unrewarded = await run(never, false);
    expect(unrewarded.temperatures).toEqual([1, 1, 1.25, 1.5, 1.75, 2, 2]);
    expect(unrewarded.calls.filter((c) => c.name !== "sample")).toEqual([]);
    for (const overlapsCalls of [false, true]) {
      const { temperatures, calls } = await run(sevenOnce, overlapsCalls);
      expect(Math.max(...temperatures)).toBeGreaterThan(1);
      // Every update is taken at a temperature the loop reported for a step, and the samples just before it match.
      const updates = calls.flatMap((call, i) => (call.name === "forwardBackward" ? [i] : []));
      for (const i of updates) {
        const before = calls
          .slice(0, i)
          .filter((c) => c.name === "sample" && c.temperature !== 0)
          .at(-1)!;
        expect(temperatures).toContain(calls[i]!.temperature);
        if (!overlapsCalls) expect(calls[i]!.temperature).toBe(before.temperature);
      }
    }
  });

  it("ppo (GAE, value head) raises the reward, and its value head learns to expect it", async () => {
    const { metrics, first, last } = await runAlgorithm("ppo", multiTurn(), digitThrice);
    expect(last).toBeGreaterThan(first + 0.2);
    const values = metrics.filter((m) => "train/value_mean" in m).map((m) => m["train/value_mean"]!);
    expect(values).toHaveLength(12);
    expect(Math.abs(values[0]!)).toBeLessThan(0.05);
    expect(values.at(-1)!).toBeGreaterThan(0.2);
  });

  /** GRPO on say-a-digit, two groups of two a step, no evaluation: the smallest run trainRl takes. */
  const tinyGrpo = (name: string, steps: number) =>
    defineExperiment({
      name,
      environment: "say-a-digit",
      agent: { base: "random", training: { mode: "full" }, sampling: { maxTokens: 1 } },
      algorithm: { name: "grpo", steps, groupSize: 2, groupsPerStep: 2 },
      evaluation: { every: 0, episodes: 2 },
    });

  it("stops between steps when asked, and resumes with the same prompts", async () => {
    const config = tinyGrpo("smoke-stop", 5);
    let steps = 0;
    const stopped = await trainRl({
      config,
      policy: tinyPolicy(),
      environment: digitOnce,
      protocol: singleTurn(),
      hooks: { onMetrics: (step) => void (steps = step), shouldStop: () => steps >= 2 },
    });
    expect(stopped).toMatchObject({ steps: 2, stopped: true });
    const resumed = await trainRl({ config, policy: tinyPolicy(), environment: digitOnce, protocol: singleTurn(), startStep: 2 });
    expect(resumed).toMatchObject({ steps: 5, stopped: false });
  });

  it("tells the episode player what it plays next, training step or evaluation, so a sandbox can reset those episodes ahead", async () => {
    const config = defineExperiment({ ...tinyGrpo("smoke-next", 3), evaluation: { every: 2, episodes: 2 } });
    const calls: { starts: number[]; next: number[] | null }[] = [];
    const playEpisodes: EpisodePlayer = (protocol, starts, act, options) => {
      calls.push({ starts: starts.map((start) => start.seed), next: options.next?.map((start) => start.seed) ?? null });
      return runEpisodes(
        protocol,
        starts.map((start) => ({ ...start, session: new EnvironmentSession(digitOnce) })),
        act,
        options,
      );
    };
    await trainRl({ config, policy: tinyPolicy(), environment: digitOnce, protocol: singleTurn(), playEpisodes });
    // Evaluation (held-out seeds, each played once), step 1, step 2, evaluation, step 3, evaluation: each is told
    // the one after it (with its own group size), and only the last is told nothing.
    const held = [config.evaluation.seedOffset, config.evaluation.seedOffset + 1];
    const step = (index: number) => trainingSpecs(config, index, null).flatMap((spec) => [spec.seed, spec.seed]);
    expect(calls.map((call) => call.starts)).toEqual([held, step(0), step(1), held, step(2), held]);
    expect(calls.map((call) => call.next)).toEqual([...calls.slice(1).map((call) => call.starts), null]);
  });

  it("starts a step's rollouts while the update before is out on primitives whose calls travel, with the same results", async () => {
    /** The in-process client as a remote session looks to the loop: each call runs when made, its answer comes later. */
    class Travelling implements TrainingPrimitives {
      readonly overlapsCalls = true;
      readonly made: string[] = [];
      private updatesOut = 0;
      constructor(private readonly inner: TrainingClient) {}
      private travel<T>(name: string, run: () => Promise<T>): Promise<T> {
        this.made.push(this.updatesOut > 0 ? `${name} while an update is out` : name);
        const answer = run(); // the in-process client computes as the call is made, in the order made
        const update = name === "optimStep";
        if (update) this.updatesOut++;
        return new Promise((resolve) =>
          setTimeout(() => {
            if (update) this.updatesOut--;
            resolve(answer);
          }, 3),
        );
      }
      forward: TrainingPrimitives["forward"] = (...args) => this.travel("forward", () => this.inner.forward(...args));
      forwardBackward: TrainingPrimitives["forwardBackward"] = (...args) => this.travel("forwardBackward", () => this.inner.forwardBackward(...args));
      optimStep: TrainingPrimitives["optimStep"] = (...args) => this.travel("optimStep", () => this.inner.optimStep(...args));
      sample: TrainingPrimitives["sample"] = (...args) => this.travel("sample", () => this.inner.sample(...args));
    }
    // Rewards that differ within nearly every group (a reply whose first byte is even), so that every step updates:
    // a step whose groups are all alike makes no update, and no rollouts of the next would be made while one is out.
    const evenByte = defineEnvironment<null, string>({
      ...digitOnce,
      name: "even-byte",
      step: (state, text) => ({ state, reward: (text.charCodeAt(0) || 1) % 2 === 0 ? 1 : 0, done: true }),
    });
    for (const [name, protocol, environment] of [
      ["grpo", singleTurn(), evenByte],
      ["ppo", multiTurn(), digitThrice],
    ] as const) {
      const run = async (through?: (policy: PolicyModel) => PolicyModel) => {
        const { result, metrics } = await runAlgorithm(name, protocol, environment, { steps: 5, groupSize: 4, groupsPerStep: 2, epochs: 2 }, through);
        return {
          metrics: metrics.map((m) => Object.fromEntries(Object.entries(m).filter(([key]) => !key.startsWith("perf/")))),
          evaluations: result.evaluations,
        };
      };
      const plain = await run();
      let travelling!: Travelling;
      const overlapped = await run((policy) => ({ ...policy, primitives: (travelling = new Travelling(policy.primitives as TrainingClient)) }));
      expect(overlapped).toEqual(plain);
      // Every step after the first began sampling while the update before it was out (its two epochs made together).
      expect(
        travelling.made.filter((call) => call === "sample while an update is out"),
        travelling.made.join(", "),
      ).toHaveLength(4);
      expect(travelling.made.filter((call) => call.startsWith("optimStep"))).toHaveLength(5 * 2);
    }
  });

  it("gives the event loop a turn after every step, even with no hooks that wait on anything", async () => {
    const config = tinyGrpo("smoke-yield", 4);
    // A timer queued before the run fires only when the loop turns: once per step, not once at the end.
    let turns = 0;
    const tick = () => {
      turns++;
      timer = setTimeout(tick, 0);
    };
    let timer = setTimeout(tick, 0);
    await trainRl({ config, policy: tinyPolicy(), environment: digitOnce, protocol: singleTurn() });
    clearTimeout(timer);
    expect(turns).toBeGreaterThanOrEqual(4);
  });
});

describe("SFT and evaluation on a tiny model", () => {
  it("SFT drives the loss down and the greedy policy then answers as taught", async () => {
    const policy = tinyPolicy();
    const conversations = ["1", "7"].map((answer) => [
      { role: "system" as const, content: "" },
      { role: "user" as const, content: "go" },
      { role: "assistant" as const, content: answer },
    ]);
    const before = await evaluate({ policy, environment: digitOnce, protocol: singleTurn(), specs: [{ seed: 1 }], maxTokens: 1 });
    const losses: number[] = [];
    for (let step = 0; step < 20; step++) losses.push((await sftStep(policy, conversations, { learningRate: 1e-2 }))["loss/sft"]!);
    expect(losses.at(-1)!).toBeLessThan(losses[0]! / 3);
    const after = await evaluate({ policy, environment: digitOnce, protocol: singleTurn(), specs: [{ seed: 1 }], maxTokens: 1 });
    expect(before.score).toBe(0);
    expect(after.score).toBe(1);
    expect(after.trajectories[0]!.turns[0]!.action).toMatch(/^[17]$/);
  });
});

describe("sampled evaluation", () => {
  it("draws afresh at every turn, yet repeats exactly with the same seed", async () => {
    const policy = tinyPolicy();
    // Every turn sees the same prompt ("again"), so only fresh random draws can make the replies differ.
    const play = () => evaluate({ policy, environment: digitThrice, protocol: multiTurn("agent", "last"), specs: [{ seed: 1 }], maxTokens: 3, temperature: 1 });
    const first = await play();
    const actions = first.trajectories[0]!.turns.map((turn) => turn.action);
    expect(actions.slice(1).some((action) => action !== actions[1])).toBe(true);
    expect((await play()).trajectories[0]!.turns.map((turn) => turn.action)).toEqual(actions);
  });
});
