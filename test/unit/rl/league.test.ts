/**
 * The league: pairings that give every member its games, an opponent mix that leans on the members the learner
 * loses to, and matches between real (tiny) policies on the two-player tic-tac-toe, decided by the agents' returns.
 */
import { describe, expect, it } from "vitest";
import { cellName, ticTacToeDuel } from "@/lib/envs/board-games";
import { Rng } from "@/lib/model/rng";
import { League, matchRecords, playMatch } from "@/lib/rl/league";
import type { PolicyModel } from "@/lib/rl/primitives";
import { defineEnvironment } from "@/lib/sdk/environment";
import { turnBased } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";

function leagueOf(count: number): League {
  const league = new League();
  for (let i = 0; i < count; i++) league.add({ id: `s${i * 10}`, label: `step ${i * 10}`, step: i * 10 });
  return league;
}

describe("League pairings", () => {
  it("gives every member at least k games, the fewest-played first, spread over opponents", () => {
    const league = leagueOf(6);
    // s0 already has 12 games, all against s10.
    for (let g = 0; g < 12; g++) league.record({ a: "s0", b: "s10", score: g % 2 });
    const pairings = league.nextPairings({ minGames: 10 });
    for (const [a, b] of pairings)
      league.record([
        { a, b, score: 1 },
        { a: b, b: a, score: 1 },
      ]);
    const opponents = new Map<string, Set<string>>();
    for (const { a, b } of league.games) {
      opponents.set(a, (opponents.get(a) ?? new Set()).add(b));
      opponents.set(b, (opponents.get(b) ?? new Set()).add(a));
    }
    for (const { id } of league.members) {
      expect(league.gamesOf(id), id).toBeGreaterThanOrEqual(10);
      // 10 games are 5 pairings of 2: one with each of the 5 others, no opponent twice while another is unmet.
      expect(opponents.get(id)!.size, id).toBeGreaterThanOrEqual(4);
    }
    // The member that had its games already is scheduled least.
    const scheduled = (id: string) => pairings.filter((pair) => pair.includes(id)).length;
    expect(scheduled("s0")).toBeLessThan(Math.min(...["s20", "s30", "s40", "s50"].map(scheduled)));
    expect(league.nextPairings({ minGames: 10 })).toEqual([]);
  });
});

describe("League opponent mix", () => {
  // The learner beats s0 nine times in ten, s10 half the time, and loses to s20 nine times in ten.
  const league = leagueOf(3);
  league.add({ id: "learner", label: "learner", step: 30 });
  for (let g = 0; g < 10; g++) {
    league.record([
      { a: "learner", b: "s0", score: g < 9 ? 1 : 0 },
      { a: "s10", b: "learner", score: g < 5 ? 1 : 0 },
      { a: "learner", b: "s20", score: g < 1 ? 1 : 0 },
    ]);
  }

  it("weights prioritised fictitious self-play towards the members the learner loses to", () => {
    const hard = league.opponentWeights("learner", { pfsp: 1 });
    expect(hard.s20).toBeGreaterThan(hard.s10!);
    expect(hard.s10).toBeGreaterThan(hard.s0!);
    expect(hard.s20).toBeGreaterThan(0.6);
    // "even" weighting favours the member beaten half the time over both the mastered and the hopeless.
    const even = league.opponentWeights("learner", { pfsp: 1, pfspWeighting: "even" });
    expect(even.s10).toBeGreaterThan(even.s0!);
    expect(even.s10).toBeGreaterThan(even.s20!);
    // The prior keeps p off 0 and 1: 9 wins in 10 with 2 virtual draws is 10/12.
    expect(league.winRate("learner", "s0")).toBeCloseTo(10 / 12, 10);
    expect(league.winRate("learner", "s20")).toBeCloseTo(2 / 12, 10);
    expect(Object.keys(hard).sort()).toEqual(["s0", "s10", "s20"]);
  });

  it("mixes latest, uniform and PFSP by their weights, and samples as it weights", () => {
    const latest = league.opponentWeights("learner", { latest: 1 });
    expect(latest).toEqual({ s0: 0, s10: 0, s20: 1 });
    const uniform = league.opponentWeights("learner", { uniform: 1 });
    for (const weight of Object.values(uniform)) expect(weight).toBeCloseTo(1 / 3, 10);
    const mix = { latest: 0.5, uniform: 0.25, pfsp: 0.25 };
    const weights = league.opponentWeights("learner", mix);
    const pfsp = league.opponentWeights("learner", { pfsp: 1 });
    for (const id of ["s0", "s10", "s20"]) expect(weights[id]).toBeCloseTo(0.5 * latest[id]! + 0.25 * uniform[id]! + 0.25 * pfsp[id]!, 10);
    const rng = new Rng(4);
    const counts: Record<string, number> = { s0: 0, s10: 0, s20: 0 };
    for (let i = 0; i < 4000; i++) counts[league.sampleOpponent("learner", mix, rng)]! += 1;
    for (const id of ["s0", "s10", "s20"]) expect(Math.abs(counts[id]! / 4000 - weights[id]!)).toBeLessThan(0.03);
    expect(() => league.opponentWeights("learner", {})).toThrow(/at least one of latest, uniform, pfsp/);
  });

  it("survives a trip through JSON and names what is wrong", () => {
    const copy = League.from(JSON.parse(JSON.stringify(league)));
    expect(copy.members).toEqual(league.members);
    expect(copy.ratings({ resamples: 50 })).toEqual(league.ratings({ resamples: 50 }));
    expect(copy.ratings({ resamples: 0 }).find((row) => row.id === "s20")).toMatchObject({ label: "step 20", games: 10, wins: 9, losses: 1 });
    expect(() => copy.record({ a: "learner", b: "s99", score: 1 })).toThrow(/No league member with id 's99'/);
    expect(() => copy.add({ id: "s0", label: "again", step: 0 })).toThrow(/already in the league/);
  });
});

describe("playMatch", () => {
  // The two-player board, with the free cells as legal actions so that a random model plays whole games.
  const duel = defineEnvironment({
    ...ticTacToeDuel,
    actions: (state) => state.cells.flatMap((cell, i) => (cell === "." ? [cellName(i, state.size)] : [])),
  });
  const protocol = turnBased(["X", "O"]);
  const tinyPolicy = (seed: number): PolicyModel => {
    const base = BaseModel.create({ vocabSize: 262, contextLength: 384, dModel: 32, nLayers: 1, nHeads: 2 }, { seed });
    return { primitives: new TrainingClient(base, { seed }), tokenizer: base.tokenizer, contextLength: 384 };
  };

  it("plays a policy against itself about evenly, each side opening half the games, winners from the returns", async () => {
    const policy = tinyPolicy(1);
    const seeds = Array.from({ length: 40 }, (_, i) => i);
    const games = await playMatch({ protocol, environment: duel, seats: { X: policy, O: policy }, sampling: { maxTokens: 3, temperature: 1, seed: 5 }, seeds });
    expect(games).toHaveLength(40);
    expect(games.filter((game) => game.seating.X === "X")).toHaveLength(20);
    let openerWins = 0;
    let decided = 0;
    for (const game of games) {
      const { trajectory } = game;
      expect(game.truncated).toBe(false);
      expect(trajectory.invalidActions).toBe(0);
      // The last mover's line wins (the board says so in the step's info); a full board without a line is a draw.
      const winnerMark = trajectory.turns.at(-1)!.info.winner;
      expect(game.winner).toBe(winnerMark === "draw" ? null : game.seating[winnerMark as string]);
      expect(game.returns[game.seating.X!]).toBe(trajectory.agentReturns.X);
      if (game.winner !== null) {
        decided++;
        if (game.winner === game.seating.X) openerWins++;
        expect(game.scores[game.winner]).toBe(1);
      } else expect(game.scores).toEqual({ X: 0.5, O: 0.5 });
    }
    // Random play: the opener wins about 58% of games, the other side 29%; seated alternately, each player scores about half.
    expect(openerWins).toBeGreaterThan(decided / 2);
    const scoreOf = (player: string) => games.reduce((sum, game) => sum + game.scores[player]!, 0) / games.length;
    expect(scoreOf("X")).toBeGreaterThan(0.3);
    expect(scoreOf("X")).toBeLessThan(0.7);
    expect(scoreOf("X") + scoreOf("O")).toBeCloseTo(1, 10);
    const records = matchRecords(games, { X: "home", O: "away" });
    expect(records).toHaveLength(40);
    expect(records.reduce((sum, r) => sum + r.score, 0) / 40).toBeCloseTo(scoreOf("X"), 10);
  }, 60_000);

  it("asks each seat's own policy", async () => {
    const [a, b] = [tinyPolicy(1), tinyPolicy(2)];
    const greedy = { maxTokens: 3, temperature: 0 };
    const games = await playMatch({ protocol, environment: duel, seats: { X: a, O: b }, sampling: greedy, seeds: [0, 1] });
    expect(games.map((game) => game.seating)).toEqual([
      { X: "X", O: "O" },
      { X: "O", O: "X" },
    ]);
    let differs = 0;
    for (const game of games) {
      for (const turn of game.trajectory.turns) {
        const own = game.seating[turn.agent] === "X" ? a : b;
        const other = own === a ? b : a;
        const again = async (policy: PolicyModel) =>
          (await policy.primitives.sample([turn.promptTokens], 1, { ...greedy, constraints: [turn.legalActions!] })).samples[0]![0]!.text;
        expect(await again(own)).toBe(turn.action);
        if ((await again(other)) !== turn.action) differs++;
      }
    }
    // The two policies disagree somewhere, so the check above tells them apart.
    expect(differs).toBeGreaterThan(0);
  }, 60_000);

  it("refuses seats that do not match the protocol's agents", async () => {
    const policy = tinyPolicy(1);
    await expect(playMatch({ protocol, environment: duel, seats: { X: policy, Y: policy }, sampling: { maxTokens: 3 }, seeds: [0] })).rejects.toThrow(
      /missing O, unknown Y/,
    );
  });
});
