/**
 * The RL loop with separate policies and with a league of frozen past selves, on tiny LoRA adapters over one base
 * playing a zero-sum duel: each agent's adapter trains, the learner meets its snapshots from both seats, the games
 * land in the league, and a resumed run continues the league it saved.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LeagueState } from "@/lib/rl/league";
import type { Trajectory } from "@/lib/sdk/protocol";
import { samplerSnapshots } from "@/lib/rl/league-training";
import type { PolicyModel } from "@/lib/rl/primitives";
import { seatOf } from "@/lib/rl/seats";
import { trainRl } from "@/lib/rl/train";
import { defineExperiment, type ExperimentConfigInput, parseExperiment } from "@/lib/sdk/experiment";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { byteDuel, byteDuelProtocol } from "../../support/byte-duel";

const protocol = byteDuelProtocol;
const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 1 });
const lora = { rank: 4, alpha: 8 };
const work = fs.mkdtempSync(path.join(os.tmpdir(), "league-training-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

function adapter(seed: number): { client: TrainingClient; policy: PolicyModel } {
  const client = new TrainingClient(base, { lora, seed });
  return { client, policy: { primitives: client, tokenizer: base.tokenizer, contextLength: 32 } };
}

async function probe(policy: PolicyModel): Promise<number[]> {
  const { logprobs } = await policy.primitives.forward({ tokens: [[257, 259, 103, 111, 260, 49, 261]] });
  return logprobs.flat();
}

function experiment(overrides: Partial<ExperimentConfigInput> = {}) {
  return defineExperiment({
    name: "duel",
    environment: byteDuel.name,
    agent: { base: "random", training: { mode: "lora", rank: 4, alpha: 8 }, sampling: { temperature: 1, maxTokens: 1 } },
    protocol: { name: "turn-based", agents: ["A", "B"] },
    algorithm: { name: "grpo", steps: 5, groupSize: 4, groupsPerStep: 4, learningRate: 5e-2 },
    evaluation: { every: 0, episodes: 4 },
    seed: 5,
    ...overrides,
  });
}

/** Snapshots in a folder of this test, each opened on the shared base; `opened` counts the policies made. */
function snapshotsOf(learner: TrainingClient, dir: string) {
  const opened: string[] = [];
  const snapshots = samplerSnapshots({
    dir,
    save: (at) => learner.saveWeightsForSampler(at),
    async open(at, member) {
      opened.push(member.id);
      const client = new TrainingClient(base, { lora, seed: 100 + member.step });
      await client.loadState(at);
      return { primitives: client, tokenizer: base.tokenizer, contextLength: 32 };
    },
  });
  return { snapshots, opened };
}

describe("separate policies in the RL loop", () => {
  it("trains each agent's own adapter, reports each one's update, and evaluates each at its agent", async () => {
    const a = adapter(1);
    const b = adapter(2);
    const [aBefore, bBefore] = [await probe(a.policy), await probe(b.policy)];
    const metrics: Record<string, number>[] = [];
    const evalSeats: string[] = [];
    const config = experiment({ protocol: { name: "turn-based", agents: ["A", "B"], policies: "separate" } });
    await trainRl({
      config,
      policy: a.policy,
      policies: { A: a.policy, B: b.policy },
      environment: byteDuel,
      protocol,
      hooks: {
        onMetrics: (_step, m) => void metrics.push(m),
        onRollouts: (_step, split, groups) => {
          if (split === "eval") for (const t of groups.flat()) evalSeats.push(`${seatOf(t, "A")?.id}/${seatOf(t, "B")?.id}`);
        },
      },
    });
    const trained = metrics.filter((m) => "train/grad_norm" in m);
    expect(trained).toHaveLength(5);
    for (const m of trained) {
      expect(m["train/agent/A/sequences"]).toBe(16);
      expect(m["train/agent/B/sequences"]).toBe(16);
      expect(m["train/sequences"]).toBe(32);
    }
    expect(await probe(a.policy)).not.toEqual(aBefore);
    expect(await probe(b.policy)).not.toEqual(bBefore);
    expect(new Set(evalSeats)).toEqual(new Set(["A/B"]));
  });

  it("refuses one client for two agents, and a per-agent policy on a shared-policy config", async () => {
    const a = adapter(1);
    const run = (config: ReturnType<typeof experiment>, policies: Record<string, PolicyModel>) =>
      trainRl({ config, policy: a.policy, policies, environment: byteDuel, protocol });
    const separate = experiment({ protocol: { name: "turn-based", agents: ["A", "B"], policies: "separate" } });
    await expect(run(separate, { A: a.policy, B: a.policy })).rejects.toThrow(/each agent needs its own/);
    await expect(run(separate, { A: a.policy })).rejects.toThrow(/missing B/);
    await expect(run(experiment(), { A: a.policy, B: adapter(2).policy })).rejects.toThrow(/protocol.policies is 'shared'/);
  });
});

describe("a league of frozen past selves in the RL loop", () => {
  const league = { every: 2, mix: { latest: 0, uniform: 1, pfsp: 1 }, learner: "both-seats-alternating" };

  it("plays the learner from both seats against frozen snapshots, records every game, and rates the members", async () => {
    const learner = adapter(3);
    const initial = await probe(learner.policy);
    const { snapshots } = snapshotsOf(learner.client, path.join(work, "run-a"));
    const metrics: Record<string, number>[] = [];
    const seatsOfLearner = new Set<string>();
    const opponents = new Set<string>();
    const result = await trainRl({
      config: experiment({ algorithm: { name: "grpo", steps: 5, groupSize: 4, groupsPerStep: 4, learningRate: 5e-2, league } }),
      policy: learner.policy,
      environment: byteDuel,
      protocol,
      league: { snapshots },
      hooks: {
        onMetrics: (_step, m) => void ("train/grad_norm" in m && metrics.push(m)),
        onRollouts: (_step, split, groups) => {
          if (split !== "train") return;
          for (const t of groups.flat()) {
            for (const agent of ["A", "B"]) {
              const seat = seatOf(t, agent)!;
              if (seat.trains) seatsOfLearner.add(agent);
              else opponents.add(seat.id);
            }
          }
        },
      },
    });
    expect(seatsOfLearner).toEqual(new Set(["A", "B"]));
    const state = result.league!;
    // Snapshots after steps 2 and 4 and the last (5), besides the initial one at step 0.
    expect(state.members.map((m) => m.id)).toEqual(["step-0", "step-2", "step-4", "step-5"]);
    expect(opponents).toEqual(new Set(["step-0", "step-2", "step-4"]));
    // Every training game is a league game: 5 steps × 4 groups × 4 episodes.
    expect(state.games).toHaveLength(80);
    expect(metrics.map((m) => m["league/members"])).toEqual([1, 2, 2, 3, 4]);
    for (const m of metrics) expect(m["league/win_rate/all"]).toBeGreaterThanOrEqual(0);
    expect(metrics[1]!["league/elo/latest"]).toBeTypeOf("number");
    expect(metrics[1]!["league/elo/latest_low"]).toBeLessThanOrEqual(metrics[1]!["league/elo/latest"]!);
    expect(metrics[0]!["league/elo/latest"]).toBeUndefined();
    // The learner moved; its first snapshot, frozen, did not.
    expect(await probe(learner.policy)).not.toEqual(initial);
    const frozen = adapter(9);
    await frozen.client.loadState(path.join(work, "run-a", "step-0"));
    expect(await probe(frozen.policy)).toEqual(initial);
  });

  it("a resumed run reloads its frozen members and continues the league it saved", async () => {
    const config = experiment({ algorithm: { name: "grpo", steps: 5, groupSize: 4, groupsPerStep: 4, learningRate: 5e-2, league } });
    const dir = path.join(work, "run-b");
    const learner = adapter(3);
    let stopAfter = 3;
    let steps = 0;
    const first = await trainRl({
      config,
      policy: learner.policy,
      environment: byteDuel,
      protocol,
      league: snapshotsOf(learner.client, dir),
      hooks: { onMetrics: (step) => void (steps = step), shouldStop: () => steps >= stopAfter },
    });
    expect(first.stopped).toBe(true);
    expect(first.steps).toBe(3);
    // What a paused run's checkpoint holds: the learner's state and the league's.
    await learner.client.saveState(path.join(dir, "ckpt-3"));
    const state: LeagueState = JSON.parse(JSON.stringify(first.league));
    expect(state.games).toHaveLength(48);
    stopAfter = Infinity;

    const resumed = adapter(3);
    await resumed.client.loadState(path.join(dir, "ckpt-3"));
    const { snapshots, opened } = snapshotsOf(resumed.client, dir);
    const second = await trainRl({
      config,
      policy: resumed.policy,
      environment: byteDuel,
      protocol,
      startStep: 3,
      league: { snapshots, state },
    });
    // The members frozen before the stop were loaded, not frozen again; those after were frozen as they came.
    expect(opened.slice(0, 2)).toEqual(["step-0", "step-2"]);
    expect(second.league!.members.map((m) => m.id)).toEqual(["step-0", "step-2", "step-4", "step-5"]);
    expect(second.league!.games.slice(0, 48)).toEqual(state.games);
    expect(second.league!.games).toHaveLength(80);
  });

  it("keeps at most maxMembers snapshots: the oldest are dropped, never drawn again, their games still rated", async () => {
    const config = experiment({
      algorithm: { name: "grpo", steps: 8, groupSize: 4, groupsPerStep: 4, learningRate: 5e-2, league: { ...league, every: 1, maxMembers: 3 } },
    });
    const dir = path.join(work, "run-cap");
    const learner = adapter(3);
    const opponentsByStep: Set<string>[] = [];
    const metrics: Record<string, number>[] = [];
    let stopAfter = 5;
    let steps = 0;
    const hooks = {
      onMetrics: (step: number, m: Record<string, number>) => {
        steps = step;
        if ("train/grad_norm" in m) metrics.push(m);
      },
      onRollouts: (step: number, split: string, groups: Trajectory[][]) => {
        if (split !== "train") return;
        const seen = (opponentsByStep[step] ??= new Set());
        for (const t of groups.flat()) for (const agent of ["A", "B"]) if (!seatOf(t, agent)!.trains) seen.add(seatOf(t, agent)!.id);
      },
      shouldStop: () => steps >= stopAfter,
    };
    const first = await trainRl({ config, policy: learner.policy, environment: byteDuel, protocol, league: snapshotsOf(learner.client, dir), hooks });
    // Snapshots after every step; from the fourth on the league holds 3, the oldest dropped.
    expect(metrics.map((m) => m["league/members"])).toEqual([2, 3, 3, 3, 3]);
    expect(metrics.map((m) => m["league/dropped"])).toEqual([undefined, undefined, 1, 2, 3]);
    const state = JSON.parse(JSON.stringify(first.league));
    expect(state.dropped).toEqual(["step-0", "step-1", "step-2"]);
    // A step draws its opponents from the league as it stood: at step 5 (after step 4's snapshot) steps 2 to 4.
    for (const opponent of opponentsByStep[5]!) expect(["step-2", "step-3", "step-4"]).toContain(opponent);
    // Every member keeps its games and its rating.
    expect(state.members.map((m: { id: string }) => m.id)).toEqual(["step-0", "step-1", "step-2", "step-3", "step-4", "step-5", "step-6"]);
    expect(state.games).toHaveLength(5 * 16);

    // Resumed from step 5, the dropped members are not loaded again, and no later step draws them.
    await learner.client.saveState(path.join(dir, "ckpt-5"));
    stopAfter = Infinity;
    const resumed = adapter(3);
    await resumed.client.loadState(path.join(dir, "ckpt-5"));
    const { snapshots, opened } = snapshotsOf(resumed.client, dir);
    const second = await trainRl({ config, policy: resumed.policy, environment: byteDuel, protocol, startStep: 5, league: { snapshots, state }, hooks });
    expect(opened.slice(0, 3)).toEqual(["step-3", "step-4", "step-5"]);
    for (const step of [6, 7, 8]) for (const opponent of opponentsByStep[step]!) expect(["step-0", "step-1", "step-2"]).not.toContain(opponent);
    expect(second.league!.dropped).toEqual(["step-0", "step-1", "step-2", "step-3", "step-4", "step-5"]);
    expect(second.league!.games).toHaveLength(8 * 16);
  });

  it("refuses a learner that is not an agent of the protocol", async () => {
    const learner = adapter(3);
    const config = experiment({ algorithm: { name: "grpo", steps: 1, league: { ...league, learner: "C" } } });
    await expect(
      trainRl({ config, policy: learner.policy, environment: byteDuel, protocol, league: snapshotsOf(learner.client, path.join(work, "run-c")) }),
    ).rejects.toThrow("algorithm.league.learner: 'C' is not an agent of the protocol; accepted: A, B, both-seats-alternating");
  });
});

describe("the config of policies and leagues", () => {
  const input = (patch: Record<string, unknown>) => ({ name: "x", environment: "tic-tac-toe-duel", agent: { base: "random" }, ...patch });
  const refusal = (patch: Record<string, unknown>) => {
    try {
      parseExperiment(input(patch));
    } catch (error) {
      return (error as Error).message;
    }
    return "accepted";
  };

  it("defaults to one shared policy and no league", () => {
    const config = parseExperiment(input({ protocol: { name: "turn-based", agents: ["X", "O"] } }));
    expect(config.protocol.policies).toBe("shared");
    expect(config.algorithm.league).toBeNull();
    const withLeague = parseExperiment(input({ algorithm: { league: {} } }));
    expect(withLeague.algorithm.league).toEqual({ every: 10, maxMembers: 16, mix: { latest: 0, uniform: 0, pfsp: 1 }, learner: "both-seats-alternating" });
  });

  it("refuses bad values naming the field and what is accepted", () => {
    expect(refusal({ protocol: { name: "turn-based", agents: ["X", "O"], policies: "solo" } })).toContain(
      'protocol.policies: must be one of shared, separate (got "solo")',
    );
    expect(refusal({ protocol: { name: "single-turn", policies: "separate" } })).toContain(
      "protocol.policies: separate policies need several agents (turn-based or simultaneous); single-turn has one",
    );
    expect(refusal({ algorithm: { league: { mix: { pfsp: 0 } } } })).toContain(
      "algorithm.league.mix: give at least one of latest, uniform, pfsp a weight above 0",
    );
    expect(refusal({ algorithm: { league: { every: 0 } } })).toMatch(/^algorithm\.league\.every: .*1/m);
    expect(refusal({ algorithm: { league: { maxMembers: 0 } } })).toMatch(/^algorithm\.league\.maxMembers: .*from 1 to 256/m);
    expect(refusal({ algorithm: { league: { maxMembers: 1000 } } })).toMatch(/^algorithm\.league\.maxMembers: .*from 1 to 256/m);
  });
});
