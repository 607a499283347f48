/**
 * Smoke versions of bench:learn: each use case's shipped base, a few RL steps of its template's algorithm at tiny
 * sizes and a fixed seed, and the reward on fixed held-out episodes rises above the base's.
 */
import { describe, expect, it } from "vitest";
import { builtInBaseDir } from "@/lib/envs/bases";
import { readBuiltInDataset } from "@/lib/envs/datasets";
import { useCases } from "@/lib/envs/index";
import { evaluate } from "@/lib/rl/evaluate";
import { evaluationSpecs, splitDataset, trainRl } from "@/lib/rl/train";
import { defineExperiment } from "@/lib/sdk/experiment";
import { BaseModel, TrainingClient } from "@/server/runtime";

/**
 * Steps, groups a step and held-out episodes per use case: the template's algorithm, learning rate and schedule,
 * fewer steps and groups. Each setting raised the reward for seeds 1, 2 and 3 alike (arithmetic greedy 0.688 ->
 * 0.906 / 0.859 / 0.922; guess-number sampled 0.862 -> 0.954 / 1.018 / 0.926; tic-tac-toe sampled 0.344 -> 0.391 /
 * 0.414 / 0.438), so a pass is not one lucky seed. Arithmetic is judged greedily: its sampled reward dips in
 * the first steps before it rises. The text world is not here: 10 steps of 4 groups moved its sampled reward
 * 0.659 -> 0.699 / 0.542 / 0.410 (docs/LEARNING.md).
 */
const smoke: Record<string, { steps: number; groupsPerStep?: number; episodes: number; greedy?: boolean }> = {
  "tool-use": { steps: 4, groupsPerStep: 8, episodes: 24 },
  arithmetic: { steps: 20, episodes: 64, greedy: true },
  "guess-number": { steps: 20, groupsPerStep: 8, episodes: 128 },
  "tic-tac-toe": { steps: 20, groupsPerStep: 16, episodes: 128 },
};

describe("use cases learn from their shipped bases", () => {
  it.each(Object.keys(smoke))(
    "%s: a few RL steps raise the reward above the base's",
    async (name) => {
      const useCase = useCases[name]!;
      const settings = smoke[name]!;
      const config = defineExperiment({
        ...useCase.template,
        algorithm: { ...useCase.template.algorithm, steps: settings.steps, groupsPerStep: settings.groupsPerStep ?? useCase.template.algorithm?.groupsPerStep },
        evaluation: { every: 0, episodes: settings.episodes },
        seed: 1,
      });
      const base = BaseModel.load(builtInBaseDir(config.agent.base));
      const training = config.agent.training;
      const client = new TrainingClient(base, { lora: training.mode === "lora" ? training : undefined, valueHead: config.agent.valueHead, seed: 1 });
      const policy = { primitives: client, tokenizer: base.tokenizer, contextLength: base.config.contextLength };
      const { environment, protocol } = useCase;
      const dataset = environment.data.kind === "dataset" ? readBuiltInDataset(environment.data.dataset) : undefined;
      // Sampled (temperature 1) unless the use case says greedy: on a few episodes it moves smoothly with the policy.
      const specs = evaluationSpecs(config, dataset ? splitDataset(dataset).test : null);
      const meanReward = async () => {
        const { trajectories } = await evaluate({
          policy,
          environment,
          protocol,
          specs,
          maxTokens: config.agent.sampling.maxTokens,
          temperature: settings.greedy ? 0 : 1,
        });
        return trajectories.reduce((a, t) => a + t.totalReward, 0) / trajectories.length;
      };
      const before = await meanReward();
      await trainRl({ config, policy, environment, protocol, dataset });
      const after = await meanReward();
      console.log(`${name}: ${settings.greedy ? "greedy" : "sampled"} reward ${before.toFixed(3)} -> ${after.toFixed(3)}`);
      expect(after).toBeGreaterThan(before);
    },
    240_000,
  ); // tic-tac-toe takes ~35 s alone, and the suite runs other files beside it
});
