/**
 * A league of frozen policies: the snapshots a self-play run keeps (its members), the games they played against
 * each other, their Elo ratings (lib/rl/ratings.ts), which pairs should play next, and which member the learner
 * should train against. Also `playMatch`, which plays policies against each other through a protocol and
 * reports each game's winner from the agents' returns.
 *
 * A League holds data only (members and games, plain JSON: `toJSON` and `League.from` carry it through a
 * checkpoint); the policies themselves live wherever the caller keeps its snapshots, looked up by member id.
 */
import type { Rng } from "@/lib/model/rng";
import type { ActRequest, Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { PolicyModel, SampleOptions } from "./primitives";
import { fitRatings, type GameRecord, type Rating, type RatingOptions } from "./ratings";
import { defaultPlayer, fitsEveryContext, routedActor, type EnvironmentInfo, type EpisodePlayer } from "./rollouts";

export type LeagueMember = {
  id: string;
  /** What a person reads in a table or a chart: "step 40", "initial", "greedy bot". */
  label: string;
  /** The training step the snapshot was taken at (0 for the starting policy; a fixed opponent may use 0 too). */
  step: number;
};

export type LeagueState = { members: LeagueMember[]; games: GameRecord[] };

/**
 * Which past member the learner trains against: a mixture of three rules, each with a weight (they need not sum
 * to 1; they are normalised, and a rule with weight 0 is off).
 */
export type OpponentMix = {
  /**
   * Plain self-play: the newest member (highest step, then the last added). The learner keeps up with its latest
   * self, but can go round in circles, forgetting how to beat older strategies it no longer meets.
   */
  latest?: number;
  /**
   * Fictitious self-play: every past member equally likely. Keeps old strategies in the training mix so they stay
   * beaten; spends many games on members long since mastered.
   */
  uniform?: number;
  /**
   * Prioritised fictitious self-play (AlphaStar): past members weighted by how hard they are for the learner,
   * from its estimated win rate p against each (see `pfspWeighting`). Spends the games where they teach most.
   */
  pfsp?: number;
  /**
   * How PFSP turns the learner's win rate p into a weight. "hard": (1 − p)^pfspPower, most weight on the members
   * the learner loses to (a member it always beats gets almost none). "even": p(1 − p), most weight on members
   * it beats half the time, a curriculum that skips both the hopeless and the mastered. Default "hard".
   */
  pfspWeighting?: "hard" | "even";
  /** The exponent of "hard" weighting: 1 is proportional to losses, 2 or more concentrates on the hardest. Default 2. */
  pfspPower?: number;
  /**
   * Virtual drawn games against every member behind the win rates: p = (points + prior/2) / (games + prior). A
   * member never played starts at p = 0.5, and one loss does not make a member look unbeatable. Default 2.
   */
  winRatePrior?: number;
};

export class League {
  private readonly memberList: LeagueMember[] = [];
  private readonly gameList: GameRecord[] = [];

  static from(state: LeagueState): League {
    const league = new League();
    for (const member of state.members) league.add(member);
    league.record(state.games);
    return league;
  }

  toJSON(): LeagueState {
    return { members: this.members, games: this.games };
  }

  get members(): LeagueMember[] {
    return this.memberList.map((member) => ({ ...member }));
  }

  get games(): GameRecord[] {
    return this.gameList.map((game) => ({ ...game }));
  }

  member(id: string): LeagueMember {
    const member = this.memberList.find((m) => m.id === id);
    if (!member) throw new Error(`No league member with id '${id}'; members: ${this.memberList.map((m) => m.id).join(", ") || "none"}`);
    return { ...member };
  }

  add(member: LeagueMember): void {
    if (typeof member.id !== "string" || member.id === "") throw new Error(`a league member needs a non-empty id; got ${JSON.stringify(member.id)}`);
    if (this.memberList.some((m) => m.id === member.id)) throw new Error(`league member '${member.id}' is already in the league`);
    if (!Number.isFinite(member.step)) throw new Error(`league member '${member.id}': step must be a number; got ${member.step}`);
    this.memberList.push({ ...member });
  }

  /** Records finished games; every id must be a member's, and a score lies in [0, 1] from a's side. */
  record(games: GameRecord | readonly GameRecord[]): void {
    const list = Array.isArray(games) ? games : [games as GameRecord];
    for (const game of list) {
      for (const id of [game.a, game.b]) this.member(id);
      if (game.a === game.b) throw new Error(`a game pits '${game.a}' against itself`);
      if (!(game.score >= 0 && game.score <= 1)) throw new Error(`a game's score must lie in [0, 1] (1 a win for a, 0.5 a draw); got ${game.score}`);
    }
    for (const game of list) this.gameList.push({ a: game.a, b: game.b, score: game.score });
  }

  /** Every member's Elo rating with its interval and record (lib/rl/ratings.ts), in the order members were added. */
  ratings(options: RatingOptions = {}): (Rating & { label: string; step: number })[] {
    const rows = fitRatings(
      this.memberList.map((m) => m.id),
      this.gameList,
      options,
    );
    return rows.map((row, i) => ({ ...row, label: this.memberList[i]!.label, step: this.memberList[i]!.step }));
  }

  /** How many games `id` has played, against anyone or against `opponent` only. */
  gamesOf(id: string, opponent?: string): number {
    return this.gameList.filter(
      (g) => (g.a === id && (opponent === undefined || g.b === opponent)) || (g.b === id && (opponent === undefined || g.a === opponent)),
    ).length;
  }

  /**
   * The learner's estimated probability of beating `opponent`, draws counting half, from their recorded games
   * and `prior` virtual draws: (points + prior/2) / (games + prior).
   */
  winRate(learner: string, opponent: string, prior = 2): number {
    let points = 0;
    let games = 0;
    for (const game of this.gameList) {
      if (game.a === learner && game.b === opponent) points += game.score;
      else if (game.a === opponent && game.b === learner) points += 1 - game.score;
      else continue;
      games += 1;
    }
    return games + prior > 0 ? (points + prior / 2) / (games + prior) : 0.5;
  }

  /**
   * The pairings to play next so that every member (or those in `among`) has at least `minGames` games, each
   * pairing counting `gamesPerPairing` games (2: one with each side opening). Greedy: the member with the
   * fewest games so far (recorded plus already scheduled) is paired with the opponent it has met least, ties
   * going to the opponent with fewer games, then to the earlier added. Empty when everyone has enough.
   */
  nextPairings(options: { minGames: number; gamesPerPairing?: number; among?: readonly string[] }): [string, string][] {
    const perPairing = options.gamesPerPairing ?? 2;
    if (!Number.isInteger(perPairing) || perPairing < 1) throw new Error(`gamesPerPairing must be a whole number ≥ 1; got ${perPairing}`);
    const ids = options.among ? [...options.among] : this.memberList.map((m) => m.id);
    for (const id of ids) this.member(id);
    if (ids.length < 2) return [];
    const played = new Map(ids.map((id) => [id, this.gamesOf(id)]));
    const met = new Map<string, number>();
    const pairKey = (a: string, b: string) => (a < b ? `${a}\u0000${b}` : `${b}\u0000${a}`);
    for (const game of this.gameList) met.set(pairKey(game.a, game.b), (met.get(pairKey(game.a, game.b)) ?? 0) + 1);
    const pairings: [string, string][] = [];
    for (;;) {
      let first: string | null = null;
      for (const id of ids) if (played.get(id)! < options.minGames && (first === null || played.get(id)! < played.get(first)!)) first = id;
      if (first === null) return pairings;
      let second: string | null = null;
      for (const id of ids) {
        if (id === first) continue;
        if (second === null) {
          second = id;
          continue;
        }
        const [m, ms] = [met.get(pairKey(first, id)) ?? 0, met.get(pairKey(first, second)) ?? 0];
        if (m < ms || (m === ms && played.get(id)! < played.get(second)!)) second = id;
      }
      pairings.push([first, second!]);
      played.set(first, played.get(first)! + perPairing);
      played.set(second!, played.get(second!)! + perPairing);
      met.set(pairKey(first, second!), (met.get(pairKey(first, second!)) ?? 0) + perPairing);
    }
  }

  /**
   * The probability of each past member (every member but `learner`, or only those in `among`) being drawn as the
   * learner's opponent under `mix`. Sums to 1; empty when there is no past member.
   */
  opponentWeights(learner: string, mix: OpponentMix, among?: readonly string[]): Record<string, number> {
    const pool = this.memberList.filter((m) => m.id !== learner && (among === undefined || among.includes(m.id)));
    if (pool.length === 0) return {};
    const latestWeight = mix.latest ?? 0;
    const uniformWeight = mix.uniform ?? 0;
    const pfspWeight = mix.pfsp ?? 0;
    for (const [name, value] of Object.entries({ latest: latestWeight, uniform: uniformWeight, pfsp: pfspWeight })) {
      if (!(value >= 0) || !Number.isFinite(value)) throw new Error(`opponent mix: ${name} must be a finite weight ≥ 0; got ${value}`);
    }
    const total = latestWeight + uniformWeight + pfspWeight;
    if (total === 0) throw new Error("opponent mix: give at least one of latest, uniform, pfsp a weight above 0");
    const power = mix.pfspPower ?? 2;
    const prior = mix.winRatePrior ?? 2;
    const weights = Object.fromEntries(pool.map((m) => [m.id, 0]));

    let newest = pool[0]!;
    for (const m of pool) if (m.step >= newest.step) newest = m;
    weights[newest.id]! += latestWeight / total;
    for (const m of pool) weights[m.id]! += uniformWeight / total / pool.length;
    if (pfspWeight > 0) {
      const hardness = pool.map((m) => {
        const p = this.winRate(learner, m.id, prior);
        return mix.pfspWeighting === "even" ? p * (1 - p) : (1 - p) ** power;
      });
      const sum = hardness.reduce((a, b) => a + b, 0);
      // Every member beaten every time (weights all 0): fall back to uniform rather than divide by zero.
      pool.forEach((m, i) => (weights[m.id]! += (pfspWeight / total) * (sum > 0 ? hardness[i]! / sum : 1 / pool.length)));
    }
    return weights;
  }

  /** Draws the learner's next opponent under `mix` with `rng` (among `among`, when given); weights are those of `opponentWeights` now. */
  sampleOpponent(learner: string, mix: OpponentMix, rng: Rng, among?: readonly string[]): string {
    const weights = Object.entries(this.opponentWeights(learner, mix, among));
    if (weights.length === 0) throw new Error(`the league has no member besides the learner '${learner}' to play against`);
    let u = rng.uniform();
    for (const [id, weight] of weights) {
      if (u < weight) return id;
      u -= weight;
    }
    return weights.at(-1)![0];
  }
}

/** One game of a match. Players are named by the agent they were seated at in `seats` (their home seat). */
export type MatchGame = {
  seed: number;
  /** Which player sat at each agent this game (agent → player). */
  seating: Record<string, string>;
  /** Each player's return (its agent's entry of `Trajectory.agentReturns`). */
  returns: Record<string, number>;
  /** The player with the highest return; null when the highest is shared (a draw). */
  winner: string | null;
  /** Each player's score: 1 for a win, 0 for a loss, 0.5 for a draw, averaged over the other players when more than two play. */
  scores: Record<string, number>;
  /** The game ended because a prompt outgrew a policy's context, not by the rules (its result is what it was then). */
  truncated: boolean;
  trajectory: Trajectory;
};

/**
 * Plays policies against each other: one game per seed, players seated at the protocol's agents as `seats` says
 * for the first game and rotated by one agent each game after (with two players: swapped every game), so each
 * plays each side equally often and neither always opens. Each round's requests are routed to the policy of the
 * player at the request's agent, one batch per distinct policy (a policy playing both sides samples one batch).
 * A game's winner is the player with the highest return; players with the same return draw.
 */
export async function playMatch(options: {
  protocol: Protocol;
  /** The environment: a definition run in this process, or (with playEpisodes) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  /** The policy of each player, keyed by the agent it sits at in the first game; every agent of the protocol needs one. */
  seats: Record<string, PolicyModel>;
  sampling: SampleOptions & { maxTokens: number };
  /** One game per seed (the environment's reset seed). */
  seeds: readonly number[];
  /** Plays the episodes; the default runs the environment's definition in this process. */
  playEpisodes?: EpisodePlayer;
}): Promise<MatchGame[]> {
  const { protocol, seats, sampling, seeds } = options;
  const agents = protocol.agents;
  const missing = agents.filter((agent) => !(agent in seats));
  const extra = Object.keys(seats).filter((agent) => !agents.includes(agent));
  if (missing.length || extra.length) {
    throw new Error(
      `playMatch: seats must name each of the protocol's agents (${agents.join(", ")}) once; missing ${missing.join(", ") || "none"}, unknown ${extra.join(", ") || "none"}`,
    );
  }
  // game g: the agent at position i is played by the player whose home seat is position (i + g) mod n
  const seatings = seeds.map((_, g) => Object.fromEntries(agents.map((agent, i) => [agent, agents[(i + g) % agents.length]!])));
  const policyAt = (request: ActRequest) => seats[seatings[request.episode]![request.agent]!]!;
  const act = routedActor(policyAt, sampling);
  // A prompt must fit the context of every policy that may read it.
  const fitsContext = fitsEveryContext([...new Set(Object.values(seats))], sampling.maxTokens);

  const play = options.playEpisodes ?? defaultPlayer(options.environment);
  const trajectories = await play(
    protocol,
    seeds.map((seed) => ({ seed })),
    act,
    { fitsContext },
  );
  return trajectories.map((trajectory, g) => {
    const seating = seatings[g]!;
    const returns = Object.fromEntries(agents.map((agent) => [seating[agent]!, trajectory.agentReturns[agent] ?? 0]));
    const players = Object.keys(returns);
    const best = Math.max(...Object.values(returns));
    const leaders = players.filter((p) => returns[p] === best);
    const scores = Object.fromEntries(
      players.map((p) => {
        const others = players.filter((q) => q !== p);
        const points = others.reduce((sum, q) => sum + pairScore(returns[p]!, returns[q]!), 0);
        return [p, points / others.length];
      }),
    );
    return { seed: trajectory.seed, seating, returns, winner: leaders.length === 1 ? leaders[0]! : null, scores, truncated: trajectory.truncated, trajectory };
  });
}

/**
 * A match's games as league records: one record per pair of players per game (a higher return wins the pair, an
 * equal one draws), with each player named by its league member id in `members` (home agent → member id).
 */
export function matchRecords(games: readonly MatchGame[], members: Record<string, string>): GameRecord[] {
  const records: GameRecord[] = [];
  for (const game of games) {
    const players = Object.keys(game.returns);
    for (const p of players) if (!(p in members)) throw new Error(`matchRecords: no member id for the player seated at '${p}'`);
    for (let i = 0; i < players.length; i++) {
      for (let j = i + 1; j < players.length; j++) {
        const [a, b] = [players[i]!, players[j]!];
        records.push({ a: members[a]!, b: members[b]!, score: pairScore(game.returns[a]!, game.returns[b]!) });
      }
    }
  }
  return records;
}

/** What a player with return `own` scores against one with `other`: the higher return wins, an equal one draws. */
export function pairScore(own: number, other: number): number {
  return own > other ? 1 : own === other ? 0.5 : 0;
}
