/** What every kind of job is run with and ends in, and the training client a job's agent trains. */
import type { ExperimentConfig } from "@/lib/sdk/experiment";
import { type BaseModel, TrainingClient } from "../runtime";
import type { ClaimedJob } from "../jobs";
import type { WorkerChannel } from "./channel";

export type JobSpec = ClaimedJob;
export type StopReason = "cancel" | "pause" | "preempt";
export type JobOutcome = { outcome: "completed" | "failed" | "cancelled" | "paused" | "preempted"; reason: string | null };

/** A fresh client of the run's agent on `base`: its LoRA settings (or full training), value head and seed. */
export function newTrainingClient(base: BaseModel, config: ExperimentConfig): TrainingClient {
  const training = config.agent.training;
  return new TrainingClient(base, {
    lora: training.mode === "lora" ? { rank: training.rank, alpha: training.alpha, dropout: training.dropout, targets: training.targets } : undefined,
    valueHead: config.agent.valueHead,
    seed: config.seed,
  });
}

/** What a job is run with, of any kind. */
export type JobOptions = {
  channel: WorkerChannel;
  workerId: string;
  spec: JobSpec;
  artifactsDir: string;
  /** Why the server asked this job to stop, once it has. */
  stopRequested: () => StopReason | null;
  onStep?: (step: number) => void;
};
