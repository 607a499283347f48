/** Evaluation: the policy plays held-out episodes (greedy by default) and the environment scores them. */
import type { EnvironmentInfo, EpisodePlayer } from "./rollouts";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { PolicyModel } from "./primitives";
import { collectGroups, rolloutMetrics, type EpisodeSpec } from "./rollouts";
import type { Seats } from "./seats";

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
  /** Who plays each agent (separate policies: each its own); left out, `policy` plays every agent. */
  seats?: Seats;
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

/**
 * One evaluation of a run at `step`, reported as every kind of run reports it: `eval/score` and `eval/<metric>`,
 * then its trajectories as the step's "eval" rollouts. RL and SFT runs evaluate on their schedule; an evaluation
 * run does it once, at step 0.
 */
export async function evaluateAndReport(
  step: number,
  options: Parameters<typeof evaluate>[0],
  hooks: {
    onMetrics?(step: number, metrics: Record<string, number>): void | Promise<void>;
    onRollouts?(step: number, split: "train" | "eval", groups: Trajectory[][], advantages: null): void | Promise<void>;
  },
): Promise<number> {
  const result = await evaluate(options);
  const metrics = Object.fromEntries(Object.entries(result.metrics).map(([k, v]) => [`eval/${k}`, v]));
  await hooks.onMetrics?.(step, { ...metrics, "eval/score": result.score });
  await hooks.onRollouts?.(
    step,
    "eval",
    result.trajectories.map((t) => [t]),
    null,
  );
  return result.score;
}
