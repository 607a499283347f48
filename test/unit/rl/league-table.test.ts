/**
 * The league table of a run's page (lib/rl/league-table.ts): each member's Elo and record from the league's games,
 * and the learner's score against each member period by period, read from the learner's own side of its games.
 */
import { describe, expect, it } from "vitest";
import type { LeagueState } from "@/lib/rl/league";
import { leagueTable } from "@/lib/rl/league-table";

/** `n` games of `a` (the learner of its period) against `b`, `wins` of them won and the rest lost. */
const games = (a: string, b: string, n: number, wins: number) => Array.from({ length: n }, (_, i) => ({ a, b, score: i < wins ? 1 : 0 }));

const members = [
  { id: "step-0", label: "initial", step: 0 },
  { id: "step-2", label: "step 2", step: 2 },
  { id: "step-4", label: "step 4", step: 4 },
  { id: "step-6", label: "step 6", step: 6 },
];

describe("a league's table", () => {
  // Period →2: the learner beats the initial policy 6 of 10. Period →4: 9 of 10 against the initial, 7 of 10 against
  // step 2. Period →6 (the current one, saved at step 5): 5 of 8 against step 4.
  const state: LeagueState = {
    members,
    games: [...games("step-2", "step-0", 10, 6), ...games("step-4", "step-0", 10, 9), ...games("step-4", "step-2", 10, 7), ...games("step-6", "step-4", 8, 5)],
  };
  const table = leagueTable(state, 5);

  it("gives the learner's score against each member in each training period, from its own games only", () => {
    expect(table.periods.map((p) => p.learner)).toEqual(["step-2", "step-4", "step-6"]);
    expect(table.periods[0]!.scores).toEqual({ "step-0": { score: 0.6, games: 10 } });
    // Step 2's games once frozen (against the learner of →4) are not its period's.
    expect(table.periods[1]!.scores).toEqual({ "step-0": { score: 0.9, games: 10 }, "step-2": { score: 0.7, games: 10 } });
    expect(table.periods[2]!.scores).toEqual({ "step-4": { score: 5 / 8, games: 8 } });
    expect(table.games).toBe(38);
  });

  it("rates the first member at 1000 with a zero-width interval, and a learner that keeps winning higher each time", () => {
    const [first, second, third] = table.members;
    expect(first).toMatchObject({ id: "step-0", rating: 1000, low: 1000, high: 1000, games: 20, wins: 5, losses: 15, draws: 0 });
    expect(second!.rating).toBeGreaterThan(first!.rating);
    expect(third!.rating).toBeGreaterThan(second!.rating);
    for (const m of table.members) {
      expect(m.low).toBeLessThanOrEqual(m.rating);
      expect(m.high).toBeGreaterThanOrEqual(m.rating);
    }
    expect(second).toMatchObject({ games: 20, wins: 6 + 3, losses: 4 + 7 });
  });

  it("marks the members not yet snapshotted at the checkpoint's step as the learner, still training", () => {
    expect(table.members.map((m) => m.training)).toEqual([false, false, false, true]);
    expect(leagueTable(state, 6).members.at(-1)!.training).toBe(false);
  });

  it("marks the members dropped past the league's cap, still rated on their games", () => {
    const capped = leagueTable({ ...state, dropped: ["step-0"] }, 5);
    expect(capped.members.map((m) => m.dropped)).toEqual([true, false, false, false]);
    expect(capped.members.map((m) => m.rating)).toEqual(table.members.map((m) => m.rating));
    expect(table.members.every((m) => !m.dropped)).toBe(true);
  });

  it("leaves out a period whose learner has not played yet, and an empty league is an empty table", () => {
    const justSnapshotted = leagueTable({ members: members.slice(0, 3), games: games("step-2", "step-0", 4, 2) }, 2);
    expect(justSnapshotted.periods.map((p) => p.learner)).toEqual(["step-2"]);
    expect(leagueTable({ members: [], games: [] }, 0)).toEqual({ members: [], periods: [], games: 0 });
  });
});
