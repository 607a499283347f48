/** Evaluation: the policy plays held-out episodes (greedy by default) and the environment scores them. */
import type { EnvironmentInfo } from "./rollouts";
import type { EnvironmentSession } from "@/lib/sdk/environment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { PolicyModel } from "./primitives";
import { collectGroups, rolloutMetrics, type EpisodeSpec } from "./rollouts";

export async function evaluate(options: {
  policy: PolicyModel;
  /** The environment: a definition run in this process, or (with createSession) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  protocol: Protocol;
  specs: EpisodeSpec[];
  maxTokens: number;
  temperature?: number;
  /** Makes the session for the index-th episode of a batch; the sandbox reuses one slot per index. */
  createSession?: (index: number) => EnvironmentSession;
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
