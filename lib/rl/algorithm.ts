/** What one training step of any RL algorithm receives and returns. */
import type { EnvironmentInfo } from "./rollouts";
import type { EnvironmentSession } from "@/lib/sdk/environment";
import type { AlgorithmConfig } from "@/lib/sdk/experiment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { TurnAdvantages } from "./advantages";
import type { PolicyModel, SampleOptions } from "./primitives";
import type { EpisodeSpec } from "./rollouts";

export type StepContext = {
  policy: PolicyModel;
  /** The environment: a definition run in this process, or (with createSession) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  protocol: Protocol;
  /** The prompts (seeds, dataset rows) of this step, one per group. */
  specs: EpisodeSpec[];
  config: AlgorithmConfig;
  sampling: SampleOptions & { maxTokens: number; temperature: number };
  /** State an algorithm keeps across steps (REINFORCE's running baseline); saved with checkpoints. */
  memory: Record<string, number>;
  /** Makes the session for the index-th episode of a batch; the sandbox reuses one slot per index. */
  createSession?: (index: number) => EnvironmentSession;
};

export type StepOutput = { groups: Trajectory[][]; advantages: TurnAdvantages; metrics: Record<string, number> };

export type RlAlgorithm = (context: StepContext) => Promise<StepOutput>;
