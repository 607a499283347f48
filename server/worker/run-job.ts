/**
 * Runs one job on this worker, of any kind: its config parsed once here, then the kind's own function, each in a
 * file of its own (a new kind is a new file and a line below).
 */
import type { JobKind } from "@/lib/lifecycle";
import { parseRunConfig } from "@/lib/lifecycle/run-config";
import { evaluationJob } from "./eval-job";
import { exportJob } from "./export-job";
import { runInferenceJob } from "./inference-job";
import { type JobOptions, type JobOutcome, type JobSpec, newTrainingClient, type StopReason } from "./job";
import { rlJob } from "./rl-job";
import { runSessionJob } from "./session-job";
import { sftJob } from "./sft-job";

export { type JobOptions, type JobOutcome, type JobSpec, newTrainingClient, type StopReason };

/** A training job by its algorithm: an sft run, or RL (with its SFT steps first, if it takes any). */
const training = (options: JobOptions) => (options.spec.run.config.algorithm.name === "sft" ? sftJob(options) : rlJob(options));

const jobsByKind: Record<JobKind, (options: JobOptions) => Promise<JobOutcome>> = {
  rl: training,
  sft: training,
  eval: evaluationJob,
  // An export and a remote session have no environment: a session's calls drive it (./session-job.ts).
  export: exportJob,
  session: runSessionJob,
  inference: runInferenceJob,
};

export async function runJob(given: JobOptions): Promise<JobOutcome> {
  // The worker's edge: the config is parsed once here, as this worker's code reads it (a server of another version
  // may have written it), and every kind of job takes it parsed.
  const options = { ...given, spec: { ...given.spec, run: { ...given.spec.run, config: parseRunConfig(given.spec.run.config) } } };
  const run = jobsByKind[options.spec.job.kind];
  if (!run) throw new Error(`no job kind '${options.spec.job.kind}'; a worker runs ${Object.keys(jobsByKind).join(", ")}`);
  return run(options);
}
