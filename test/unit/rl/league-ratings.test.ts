/**
 * Elo ratings from games: the Bradley–Terry fit finds the strengths that generated the games, its bootstrap
 * intervals cover them and narrow as games accumulate, the prior keeps an unbeaten member finite, and the
 * ranking follows the results.
 */
import { describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";
import { expectedScore, fitRatings, type GameRecord } from "@/lib/rl/ratings";

const truth = [800, 900, 1000, 1100, 1200]; // mean 1000, the default anchor
const ids = truth.map((_, i) => `m${i}`);

/** `count` games between random pairs; a fifth of them drawn, the rest won as the true ratings say (expected score exact). */
function simulate(count: number, seed: number, ratings = truth): GameRecord[] {
  const rng = new Rng(seed);
  const games: GameRecord[] = [];
  for (let g = 0; g < count; g++) {
    const a = Math.floor(rng.uniform() * ratings.length);
    let b = Math.floor(rng.uniform() * (ratings.length - 1));
    if (b >= a) b++;
    const p = expectedScore(ratings[a]!, ratings[b]!);
    const drawn = rng.uniform() < 0.2;
    const score = drawn ? 0.5 : rng.uniform() < (p - 0.1) / 0.8 ? 1 : 0;
    games.push({ a: ids[a]!, b: ids[b]!, score });
  }
  return games;
}

describe("fitRatings", () => {
  it("recovers the ratings that generated the games, inside their 95% intervals most of the time", () => {
    let covered = 0;
    let total = 0;
    let worst = 0;
    for (let league = 0; league < 8; league++) {
      const rows = fitRatings(ids, simulate(800, 100 + league), { resamples: 200, seed: league });
      rows.forEach((row, i) => {
        total++;
        if (row.low <= truth[i]! && truth[i]! <= row.high) covered++;
        worst = Math.max(worst, Math.abs(row.rating - truth[i]!));
        expect(row.low).toBeLessThan(row.rating);
        expect(row.high).toBeGreaterThan(row.rating);
      });
    }
    // Nominal 95%: of 40 intervals, at least 34 cover (a fit on the wrong scale, 400·ln instead of 400·log10, covers 9).
    expect(total).toBe(40);
    expect(covered).toBeGreaterThanOrEqual(34);
    expect(worst).toBeLessThan(90);
  });

  it("narrows the intervals as games accumulate (about as 1/√games)", () => {
    const width = (games: number) => {
      const rows = fitRatings(ids, simulate(games, 7), { resamples: 300, seed: 1 });
      return rows.reduce((sum, row) => sum + (row.high - row.low), 0) / rows.length;
    };
    const few = width(100);
    const many = width(1600);
    // 16 times the games: a quarter of the width in theory.
    expect(many).toBeLessThan(few / 2.5);
    expect(many).toBeGreaterThan(few / 6);
  });

  it("keeps a member that won every game finite, through the prior draws", () => {
    const games: GameRecord[] = [];
    for (let g = 0; g < 10; g++) {
      games.push({ a: "champ", b: "x", score: 1 }, { a: "y", b: "champ", score: 0 }, { a: "x", b: "y", score: g % 2 });
    }
    const rows = fitRatings(["champ", "x", "y"], games, { resamples: 200 });
    const [champ, x, y] = rows;
    for (const row of rows) for (const value of [row.rating, row.low, row.high]) expect(Number.isFinite(value)).toBe(true);
    expect(champ!.rating).toBeGreaterThan(x!.rating + 200);
    expect(champ!.rating - Math.max(x!.rating, y!.rating)).toBeLessThan(800);
    expect(champ).toMatchObject({ games: 20, wins: 20, draws: 0, losses: 0 });
    // Without the prior the same record drives the champion's rating off the scale.
    const [bare] = fitRatings(["champ", "x", "y"], games, { priorDraws: 0, resamples: 0 });
    expect(bare!.rating - champ!.rating).toBeGreaterThan(1000);
  });

  it("reverses the ranking, mirrored about the anchor, when every result is reversed", () => {
    const games: GameRecord[] = [];
    for (let g = 0; g < 10; g++) games.push({ a: "p", b: "q", score: g < 7 ? 1 : 0 }, { a: "q", b: "r", score: g < 7 ? 1 : g === 7 ? 0.5 : 0 });
    const order = (rows: { id: string; rating: number }[]) => [...rows].sort((u, v) => v.rating - u.rating).map((row) => row.id);
    const forward = fitRatings(["p", "q", "r"], games, { resamples: 0 });
    const flipped = fitRatings(
      ["p", "q", "r"],
      games.map((game) => ({ ...game, score: 1 - game.score })),
      { resamples: 0 },
    );
    expect(order(forward)).toEqual(["p", "q", "r"]);
    expect(order(flipped)).toEqual(["r", "q", "p"]);
    forward.forEach((row, i) => expect(flipped[i]!.rating).toBeCloseTo(2000 - row.rating, 6));
    expect(forward[1]).toMatchObject({ games: 20, wins: 10, draws: 1, losses: 9 });
  });

  it("pins a chosen member at the anchor, keeping every difference", () => {
    const games = simulate(300, 3);
    const byMean = fitRatings(ids, games, { resamples: 100 });
    const byFirst = fitRatings(ids, games, { anchor: { to: "member", id: "m0", rating: 0 }, resamples: 100 });
    expect(byFirst[0]).toMatchObject({ rating: 0, low: 0, high: 0 });
    byMean.forEach((row, i) => expect(byFirst[i]!.rating - byFirst[0]!.rating).toBeCloseTo(row.rating - byMean[0]!.rating, 6));
    // The same seed draws the same resamples: a table is reproducible.
    expect(fitRatings(ids, games, { resamples: 100 })).toEqual(byMean);
    expect(() => fitRatings(ids, [{ a: "m0", b: "nobody", score: 1 }])).toThrow(/names 'nobody', who is not a member/);
    expect(() => fitRatings(ids, games, { anchor: { to: "member", id: "zz" } })).toThrow(/anchor member 'zz' is not among the members/);
  });
});
