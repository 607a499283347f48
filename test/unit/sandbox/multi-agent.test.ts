/**
 * Environments with several agents run in the sandbox exactly as in-process: the same seeds and the same policy
 * give the same trajectories (agents, observations, rewards, per-agent returns), for a turn-based game with
 * `toAct`, `observe` and per-agent rewards, and for a simultaneous one with `stepTogether`; and validation's dry
 * run plays them under their protocol and names their mistakes.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { type ActRequest, type Protocol, runEpisodes, simultaneous, turnBased } from "@/lib/sdk/protocol";
import { SandboxedEnvironmentPool, runSandboxedEpisodes } from "@/server/sandbox";
import { validateExperimentSource } from "@/server/sandbox/validate";
import race from "./fixtures/multi-agent-race";
import rps from "./fixtures/multi-agent-rps";

const pools: SandboxedEnvironmentPool[] = [];
afterEach(() => pools.splice(0).forEach((pool) => pool.dispose()));

const sourceOf = (file: string) => readFileSync(fileURLToPath(new URL(`./fixtures/${file}`, import.meta.url)), "utf8");

function hashOf(text: string): number {
  let hash = 2166136261;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619) >>> 0;
  return hash;
}

/** A policy that answers each request from its prompt alone: a legal action picked by a hash, now and then an invalid one. */
async function hashedPolicy(requests: ActRequest[]) {
  return requests.map((request) => {
    const hash = hashOf(request.agent + JSON.stringify(request.messages));
    if (hash % 7 === 0) return { text: "banana" };
    const legal = request.legalActions && "actions" in request.legalActions ? request.legalActions.actions : ["1"];
    return { text: legal[hash % legal.length]! };
  });
}

async function bothWays(file: string, definition: typeof race | typeof rps, protocol: Protocol, seeds: number[]) {
  const pool = await SandboxedEnvironmentPool.create({ files: { [file]: sourceOf(file) }, entry: file });
  pools.push(pool);
  const sandboxed = await runSandboxedEpisodes(
    protocol,
    pool,
    seeds.map((seed) => ({ seed })),
    hashedPolicy,
  );
  const native = await runEpisodes(
    protocol,
    seeds.map((seed) => ({ seed, session: new EnvironmentSession(definition as typeof race) })),
    hashedPolicy,
  );
  return { sandboxed, native };
}

const seeds = Array.from({ length: 12 }, (_, i) => i);

describe("several agents in the sandbox", () => {
  it("plays a turn-based game (toAct, observe, per-agent rewards and prompts) as in-process", async () => {
    const { sandboxed, native } = await bothWays("multi-agent-race.ts", race, turnBased(["A", "B"]), seeds);
    expect(sandboxed).toEqual(native);
    // the game was really played: both agents acted, someone won, some actions were invalid, rewards were per agent
    const turns = native.flatMap((t) => t.turns);
    expect(new Set(turns.map((turn) => turn.agent))).toEqual(new Set(["A", "B"]));
    expect(turns.some((turn) => turn.info.invalid !== undefined)).toBe(true);
    expect(native.some((t) => t.agentReturns.A! > 0.5 && t.agentReturns.B! < -0.5)).toBe(true);
    expect(native[0]!.systemPrompts).toEqual({ A: expect.stringContaining("You are A"), B: expect.stringContaining("You are B") });
    expect(turns.some((turn) => turn.observation.startsWith("(B's view)"))).toBe(true);
  });

  it("plays a simultaneous game (stepTogether, per-agent legal actions) as in-process, one crossing per round", async () => {
    const { sandboxed, native } = await bothWays("multi-agent-rps.ts", rps, simultaneous(["P", "Q"]), seeds);
    expect(sandboxed).toEqual(native);
    const turns = native.flatMap((t) => t.turns);
    expect(turns.some((turn) => turn.info.invalid !== undefined)).toBe(true);
    expect(turns.some((turn) => turn.agent === "Q" && turn.legalActions && "actions" in turn.legalActions && turn.legalActions.actions.length === 2)).toBe(
      true,
    );
    for (const trajectory of native) expect(trajectory.totalReward).toBeCloseTo(trajectory.agentReturns.P! + trajectory.agentReturns.Q!, 12);
  });

  it("crosses once per round of a lane, not once per agent", async () => {
    const file = "multi-agent-rps.ts";
    const pool = await SandboxedEnvironmentPool.create({ files: { [file]: sourceOf(file) }, entry: file });
    pools.push(pool);
    let crossings = 0;
    pool.installProbe({ crossing: () => void (crossings += 1) });
    let rounds = 0;
    await runSandboxedEpisodes(
      simultaneous(["P", "Q"]),
      pool,
      seeds.map((seed) => ({ seed })),
      async (requests) => {
        rounds += 1;
        return requests.map(() => ({ text: "rock" }));
      },
      { lanes: 1 },
    );
    // three rounds of draws in one lane: one crossing for the resets, one per round
    expect(rounds).toBe(3);
    expect(crossings).toBe(1 + rounds);
  });
});

describe("validation's dry run with several agents", () => {
  const validate = (source: string, protocol: Protocol) =>
    validateExperimentSource({ "environment.ts": source }, { protocol, typeCheck: false, episodes: 3, maxSteps: 30 });

  it("plays a turn-based game and a simultaneous one under their protocols", async () => {
    const turns = await validate(sourceOf("multi-agent-race.ts"), turnBased(["A", "B"]));
    expect(turns.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    expect(turns.episodes.map((e) => e.actions)).toEqual(["demonstrator", "legal", "probes"]);
    expect(turns.episodes[0]!.turns).toBeGreaterThan(1);
    // every agent's rewards count: the demonstrator adds its secret number each turn (+0.1, less the step cost
    // of 0.01), and the winning move pays +1 and -1
    const { totalReward, turns: played, done } = turns.episodes[0]!;
    expect(totalReward).toBeCloseTo(done ? (played - 1) * 0.09 - 0.01 : played * 0.09, 9);
    const rounds = await validate(sourceOf("multi-agent-rps.ts"), simultaneous(["P", "Q"]));
    expect(rounds.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    // the demonstrator's paper beats rock: three rounds, P +3 and Q -3
    expect(rounds.episodes[0]).toMatchObject({ turns: 3, done: true, totalReward: 0, actions: "demonstrator" });
  });

  it("names a toAct that answers an agent the protocol does not have", async () => {
    const source = sourceOf("multi-agent-race.ts").replace(
      `toAct: (state) => (state.counts.A <= state.counts.B ? "A" : "B"),`,
      `toAct: (state) => (state.moves < 2 ? "A" : "C"),`,
    );
    const report = await validate(source, turnBased(["A", "B"]));
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]!.message).toMatch(/^step 2 of episode 0 \(seed 0\): toAct\(\) returned "C"; it must name one of the protocol's agents: A, B/);
    expect(report.diagnostics[0]!.line).not.toBeNull();
  });

  it("names a reward for an agent the protocol does not have", async () => {
    const source = sourceOf("multi-agent-race.ts").replace("rewards: add === state.secrets[self] ? { [self]: 0.1 } : {},", "rewards: { Z: 1 },");
    const report = await validate(source, turnBased(["A", "B"]));
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]!.message).toMatch(/step\(\) returned rewards\.Z, but 'Z' is not an agent of this protocol; its agents are A, B/);
  });

  it("says a simultaneous protocol needs stepTogether", async () => {
    const source = sourceOf("multi-agent-race.ts");
    const report = await validate(source, simultaneous(["A", "B"]));
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]!.message).toMatch(/the simultaneous protocol needs stepTogether\(state, actions, \{ rng \}\)/);
  });

  it("says the functions for several agents go unused under one agent", async () => {
    const report = await validateExperimentSource({ "environment.ts": sourceOf("multi-agent-rps.ts") }, { typeCheck: false, episodes: 1 });
    expect(report.diagnostics).toContainEqual(
      expect.objectContaining({ severity: "info", message: expect.stringMatching(/^observe, stepTogether count only under a protocol with several agents/) }),
    );
  });
});
