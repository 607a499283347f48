/**
 * What a job may ask for at launch. Every job kind carries a cost bound worked out from its config before it is
 * queued: the episodes it plays, times the turns each may take, times the tokens each turn may sample, and the
 * tokens it trains on, as arithmetic on its model. A job over the server's limit (TINKERLAB_MAX_JOB_FLOPS) is
 * refused with the numbers that make its cost, so no permitted job can hold a worker for days; within the limit,
 * jobs placed side by side take turns on their worker's job host (server/worker/job-host.ts).
 */
import type { ExperimentConfig } from "@/lib/sdk/experiment";
import { sftStepsBeforeRl } from "@/lib/sdk/experiment";

/** A job's work, bounded from above. */
export type JobCost = {
  /** Episodes it plays (training, demonstrations and evaluations). */
  episodes: number;
  /** The most turns one episode may take. */
  maxTurns: number;
  /** Tokens it may sample: episodes × turns × tokens per turn. */
  sampledTokens: number;
  /** Tokens it trains on (forward and backward). */
  trainedTokens: number;
  /** Floating-point operations: 2 per parameter per sampled token, 6 per parameter per trained token. */
  flops: number;
};

export type CostedJob = {
  kind: "rl" | "sft" | "eval" | "export" | "session";
  config: ExperimentConfig;
  model: { parameters: number; contextLength: number };
  /** The environment's maxTurns when known (a built-in one's, or a custom one's from its validation); else the sandbox's cap on an episode's steps. */
  maxTurns: number;
};

/** The cost bound of a job (see the file's comment). A remote session's work is bounded by its lease, not its config: zero here. */
export function jobCost({ kind, config, model, maxTurns }: CostedJob): JobCost {
  const perEpisode = maxTurns * config.agent.sampling.maxTokens;
  // An episode trains on at most its context: the prompt and every turn's reply, up to the model's context.
  const trainedPerEpisode = Math.min(model.contextLength, perEpisode + model.contextLength);
  let episodes = 0;
  let trainedTokens = 0;
  const evaluations = (steps: number) => (steps === 0 ? 0 : (config.evaluation.every > 0 ? Math.floor(steps / config.evaluation.every) : 0) + 2);
  if (kind === "eval") episodes = config.evaluation.episodes;
  if (kind === "rl" || kind === "sft") {
    const rlSteps = kind === "rl" ? config.algorithm.steps : 0;
    const sftSteps = kind === "sft" ? config.algorithm.steps : sftStepsBeforeRl(config);
    const trainingEpisodes = rlSteps * config.algorithm.groupSize * config.algorithm.groupsPerStep;
    const demonstrations = sftSteps > 0 && config.sft.data === "demonstrator" ? config.sft.demonstrations : 0;
    episodes = trainingEpisodes + demonstrations + evaluations(rlSteps + sftSteps) * config.evaluation.episodes;
    trainedTokens = trainingEpisodes * trainedPerEpisode + sftSteps * config.sft.batchSize * model.contextLength;
  }
  // Demonstrations sample nothing, but an upper bound need not tell them apart.
  const sampledTokens = episodes * perEpisode;
  const flops = 2 * model.parameters * sampledTokens + 6 * model.parameters * trainedTokens;
  return { episodes, maxTurns, sampledTokens, trainedTokens, flops };
}

/** Why a job is over the limit, in numbers the user can change; null when it is within it. */
export function overCostLimit(cost: JobCost, limitFlops: number, parameters: number): string | null {
  if (cost.flops <= limitFlops) return null;
  const compact = (n: number) => (n >= 1e4 ? n.toExponential(1).replace("e+", "e") : String(Math.round(n)));
  return (
    `This job could cost up to ${compact(cost.flops)} floating-point operations: ${compact(cost.episodes)} episodes × up to ${cost.maxTurns} ` +
    `turns × its sampling.maxTokens sampled (${compact(cost.sampledTokens)} tokens) and ${compact(cost.trainedTokens)} tokens trained on, ` +
    `on a model of ${compact(parameters)} parameters. This server runs jobs of up to ${compact(limitFlops)} (TINKERLAB_MAX_JOB_FLOPS): ` +
    "take fewer steps, episodes or groups, or a smaller sampling.maxTokens"
  );
}
