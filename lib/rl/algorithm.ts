/** What one training step of any RL algorithm receives and returns. */
import type { EnvironmentInfo, EpisodePlayer } from "./rollouts";
import type { AlgorithmConfig } from "@/lib/sdk/experiment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { TurnAdvantages } from "./advantages";
import type { PolicyModel, SampleOptions } from "./primitives";
import { collectGroups, type EpisodeSpec } from "./rollouts";

export type StepContext = {
  policy: PolicyModel;
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
   * Called once the step's update calls are all made, before they are awaited: the loop may start the next
   * step's rollouts then, which sample after the update (the primitives run calls in the order made).
   */
  updateMade?: () => void;
};

export type StepOutput = { groups: Trajectory[][]; advantages: TurnAdvantages; metrics: Record<string, number> };

export type RlAlgorithm = (context: StepContext) => Promise<StepOutput>;

/** The step's rollouts: those the loop started ahead, else played now, `groupSize` episodes per spec. */
export function stepRollouts(ctx: StepContext): Promise<Trajectory[][]> {
  return ctx.rollouts ?? collectGroups({ ...ctx, groupSize: ctx.config.groupSize });
}
