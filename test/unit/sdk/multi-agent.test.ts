/**
 * Several agents in-process: `toAct` picks who acts, `observe` gives each agent its own view, rewards are per agent
 * and land once, and the simultaneous protocol's barrier admits exactly one action per agent per round.
 */
import { describe, expect, it } from "vitest";
import { guessNumber } from "@/lib/envs/guess-number";
import { EnvironmentSession, defineEnvironment } from "@/lib/sdk/environment";
import { type ActRequest, RoundBarrier, multiTurn, rewardTo, runEpisodes, simultaneous, turnBased } from "@/lib/sdk/protocol";
import race from "../sandbox/fixtures/multi-agent-race";
import rps from "../sandbox/fixtures/multi-agent-rps";

function hashOf(text: string): number {
  let hash = 2166136261;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619) >>> 0;
  return hash;
}

/** Answers each request from its prompt: a legal action picked by a hash, now and then an invalid one; logs the requests. */
function hashedPolicy(log: ActRequest[][] = []) {
  return async (requests: ActRequest[]) => {
    log.push(requests);
    return requests.map((request) => {
      const hash = hashOf(request.agent + JSON.stringify(request.messages));
      if (hash % 7 === 0) return { text: "banana" };
      const legal = request.legalActions && "actions" in request.legalActions ? request.legalActions.actions : ["1"];
      return { text: legal[hash % legal.length]! };
    });
  };
}

const seeds = Array.from({ length: 24 }, (_, i) => i);

/** A counter the agents raise in turn; `schedule` says who acts at each move (toAct), so the order is not a rotation. */
const scheduled = defineEnvironment<{ moves: number; log: string[] }, string>({
  name: "scheduled",
  data: { kind: "free" },
  systemPrompt: "go",
  maxTurns: 20,
  reset: () => ({ state: { moves: 0, log: [] }, observation: "start" }),
  toAct: (state) => "AABABBA"[state.moves]!,
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, action, { agent }) => {
    const next = { moves: state.moves + 1, log: [...state.log, `${agent}:${action}`] };
    return { state: next, observation: `move ${next.moves}`, reward: 0, done: next.moves === 7 };
  },
});

describe("turn-based with several agents", () => {
  it("follows toAct's order, not the protocol's rotation, and steps as the agent toAct named", async () => {
    const [trajectory] = await runEpisodes(turnBased(["A", "B"]), [{ session: new EnvironmentSession(scheduled), seed: 0 }], async (requests) =>
      requests.map((r) => ({ text: r.agent.toLowerCase() })),
    );
    expect(trajectory!.turns.map((turn) => turn.agent).join("")).toBe("AABABBA");
    expect(trajectory!.turns.map((turn) => turn.action).join("")).toBe("aababba");
  });

  it("shows each agent only its own observation, under its own system prompt", async () => {
    const log: ActRequest[][] = [];
    await runEpisodes(
      turnBased(["A", "B"]),
      seeds.map((seed) => ({ session: new EnvironmentSession(race), seed })),
      hashedPolicy(log),
    );
    const requests = log.flat();
    expect(new Set(requests.map((r) => r.agent))).toEqual(new Set(["A", "B"]));
    for (const request of requests) {
      const other = request.agent === "A" ? "B" : "A";
      const [system, ...rest] = request.messages;
      expect(system!.content).toContain(`You are ${request.agent}.`);
      for (const message of rest.filter((m) => m.role === "user")) {
        expect(message.content).toContain(`(${request.agent}'s view)`);
        expect(message.content).not.toContain(`(${other}'s view)`);
      }
    }
  });

  it("lands each reward once: per-agent returns sum to the total, and each is its turns' rewardTo", async () => {
    const trajectories = await runEpisodes(
      turnBased(["A", "B"]),
      seeds.map((seed) => ({ session: new EnvironmentSession(race), seed })),
      hashedPolicy(),
    );
    expect(trajectories.some((t) => t.turns.some((turn) => turn.info.invalid !== undefined))).toBe(true);
    for (const trajectory of trajectories) {
      const { agentReturns, totalReward, turns } = trajectory;
      expect(agentReturns.A! + agentReturns.B!).toBeCloseTo(totalReward, 12);
      expect(trajectory.rewards.env).toBeCloseTo(totalReward, 12);
      for (const agent of ["A", "B"]) expect(turns.reduce((sum, turn) => sum + rewardTo(turn, agent), 0)).toBeCloseTo(agentReturns[agent]!, 12);
      // each turn's own reward is its agent's share of that turn's rewards
      for (const turn of turns) if (turn.rewards) expect(turn.reward).toBe(turn.rewards[turn.agent] ?? 0);
    }
    // a finished race is zero-sum apart from the step costs, bonuses and penalties: the winner's +1 is the loser's -1
    const won = trajectories.filter((t) => t.turns.at(-1)!.info.winner !== undefined);
    expect(won.length).toBeGreaterThan(0);
    for (const trajectory of won) {
      const last = trajectory.turns.at(-1)!;
      const winner = last.info.winner as string;
      expect(last.rewards![winner === "A" ? "B" : "A"]).toBe(-1);
    }
  });

  it("keeps a single agent's episode as it was: no per-agent rewards, its return is the total", async () => {
    const trajectories = await runEpisodes(
      multiTurn(),
      [0, 1, 2].map((seed) => ({ session: new EnvironmentSession(guessNumber), seed })),
      async (requests) => requests.map(() => ({ text: "50" })),
    );
    for (const trajectory of trajectories) {
      expect(trajectory.turns.every((turn) => turn.rewards === undefined && turn.agent === "agent")).toBe(true);
      expect(trajectory.agentReturns).toEqual({ agent: trajectory.totalReward });
      expect(trajectory.systemPrompts).toBeUndefined();
    }
  });

  it("names a toAct that answers an agent the protocol does not have, and a reward for one", async () => {
    const stranger = defineEnvironment({ ...scheduled, toAct: () => "C" });
    await expect(runEpisodes(turnBased(["A", "B"]), [{ session: new EnvironmentSession(stranger), seed: 0 }], hashedPolicy())).rejects.toThrow(
      `toAct() returned "C"; it must name one of the protocol's agents: A, B`,
    );
    const paysZ = defineEnvironment({ ...scheduled, step: (state: { moves: number; log: string[] }) => ({ state, rewards: { Z: 1 }, done: true }) });
    await expect(runEpisodes(turnBased(["A", "B"]), [{ session: new EnvironmentSession(paysZ), seed: 0 }], hashedPolicy())).rejects.toThrow(
      "step() returned rewards.Z, but 'Z' is not an agent of this protocol; its agents are A, B",
    );
    const twice = defineEnvironment({ ...scheduled, step: (state: { moves: number; log: string[] }) => ({ state, reward: 1, rewards: { A: 0 }, done: true }) });
    await expect(runEpisodes(turnBased(["A", "B"]), [{ session: new EnvironmentSession(twice), seed: 0 }], hashedPolicy())).rejects.toThrow(
      "step() returned reward 1 and rewards.A 0 for the acting agent 'A'; give its reward once (in rewards)",
    );
  });
});

describe("the simultaneous protocol", () => {
  it("asks every agent exactly once a round, and moves the environment once on all their actions", async () => {
    const rounds: Record<string, string>[] = [];
    const counted = defineEnvironment({
      ...rps,
      stepTogether: (state: Parameters<NonNullable<typeof rps.stepTogether>>[0], actions: Record<string, string>, context: { rng: never }) => {
        rounds.push({ ...actions });
        return rps.stepTogether!(state, actions, context);
      },
    });
    const log: ActRequest[][] = [];
    const trajectories = await runEpisodes(
      simultaneous(["P", "Q"]),
      seeds.map((seed) => ({ session: new EnvironmentSession(counted), seed })),
      hashedPolicy(log),
    );
    for (const batch of log) {
      const agentsByEpisode = new Map<number, string[]>();
      for (const request of batch) agentsByEpisode.set(request.episode, [...(agentsByEpisode.get(request.episode) ?? []), request.agent]);
      for (const agents of agentsByEpisode.values()) expect(agents).toEqual(["P", "Q"]);
    }
    for (const actions of rounds) expect(Object.keys(actions).sort()).toEqual(["P", "Q"]);
    // every round that parsed reached stepTogether once; each round is two turns, P's then Q's
    const parsedRounds = trajectories.flatMap((t) =>
      t.turns.filter((turn, i) => i % 2 === 1 && turn.info.invalid === undefined && t.turns[i - 1]!.info.invalid === undefined),
    );
    expect(rounds).toHaveLength(parsedRounds.length);
    for (const trajectory of trajectories) {
      expect(trajectory.turns.map((turn) => turn.agent).join("")).toMatch(/^(PQ)+$/);
      // the round's rewards sit on its last turn; the earlier turn carries none
      for (const [i, turn] of trajectory.turns.entries()) {
        if (i % 2 === 0) expect([turn.rewards, turn.reward]).toEqual([undefined, 0]);
        else expect(turn.rewards).toBeDefined();
      }
      expect(trajectory.agentReturns.P! + trajectory.agentReturns.Q!).toBeCloseTo(trajectory.totalReward, 12);
      for (const agent of ["P", "Q"])
        expect(trajectory.turns.reduce((sum, turn) => sum + rewardTo(turn, agent), 0)).toBeCloseTo(trajectory.agentReturns[agent]!, 12);
    }
  });

  it("shows each agent its own view and its own legal actions", async () => {
    const log: ActRequest[][] = [];
    await runEpisodes(
      simultaneous(["P", "Q"]),
      seeds.map((seed) => ({ session: new EnvironmentSession(rps), seed })),
      hashedPolicy(log),
    );
    for (const request of log.flat()) {
      const last = request.messages.at(-1)!.content;
      expect(last).toContain(`(${request.agent}'s view)`);
      expect(last).not.toContain(`(${request.agent === "P" ? "Q" : "P"}'s view)`);
    }
    const qLegal = log
      .flat()
      .filter((r) => r.agent === "Q")
      .map((r) => (r.legalActions as { actions: string[] }).actions.length);
    expect(new Set(qLegal)).toEqual(new Set([2, 3]));
  });

  it("admits one action per agent: a second, a missing or an unknown agent's is an error", () => {
    const barrier = new RoundBarrier(["P", "Q"]);
    barrier.admit("P", "rock");
    expect(() => barrier.admit("P", "paper")).toThrow("agent 'P' acted twice in one round; each agent acts exactly once a round");
    expect(() => barrier.admit("R", "paper")).toThrow("an action from 'R', which is not an agent of this round (P, Q)");
    expect(() => barrier.close()).toThrow("the round is missing the action of 'Q'");
    barrier.admit("Q", "paper");
    expect(barrier.close()).toEqual({ P: "rock", Q: "paper" });
  });

  it("never applies a round with an agent missing or a stranger in it", () => {
    const session = new EnvironmentSession(rps);
    session.reset(3, undefined, undefined, { agents: ["P", "Q"], simultaneous: true });
    expect(() => session.stepTogether({ P: "rock" })).toThrow("round 1: no action from agent 'Q'; each agent acts exactly once a round");
    expect(() => session.stepTogether({ P: "rock", Q: "rock", R: "rock" })).toThrow(
      "round 1: an action from 'R', which is not an agent of this episode (P, Q)",
    );
    expect(session.summary()).toMatchObject({ turns: 0, state: { round: 0 } });
    const round = session.stepTogether({ P: "paper", Q: "rock" });
    expect(round).toMatchObject({ rewards: { P: 1, Q: -1 }, reward: 0, done: false, invalid: {} });
    expect(round.observations).toEqual({
      P: "(P's view) round 2, your wins 1, last P paper, Q rock",
      Q: "(Q's view) round 2, your wins 0, last P paper, Q rock",
    });
  });

  it("costs only the agent whose action is invalid, and ends the episode when the environment says so", async () => {
    const strict = defineEnvironment({ ...rps, invalidAction: { penalty: -2, endEpisode: true } });
    const [trajectory] = await runEpisodes(simultaneous(["P", "Q"]), [{ session: new EnvironmentSession(strict), seed: 0 }], async (requests) =>
      requests.map((r) => ({ text: r.agent === "P" ? "rock" : "lizard" })),
    );
    expect(trajectory!.turns).toHaveLength(2);
    expect(trajectory!.turns[1]!.rewards).toEqual({ Q: -2 });
    expect(trajectory!.agentReturns).toEqual({ P: 0, Q: -2 });
    expect(trajectory!.turns.map((turn) => turn.info.invalid)).toEqual([undefined, "'lizard' is not rock, paper or scissors"]);
  });

  it("needs stepTogether, and is not stepped turn by turn", () => {
    const session = new EnvironmentSession(race);
    expect(() => session.reset(0, undefined, undefined, { agents: ["A", "B"], simultaneous: true })).toThrow(
      "the simultaneous protocol needs stepTogether(state, actions, { rng }) in environment 'secret-race'",
    );
    const together = new EnvironmentSession(rps);
    together.reset(0, undefined, undefined, { agents: ["P", "Q"], simultaneous: true });
    expect(() => together.step("rock")).toThrow("step() under the simultaneous protocol");
    expect(() => simultaneous(["P"])).toThrow("simultaneous needs at least two agents; got 1");
  });
});
