/** Evaluation: the policy plays held-out episodes (greedy by default) and the environment scores them. */
import type { EnvironmentInfo, EpisodePlayer } from "./rollouts";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { PolicyModel } from "./primitives";
import { collectGroups, rolloutMetrics, type EpisodeSpec } from "./rollouts";

export async function evaluate(options: {
  policy: PolicyModel;
  /** The environment: a definition run in this process, or (with playEpisodes) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  protocol: Protocol;
  specs: EpisodeSpec[];
  maxTokens: number;
  temperature?: number;
  /** Plays the episodes; the sandbox batches each round's steps into one crossing. Default: the definition, here. */
  playEpisodes?: EpisodePlayer;
  /** What is played next (the RL loop's next step: its specs and group size), for a player that resets ahead. */
  next?: { specs: EpisodeSpec[]; groupSize: number };
}): Promise<{ score: number; metrics: Record<string, number>; trajectories: Trajectory[] }> {
  const { next, ...rest } = options;
  const groups = await collectGroups({
    ...rest,
    nextSpecs: next?.specs,
    nextGroupSize: next?.groupSize,
    groupSize: 1,
    sampling: { maxTokens: options.maxTokens, temperature: options.temperature ?? 0, seed: 0 },
  });
  const trajectories = groups.flat();
  const score = trajectories.reduce((a, t) => a + t.score, 0) / Math.max(trajectories.length, 1);
  return { score, metrics: rolloutMetrics(groups, options.environment.scoreName), trajectories };
}
