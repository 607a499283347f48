/**
 * Seats: which policy plays each agent of an episode, and whether that policy learns from its turns.
 *
 * Without seats one policy plays every agent (self-play, the role in its prompt) and is trained on every turn.
 * With seats each agent's requests go to the policy seated there, one sampling batch per distinct policy; each
 * policy that trains is updated on the turns of the agents it sat at, and a frozen seat's turns are played but never
 * trained on. Separate policies seat each agent's own policy in every episode; a league seats the learner against a
 * frozen past self, changing seats and opponent from group to group.
 */
import type { Trajectory } from "@/lib/sdk/protocol";
import type { PolicyModel } from "./primitives";
import type { EpisodeSpec } from "./episode-spec";

export type SeatedPolicy = {
  /** Names the policy in metrics (`train/agent/ID/...`) and in a league. */
  id: string;
  policy: PolicyModel;
  /** False for a frozen opponent: its turns are played, never trained on. */
  trains: boolean;
};

/** Agent → the policy playing it, in one group of episodes. */
export type Seating = Record<string, SeatedPolicy>;

/**
 * The seating of each group of a batch: `group` is the group's index in the batch, `spec` its prompt. The episodes
 * of a group share a seating, so a group-relative baseline compares like with like.
 */
export type Seats = (group: number, spec: EpisodeSpec) => Seating;

/** The same seating for every group: each agent its own policy (every one trains), or as given. */
export function fixedSeats(seating: Seating): Seats {
  return () => seating;
}

/** Every agent its own policy, each one training: `separate` policies. */
export function separateSeats(policies: Record<string, PolicyModel>): Seats {
  return fixedSeats(Object.fromEntries(Object.entries(policies).map(([agent, policy]) => [agent, { id: agent, policy, trains: true }])));
}

/**
 * The seating each episode was played under. Kept beside the trajectory rather than in it: the SDK's Trajectory
 * crosses the sandbox and reaches the episode player, neither of which knows policies.
 */
const seatings = new WeakMap<Trajectory, Seating>();

export function recordSeating(trajectory: Trajectory, seating: Seating): void {
  seatings.set(trajectory, seating);
}

/** The seating an episode was played under; undefined when one policy played every agent (no seats). */
export function seatingOf(trajectory: Trajectory): Seating | undefined {
  return seatings.get(trajectory);
}

/** The policy that played a turn of agent `agent` in `trajectory`, when seats were used. */
export function seatOf(trajectory: Trajectory, agent: string): SeatedPolicy | undefined {
  return seatings.get(trajectory)?.[agent];
}

/**
 * The policies that learn from these episodes, each once (by id, in order of id): empty when no episode was played
 * under seats. Two seats holding one id must hold one policy.
 */
export function trainingPolicies(groups: Trajectory[][]): SeatedPolicy[] {
  const byId = new Map<string, SeatedPolicy>();
  for (const trajectory of groups.flat()) {
    for (const seat of Object.values(seatingOf(trajectory) ?? {})) {
      if (!seat.trains) continue;
      const known = byId.get(seat.id);
      if (known && known.policy !== seat.policy) throw new Error(`two different policies are seated under one id '${seat.id}'`);
      byId.set(seat.id, seat);
    }
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
