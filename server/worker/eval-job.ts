/** An evaluation run: the base (usually another run's checkpoint) plays the run's held-out episodes once. */
import { evaluateAndReport } from "@/lib/rl/evaluate";
import { separateSeats } from "@/lib/rl/seats";
import { evaluationSpecs, splitDataset } from "@/lib/rl/train";
import type { JobOptions, JobOutcome } from "./job";
import { prepareJob } from "./job-setup";

export async function evaluationJob(options: JobOptions): Promise<JobOutcome> {
  const { workerId, spec } = options;
  const jobId = spec.job.id;
  const { config, dataset, policy, policies, environment, protocol, playEpisodes, hooks, reports, pool } = await prepareJob(options);
  try {
    // An evaluation run: the base (usually another run's checkpoint) plays the held-out episodes once.
    const specs = evaluationSpecs(config, dataset ? splitDataset(dataset).test : null);
    const score = await evaluateAndReport(
      0,
      {
        policy,
        environment,
        protocol,
        specs,
        maxTokens: config.agent.sampling.maxTokens,
        temperature: config.evaluation.temperature,
        playEpisodes,
        // Separate policies: each agent plays with its own, as the run's own evaluations did.
        seats: policies ? separateSeats(policies) : undefined,
      },
      hooks,
    );
    const temperature = config.evaluation.temperature === 0 ? "greedy" : `temperature ${config.evaluation.temperature}`;
    reports.push({
      workerId,
      jobId,
      logs: [
        {
          level: "info",
          message: `Evaluated on ${specs.length} held-out episodes (${temperature}): ${environment.scoreName ?? "score"} ${score.toFixed(3)}.`,
        },
      ],
    });
    await reports.flush();
    return { outcome: "completed", reason: null };
  } finally {
    pool?.dispose();
  }
}
