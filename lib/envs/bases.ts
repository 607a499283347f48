/**
 * The built-in base checkpoints: one small model per use case, SFT'd on its scripted demonstrator's
 * conversations (lib/envs/demonstrations.ts) by bin/make-base-models.ts and committed under lib/envs/bases/.
 * Each entry is the whole recipe, so the script reproduces the checkpoint and a reader sees how it was made.
 */
import type { GPTConfig } from "@/lib/model/config";

export type BaseRecipe = {
  /** The use case (lib/envs/index.ts) whose demonstrator writes the training conversations. */
  useCase: string;
  model: GPTConfig;
  sft: {
    /** Demonstration episodes generated once, then sampled into batches. */
    episodes: number;
    steps: number;
    /** Conversations per optimizer step. */
    batch: number;
    /** Peak learning rate; it decays along a cosine to a tenth by the last step. */
    learningRate: number;
    seed: number;
  };
};

const model = (contextLength: number, dModel: number, nLayers: number, nHeads = 4): GPTConfig => ({ vocabSize: 262, contextLength, dModel, nLayers, nHeads });

export const builtInBases: Record<string, BaseRecipe> = {
  "arithmetic-base": { useCase: "arithmetic", model: model(24, 64, 2), sft: { episodes: 20_000, steps: 1500, batch: 64, learningRate: 3e-3, seed: 1 } },
  "guess-number-base": { useCase: "guess-number", model: model(64, 64, 2), sft: { episodes: 4000, steps: 1500, batch: 64, learningRate: 3e-3, seed: 2 } },
  "tic-tac-toe-base": { useCase: "tic-tac-toe", model: model(64, 64, 2), sft: { episodes: 20_000, steps: 4000, batch: 32, learningRate: 3e-3, seed: 3 } },
  "gomoku-base": { useCase: "gomoku", model: model(152, 64, 2), sft: { episodes: 20_000, steps: 3000, batch: 32, learningRate: 3e-3, seed: 4 } },
  "tool-use-base": { useCase: "tool-use", model: model(144, 64, 2), sft: { episodes: 4000, steps: 1000, batch: 32, learningRate: 3e-3, seed: 5 } },
  "text-world-base": { useCase: "text-world", model: model(160, 64, 2), sft: { episodes: 2000, steps: 3000, batch: 32, learningRate: 3e-3, seed: 6 } },
};

/** The folder of a built-in base checkpoint (load it with BaseModel.load). */
export function builtInBaseDir(name: string): string {
  if (!(name in builtInBases)) throw new Error(`no built-in base '${name}'; the built-in bases are ${Object.keys(builtInBases).join(", ")}`);
  return decodeURIComponent(new URL(`./bases/${name}`, import.meta.url).pathname);
}
