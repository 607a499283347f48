/**
 * An RL run: its SFT steps first when it takes any (sft.steps), then the RL loop from that policy, resumed in
 * either stage from the run's last checkpoint; with separate policies, each agent's, and with a league, against
 * the run's frozen past selves.
 */
import { trainSft } from "@/lib/rl/sft";
import { trainRl } from "@/lib/rl/train";
import { sftStepsBeforeRl } from "@/lib/sdk/experiment";
import type { JobOptions, JobOutcome } from "./job";
import { endOf, prepareJob } from "./job-setup";

export async function rlJob(options: JobOptions): Promise<JobOutcome> {
  const { workerId, spec } = options;
  const jobId = spec.job.id;
  const prepared = await prepareJob(options);
  const { config, policy, policies, league, environment, protocol, dataset, memory, hooks, playEpisodes, reports, save, imitation, beginStage, pool } =
    prepared;
  let { startStep } = prepared;
  try {
    // An RL run may first take SFT steps (sft.steps): RL then starts from the imitating policy, as a run from
    // that checkpoint would (a fresh optimizer; the policy there is the KL penalty's reference).
    const sftSteps = sftStepsBeforeRl(config);
    if (sftSteps > 0 && startStep < sftSteps) {
      const stage = {
        ...config,
        algorithm: {
          ...config.algorithm,
          name: "sft" as const,
          steps: sftSteps,
          learningRate: config.sft.learningRate,
          lrSchedule: "constant" as const,
          warmupSteps: 0,
        },
      };
      const outcome = await trainSft({
        config: stage,
        policy,
        ...(await imitation()),
        environment,
        protocol,
        dataset,
        startStep,
        hooks,
        playEpisodes,
      });
      if (outcome.stopped) {
        await reports.flush();
        return await endOf(outcome, save({}), options.stopRequested);
      }
      reports.push({ workerId, jobId, logs: [{ level: "info", message: `SFT done after ${sftSteps} steps; RL starts from this policy.` }] });
      beginStage();
      startStep = sftSteps;
    }
    const result = await trainRl({
      config,
      policy,
      policies,
      league,
      environment,
      protocol,
      dataset,
      startStep,
      stepsBefore: sftSteps,
      memory,
      playEpisodes,
      hooks,
    });
    await reports.flush();
    return await endOf(result, save(result.memory, result.league), options.stopRequested);
  } finally {
    pool?.dispose();
  }
}
