/** What one training step of any RL algorithm receives and returns. */
import type { EnvironmentInfo, EpisodePlayer } from "./rollouts";
import type { AlgorithmConfig } from "@/lib/sdk/experiment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import { creditOf, type TurnAdvantages } from "./advantages";
import type { PolicyModel, SampleOptions } from "./primitives";
import type { Seats } from "./seats";
import { collectGroups, type EpisodeSpec, rolloutMetrics } from "./rollouts";

export type StepContext = {
  /** The policy that plays every agent and learns from every turn, unless `seats` says otherwise. */
  policy: PolicyModel;
  /**
   * Who plays each agent of each group and whether it learns (./seats.ts): separate policies, or a learner against
   * frozen league members. Each trainable policy is then updated on its own agents' turns alone.
   */
  seats?: Seats;
  /** The environment: a definition run in this process, or (with playEpisodes) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  protocol: Protocol;
  /** The prompts (seeds, dataset rows) of this step, one per group. */
  specs: EpisodeSpec[];
  /**
   * What is played next, when known: the next step's specs, or the evaluation's that follows this step (group
   * size 1). A sandboxed player resets those episodes while this step samples.
   */
  nextSpecs?: EpisodeSpec[];
  /** The group size of what is played next, when it is not this step's. */
  nextGroupSize?: number;
  config: AlgorithmConfig;
  sampling: SampleOptions & { maxTokens: number; temperature: number };
  /** State an algorithm keeps across steps (REINFORCE's running baseline); saved with checkpoints. */
  memory: Record<string, number>;
  /** Plays the episodes; the sandbox batches each round's steps into one crossing. Default: the definition, here. */
  playEpisodes?: EpisodePlayer;
  /** This step's rollouts, when the loop started them ahead, while the step before updated (`updateMade`). */
  rollouts?: Promise<Trajectory[][]>;
  /**
   * Fresh prompts for the step's extra sampling round `round` (1, 2, …), when dynamic sampling
   * (`config.resampleRounds`) looks for groups with a learning signal: a function of (seed, step, round) alone.
   */
  moreSpecs?: (round: number) => EpisodeSpec[];
  /**
   * Called once the step's update calls are all made, before they are awaited: the loop may start the next
   * step's rollouts then, which sample after the update (the primitives run calls in the order made).
   */
  updateMade?: () => void;
};

export type StepOutput = { groups: Trajectory[][]; advantages: TurnAdvantages; metrics: Record<string, number> };

export type RlAlgorithm = (context: StepContext) => Promise<StepOutput>;

/**
 * Whether a group's episodes carry a learning signal for a group-relative estimator: their rewards differ. With
 * several agents, credit is per role (lib/rl/advantages.ts), so an agent's returns must differ: a zero-sum group
 * that X always won, by the same margin, teaches neither X nor O.
 */
export function hasSignal(group: Trajectory[]): boolean {
  const credit = creditOf(group);
  return credit.roles.some((role) => group.some((trajectory) => credit.episodeReturn(trajectory, role) !== credit.episodeReturn(group[0]!, role)));
}

/** Whether a group is a prompt already mastered: no signal, and every episode scored full marks (1 by convention). */
function mastered(group: Trajectory[]): boolean {
  return !hasSignal(group) && group.every((trajectory) => trajectory.score >= 1);
}

/** The step's rollouts to train on, and the metrics of every episode played for them. */
export type StepRollouts = { groups: Trajectory[][]; metrics: Record<string, number> };

/**
 * The step's rollouts: those the loop started ahead, else played now, `groupSize` episodes per spec.
 *
 * For a group-relative estimator (GRPO, RLOO) a group whose episodes all earned the same reward (with several
 * agents: each agent the same return, see `hasSignal`) teaches nothing: its advantages are zero. With
 * `config.resampleRounds` > 0 (dynamic sampling, as DAPO does) fresh prompts (`moreSpecs`) are played for such
 * groups, as many as groups are missing, until `groupsPerStep` groups carry a signal or the rounds run out (a group
 * whose episodes all scored full marks counts as filled: its prompt is mastered, and a policy that has learned its
 * task plays no extra rounds). The step trains on the groups with a signal (on the first round's when none has one:
 * a zero-advantage step, which run health reports). The reward metrics count every episode played, so the curve
 * shows the policy, not the filter; `train/signal_groups` is the share of groups played that carried a signal,
 * `train/mastered_groups` the share mastered, `train/sampling_rounds` the rounds played.
 */
export async function stepRollouts(ctx: StepContext, options: { groupRelative: boolean }): Promise<StepRollouts> {
  const first = await (ctx.rollouts ?? collectGroups({ ...ctx, groupSize: ctx.config.groupSize }));
  const rounds = options.groupRelative && ctx.config.groupSize > 1 ? ctx.config.resampleRounds : 0;
  const played = [...first];
  let kept = first.filter(hasSignal);
  // A mastered group fills its place: a policy that has learned its task plays no extra rounds.
  let filled = kept.length + first.filter(mastered).length;
  let round = 0;
  while (round < rounds && filled < ctx.config.groupsPerStep && ctx.moreSpecs) {
    round += 1;
    const specs = ctx.moreSpecs(round).slice(0, ctx.config.groupsPerStep - filled);
    if (specs.length === 0) break;
    const more = await collectGroups({ ...ctx, specs, nextSpecs: undefined, groupSize: ctx.config.groupSize });
    played.push(...more);
    kept = [...kept, ...more.filter(hasSignal)];
    filled += more.filter((group) => hasSignal(group) || mastered(group)).length;
  }
  // The groups with a signal alone (DAPO's filter): trained beside the first round's alike groups, the few that
  // differ weighed less against the KL penalty, and a policy that had imitated a blind spot kept it (string-transform
  // after an imperfect demonstrator: 0.74 -> 0.77 instead of 0.94). The cost: a solved task's few slips weigh more
  // (string-transform after a perfect one ended at 0.95 instead of 1.00).
  const groups = rounds === 0 || kept.length === 0 ? first : kept;
  const metrics = rolloutMetrics(played, ctx.environment.scoreName);
  metrics["train/signal_groups"] = played.filter(hasSignal).length / Math.max(played.length, 1);
  metrics["train/mastered_groups"] = played.filter(mastered).length / Math.max(played.length, 1);
  if (rounds > 0) metrics["train/sampling_rounds"] = round + 1;
  return { groups, metrics };
}
