/**
 * The training primitives the algorithms are written on, and nothing else: the runtime's TrainingClient
 * provides them, and so can any script's own client. Structural types, so lib/ does not depend on server/.
 */
import type { Tokenizer } from "@/lib/model/tokenizer";
import type { ActionConstraint } from "@/lib/sdk/action-space";

export type PolicyLoss = "importance_sampling" | "ppo" | "cispo";
export type LossName = "cross_entropy" | PolicyLoss;

/** Per-token arrays aligned with `tokens`: entry i is about token i, predicted from tokens[0..i-1]. */
export type TrainingBatch = {
  tokens: number[][];
  weights?: number[][];
  samplingLogprobs?: number[][];
  advantages?: number[][];
  returns?: number[][];
  /** Under legal actions: the token ids allowed at each token (null where the policy was not held to any). */
  allowedTokens?: (number[] | null)[][];
};

export type SampledSequence = { tokens: number[]; text: string; logprobs: number[]; finishReason: "stop" | "length"; allowedTokens?: number[][] };

export type SampleOptions = {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  stop?: (string | number)[];
  seed?: number;
  /** One per prompt: the legal actions its samples are held to, or null. */
  constraints?: (ActionConstraint | null)[];
};

export interface TrainingPrimitives {
  forward(batch: TrainingBatch, options?: { temperature?: number }): Promise<{ logprobs: number[][]; values?: number[][] }>;
  forwardBackward(
    batch: TrainingBatch,
    loss: LossName,
    config?: { temperature?: number; clipLow?: number; clipHigh?: number; klCoef?: number; valueCoef?: number; entropyCoef?: number },
  ): Promise<{ loss: number; metrics: Record<string, number> }>;
  optimStep(params: { lr: number; weightDecay?: number; gradClip?: number }): Promise<{ gradNorm: number; step: number }>;
  sample(prompts: number[][], n: number, params?: SampleOptions): Promise<{ samples: SampledSequence[][] }>;
  /**
   * True where a call made while earlier ones are still out costs no wait for them (a remote session: its calls
   * travel and queue while the worker computes): the RL loop then starts a step's rollouts as soon as the step
   * before has made its update. The in-process client runs each call as it is made; there is nothing to overlap.
   */
  readonly overlapsCalls?: boolean;
}

/** What rollouts need beyond the primitives: how text becomes tokens, and how long a sequence may be. */
export type PolicyModel = {
  primitives: TrainingPrimitives;
  tokenizer: Tokenizer;
  contextLength: number;
};
