/**
 * Self-play against a league of frozen past selves (`algorithm.league`): the learner is snapshotted into the league
 * every `every` steps; each training group seats it against a member drawn by the opponent mix (./league.ts), at
 * one agent or, alternating group by group, at each; every training game is recorded in the league, and each
 * member's Elo is fitted from those games (./ratings.ts).
 *
 * The learner's games are recorded under the member it becomes at its next snapshot (a "pending" member, not yet
 * in the opponents' pool), so each member's record holds the games it played while it trained and those it played
 * frozen afterwards; PFSP weighs opponents by the learner's win rate over its current period. The league's state
 * (members and games) is plain JSON, saved with each checkpoint; a resumed run reloads every frozen member's policy
 * through `LeagueSnapshots.load`.
 *
 * The league keeps at most `maxMembers` snapshots as opponents: past that the oldest is dropped, its policy released
 * (its folder stays, for a run resumed from an earlier checkpoint) and never drawn again; its games stay in the
 * league, so every member's Elo is still fitted on every game, and the table lists it as dropped.
 */
import { Rng } from "@/lib/model/rng";
import { LEARNER_BOTH_SEATS, type LeagueConfig } from "@/lib/sdk/experiment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import { League, type LeagueMember, type LeagueState, pairScore } from "./league";
import type { PolicyModel } from "./primitives";
import { type Seats, seatingOf } from "./seats";

/** How a run keeps its frozen members' policies: the caller's store (a worker's run folder, a bench's temp folder). */
export type LeagueSnapshots = {
  /** Freezes the learner as it is now as `member`: a policy of its current weights that only samples. */
  freeze(member: LeagueMember): Promise<PolicyModel>;
  /** A member frozen before (by a run that is now resumed): its policy again. */
  load(member: LeagueMember): Promise<PolicyModel>;
};

/** A league in a checkpoint: its members and games, and the members dropped past the league's cap, oldest first. */
export type TrainingLeagueState = LeagueState & { dropped?: string[] };

/** The learner's seat id: one trainable policy, so its update metrics keep their plain names. */
const LEARNER = "learner";

export const memberId = (step: number) => `step-${step}`;

export class TrainingLeague {
  private readonly league: League;
  private readonly frozen = new Map<string, PolicyModel>();
  /** Members dropped past `maxMembers`, oldest first: their games count, their policies are gone. */
  private readonly dropped: string[] = [];
  private pending: LeagueMember;

  private constructor(
    private readonly config: LeagueConfig,
    private readonly protocol: Protocol,
    private readonly seed: number,
    private readonly learner: PolicyModel,
    private readonly snapshots: LeagueSnapshots,
    /** Steps that end with a snapshot: every `every` RL steps after `first`, and the last step. */
    private readonly schedule: { first: number; last: number },
    league: League,
    pending: LeagueMember,
  ) {
    this.league = league;
    this.pending = pending;
  }

  /**
   * The league of a run about to take RL step `step` (0-based, counted as the run counts: after its SFT steps):
   * a new one whose first member is the learner as it is now, or one resumed from `state`, its frozen members loaded.
   */
  static async open(options: {
    config: LeagueConfig;
    protocol: Protocol;
    seed: number;
    learner: PolicyModel;
    snapshots: LeagueSnapshots;
    /** The step the run resumes at (its first RL step when new), the first RL step, and the run's last step. */
    step: number;
    first: number;
    last: number;
    state?: TrainingLeagueState;
  }): Promise<TrainingLeague> {
    const { config, protocol } = options;
    checkLeagueConfig(config, protocol);
    const schedule = { first: options.first, last: options.last };
    const nextStep = nextSnapshot(options.step, config.every, schedule);
    // A resumed run keeps the members frozen by then and the one it is becoming; a member of a later snapshot (saved
    // by a run that went on past this checkpoint and was lost) is frozen again when its step comes.
    const kept = options.state?.members.filter((member) => member.step <= options.step || member.step === nextStep) ?? [];
    const ids = new Set(kept.map((member) => member.id));
    const league = League.from({ members: kept, games: options.state?.games.filter((game) => ids.has(game.a) && ids.has(game.b)) ?? [] });
    const dropped = (options.state?.dropped ?? []).filter((id) => ids.has(id));
    const frozen = new Map<string, PolicyModel>();
    for (const member of kept) if (member.step <= options.step && !dropped.includes(member.id)) frozen.set(member.id, await options.snapshots.load(member));
    if (frozen.size === 0) {
      const initial = { id: memberId(options.step), label: options.step === options.first ? "initial" : `step ${options.step}`, step: options.step };
      if (!ids.has(initial.id)) league.add(initial);
      frozen.set(initial.id, await options.snapshots.freeze(initial));
    }
    const pending = kept.find((member) => member.step === nextStep) ?? { id: memberId(nextStep), label: `step ${nextStep}`, step: nextStep };
    if (!ids.has(pending.id)) league.add(pending);
    const training = new TrainingLeague(config, protocol, options.seed, options.learner, options.snapshots, schedule, league, pending);
    for (const [id, policy] of frozen) training.frozen.set(id, policy);
    training.dropped.push(...dropped);
    training.dropBeyondCap(); // a run resumed with a lower cap than it saved under
    return training;
  }

  /** Members, games and the members dropped past the cap, for a checkpoint. */
  get state(): TrainingLeagueState {
    return { ...this.league.toJSON(), dropped: [...this.dropped] };
  }

  /**
   * The seating of training step `step`'s groups: the learner at its agent (alternating with the group and step
   * under "both-seats-alternating") and at the other a member drawn by the mix, with an RNG of (seed, step, group,
   * prompt) alone, so a resumed run draws the same opponents.
   */
  seats(step: number): Seats {
    const [first, second] = this.protocol.agents as [string, string];
    const mix = this.config.mix;
    return (group, spec) => {
      const learnerAgent = this.config.learner === LEARNER_BOTH_SEATS ? ((group + step) % 2 === 0 ? first : second) : this.config.learner;
      const opponentAgent = learnerAgent === first ? second : first;
      const rng = new Rng((Math.imul(this.seed, 1_000_003) + Math.imul(step, 7_919) + Math.imul(group, 104_729) + spec.seed) >>> 0);
      const opponent = this.league.sampleOpponent(this.pending.id, mix, rng, [...this.frozen.keys()]);
      return {
        [learnerAgent]: { id: LEARNER, policy: this.learner, trains: true },
        [opponentAgent]: { id: opponent, policy: this.frozen.get(opponent)!, trains: false },
      };
    };
  }

  /**
   * Records the step's games (learner against member, a higher return wins) and says how the learner did:
   * `league/win_rate/all`, against the newest member (`latest`) and the first (`initial`, while the league still
   * holds it), draws counting half nowhere (a win is a win).
   */
  observe(groups: Trajectory[][]): Record<string, number> {
    const members = this.league.members.filter((member) => this.frozen.has(member.id));
    const initial = this.league.members[0]!.id;
    const latest = members.reduce((newest, member) => (member.step >= newest.step ? member : newest)).id;
    const wins: Record<"all" | "latest" | "initial", number[]> = { all: [], latest: [], initial: [] };
    for (const trajectory of groups.flat()) {
      const seating = seatingOf(trajectory);
      if (!seating) continue;
      const learnerAgent = Object.keys(seating).find((agent) => seating[agent]!.id === LEARNER);
      const opponentAgent = Object.keys(seating).find((agent) => seating[agent]!.id !== LEARNER);
      if (!learnerAgent || !opponentAgent) continue;
      const opponent = seating[opponentAgent]!.id;
      const score = pairScore(trajectory.agentReturns[learnerAgent] ?? 0, trajectory.agentReturns[opponentAgent] ?? 0);
      this.league.record({ a: this.pending.id, b: opponent, score });
      const won = score === 1 ? 1 : 0;
      wins.all.push(won);
      if (opponent === latest) wins.latest.push(won);
      if (opponent === initial) wins.initial.push(won);
    }
    const metrics: Record<string, number> = {};
    for (const [kind, list] of Object.entries(wins)) if (list.length > 0) metrics[`league/win_rate/${kind}`] = list.reduce((a, b) => a + b, 0) / list.length;
    return metrics;
  }

  /**
   * After training step `step` (counted from 1, as the loop reports it): the learner frozen into its pending member
   * when a snapshot is due, and the league's size and, after a snapshot, the newest member's Elo (the first member
   * pinned at 1000) with its 95% bootstrap interval.
   */
  async afterStep(step: number): Promise<Record<string, number>> {
    const metrics: Record<string, number> = {};
    if (step === this.pending.step) {
      this.frozen.set(this.pending.id, await this.snapshots.freeze(this.pending));
      if (step < this.schedule.last) {
        const next = nextSnapshot(step, this.config.every, this.schedule);
        this.pending = { id: memberId(next), label: `step ${next}`, step: next };
        this.league.add(this.pending);
      }
      this.dropBeyondCap();
      const ratings = this.ratings();
      const latest = ratings.find((rating) => rating.id === memberId(step))!;
      Object.assign(metrics, { "league/elo/latest": latest.rating, "league/elo/latest_low": latest.low, "league/elo/latest_high": latest.high });
    }
    metrics["league/members"] = this.frozen.size;
    if (this.dropped.length > 0) metrics["league/dropped"] = this.dropped.length;
    return metrics;
  }

  /** Drops the oldest snapshots (by step) while the league holds more than `maxMembers`: released, never drawn again. */
  private dropBeyondCap(): void {
    const byAge = this.league.members.filter((member) => this.frozen.has(member.id)).sort((a, b) => a.step - b.step);
    for (const member of byAge.slice(0, Math.max(0, byAge.length - this.config.maxMembers))) {
      this.frozen.delete(member.id);
      this.dropped.push(member.id);
    }
  }

  /** Every member's Elo from the games recorded so far, the first member pinned at 1000. */
  ratings() {
    const first = this.league.members[0]!.id;
    return this.league.ratings({ anchor: { to: "member", id: first }, resamples: 200, seed: 0 });
  }
}

/** The step of the snapshot after step `step`: the next multiple of `every` past the first RL step, or the last step. */
function nextSnapshot(step: number, every: number, schedule: { first: number; last: number }): number {
  const done = step - schedule.first;
  return Math.min(schedule.first + (Math.floor(done / every) + 1) * every, schedule.last);
}

/** What a league needs of the protocol, said in the config's words. */
export function checkLeagueConfig(config: LeagueConfig, protocol: Pick<Protocol, "name" | "agents">): void {
  if (protocol.agents.length !== 2) {
    throw new Error(
      `algorithm.league needs a game of two agents (protocol.agents); got ${protocol.agents.length} (${protocol.agents.join(", ")}). Set algorithm.league to null to train without one`,
    );
  }
  if (config.learner !== LEARNER_BOTH_SEATS && !protocol.agents.includes(config.learner)) {
    throw new Error(
      `algorithm.league.learner: '${config.learner}' is not an agent of the protocol; accepted: ${[...protocol.agents, LEARNER_BOTH_SEATS].join(", ")}`,
    );
  }
}

/**
 * Snapshots kept as sampler weights in `dir/<member id>`: `save` writes the learner's weights for a sampler there
 * (a LoRA learner's adapter alone), `open` loads such a folder into a fresh policy on the same base. A resumed run
 * finds its members' folders where its first run left them.
 */
export function samplerSnapshots(options: {
  dir: string;
  save(dir: string): Promise<void>;
  open(dir: string, member: LeagueMember): Promise<PolicyModel>;
}): LeagueSnapshots {
  const folder = (member: LeagueMember) => `${options.dir}/${member.id}`;
  return {
    async freeze(member) {
      await options.save(folder(member));
      return options.open(folder(member), member);
    },
    load: (member) => options.open(folder(member), member),
  };
}
