/**
 * An SFT run: the policy imitates the environment's demonstrator or an uploaded dataset of conversations; with
 * separate policies, each agent's policy the demonstrator's turns at its agent.
 */
import { trainSft } from "@/lib/rl/sft";
import type { JobOptions, JobOutcome } from "./job";
import { endOf, prepareJob } from "./job-setup";

export async function sftJob(options: JobOptions): Promise<JobOutcome> {
  const { config, policy, environment, protocol, dataset, startStep, hooks, playEpisodes, reports, save, imitation, pool } = await prepareJob(options);
  try {
    // With separate policies, each agent's policy imitates its own turns (`agents`).
    const outcome = await trainSft({ config, policy, ...(await imitation()), environment, protocol, dataset, startStep, hooks, playEpisodes });
    await reports.flush();
    return await endOf(outcome, save({}), options.stopRequested);
  } finally {
    pool?.dispose();
  }
}
