/** Evaluation: the policy plays held-out episodes (greedy by default) and the environment scores them. */
import type { EnvironmentDefinition, EnvironmentSession } from "@/lib/sdk/environment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { PolicyModel } from "./primitives";
import { collectGroups, rolloutMetrics, type EpisodeSpec } from "./rollouts";

export async function evaluate(options: {
  policy: PolicyModel;
  environment: EnvironmentDefinition<any, any, any>;
  protocol: Protocol;
  specs: EpisodeSpec[];
  maxTokens: number;
  temperature?: number;
  createSession?: () => EnvironmentSession;
}): Promise<{ score: number; metrics: Record<string, number>; trajectories: Trajectory[] }> {
  const groups = await collectGroups({
    ...options,
    groupSize: 1,
    sampling: { maxTokens: options.maxTokens, temperature: options.temperature ?? 0, seed: 0 },
  });
  const trajectories = groups.flat();
  const score = trajectories.reduce((a, t) => a + t.score, 0) / Math.max(trajectories.length, 1);
  return { score, metrics: rolloutMetrics(groups, options.environment.scoreName), trajectories };
}
