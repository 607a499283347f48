import type { ExperimentConfigInput } from "@/lib/sdk/experiment";
import path from "node:path";
import { BaseModel, TrainingClient } from "@/server/runtime";

/** A base model small enough to train in seconds, saved as `tiny-base` in `basesDir`. */
export async function saveTinyBase(basesDir: string) {
  const base = BaseModel.create({ vocabSize: 262, contextLength: 48, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 7 });
  await new TrainingClient(base).saveWeightsForSampler(path.join(basesDir, "tiny-base"));
}

/** An arithmetic GRPO experiment on `tiny-base`, checkpointing every 5 steps, with no evaluation in between. */
export function tinyExperiment(name: string, steps: number): { name: string; config: ExperimentConfigInput & { agent: { base: string } } } {
  return {
    name,
    config: {
      name,
      environment: "arithmetic",
      agent: { base: "tiny-base", sampling: { maxTokens: 3 } },
      algorithm: { name: "grpo", steps, groupSize: 4, groupsPerStep: 2 },
      evaluation: { every: 0, episodes: 8 },
      checkpointEvery: 5,
    },
  };
}
