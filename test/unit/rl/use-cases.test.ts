/**
 * Smoke versions of bench:learn: each use case's shipped base, a few RL steps of its template's algorithm at tiny
 * sizes and a fixed seed, and the sampled reward on fixed held-out episodes rises above the base's.
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
 * Steps and held-out episodes per use case: the template's algorithm and learning rate, fewer steps. Only the use
 * cases whose reward moves clearly within a few steps are here yet: arithmetic and tic-tac-toe at their
 * templates' learning rates did not rise reliably in 6-10 steps on 32-64 sampled episodes (see docs/LEARNING.md).
 */
const smoke: Record<string, { steps: number; groupsPerStep?: number; episodes: number }> = {
  "tool-use": { steps: 4, groupsPerStep: 8, episodes: 24 },
};

describe("use cases learn from their shipped bases", () => {
  it.each(Object.keys(smoke))("%s: a few RL steps raise the reward above the base's", async (name) => {
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
    // Sampled (temperature 1) rather than greedy: on a few episodes it moves smoothly with the policy.
    const specs = evaluationSpecs(config, dataset ? splitDataset(dataset).test : null);
    const meanReward = async () => {
      const { trajectories } = await evaluate({ policy, environment, protocol, specs, maxTokens: config.agent.sampling.maxTokens, temperature: 1 });
      return trajectories.reduce((a, t) => a + t.totalReward, 0) / trajectories.length;
    };
    const before = await meanReward();
    await trainRl({ config, policy, environment, protocol, dataset });
    const after = await meanReward();
    console.log(`${name}: sampled reward ${before.toFixed(3)} -> ${after.toFixed(3)}`);
    expect(after).toBeGreaterThan(before);
  });
});
