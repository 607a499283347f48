/**
 * A league run's table, as the run page shows it: every member (a snapshot of the learner) with its Elo and 95%
 * bootstrap interval from the games recorded so far (the first member pinned at 1000, as the run's `league/elo/*`
 * metrics are), its record, and how the learner scored against it in each training period.
 *
 * A training period is the steps between two snapshots: the learner's games in it are recorded under the member
 * it became at the period's end (lib/rl/league-training.ts), so the learner's score against member m in period k is
 * the score of member k against m in k's own games. The newest period is the current policy's.
 */
import type { LeagueMember, LeagueState } from "./league";
import { fitRatings, type Rating } from "./ratings";

/** The league's state (members and games) in each checkpoint of a league run, beside the weights. */
export const LEAGUE_FILE = "league.json";

/** Bootstrap resamples of the table's intervals: as many as the run's own `league/elo/latest_low/high` use. */
const RESAMPLES = 200;

/** A member with its fitted rating and record (ratings.ts), as the table lists it. */
export type LeagueTableMember = LeagueMember &
  Omit<Rating, "id"> & {
    /** The learner itself, still training (its snapshot is due at `step`): its games are the current period's. */
    training: boolean;
    /** Dropped past the league's cap (`algorithm.league.maxMembers`): no longer an opponent; its games still count. */
    dropped: boolean;
  };

/** The learner's results over one period against one member: points (a draw half) over games. */
export type PeriodScore = { score: number; games: number };

export type LeagueTable = {
  /** In the order they joined (by step). */
  members: LeagueTableMember[];
  /**
   * The training periods, oldest first: `learner` is the member the learner became (or is becoming) at `step`, and
   * `scores` its score against each member it played in that period (by member id).
   */
  periods: { learner: string; label: string; step: number; scores: Record<string, PeriodScore> }[];
  games: number;
};

/**
 * The table of a league saved at checkpoint step `step`: members whose snapshot step lies after it are the learner,
 * still training; `state.dropped` names those dropped past the league's cap.
 */
export function leagueTable(state: LeagueState & { dropped?: string[] }, step: number): LeagueTable {
  const dropped = new Set(state.dropped ?? []);
  const members = [...state.members];
  if (members.length === 0) return { members: [], periods: [], games: 0 };
  const ids = members.map((member) => member.id);
  const ratings = fitRatings(ids, state.games, { anchor: { to: "member", id: ids[0]! }, resamples: RESAMPLES, seed: 0 });
  const periods = members.slice(1).map((learner) => {
    const scores: Record<string, PeriodScore> = {};
    // The learner's games are recorded from its side (`a`); a later learner's games against this member, once frozen, are not its own.
    for (const game of state.games) {
      if (game.a !== learner.id) continue;
      const entry = (scores[game.b] ??= { score: 0, games: 0 });
      entry.score += game.score;
      entry.games += 1;
    }
    for (const entry of Object.values(scores)) entry.score /= entry.games;
    return { learner: learner.id, label: learner.label, step: learner.step, scores };
  });
  return {
    members: members.map((member, i) => {
      const { rating, low, high, games, wins, draws, losses } = ratings[i]!;
      return { ...member, training: member.step > step, dropped: dropped.has(member.id), rating, low, high, games, wins, draws, losses };
    }),
    // A period whose learner has played nothing yet (its snapshot just taken, the next not begun) says nothing.
    periods: periods.filter((period) => Object.keys(period.scores).length > 0),
    games: state.games.length,
  };
}
