import { z } from "zod";

/** The shape of a decoder-only transformer. Every field is stored with each checkpoint and checked on load. */
export const gptConfigSchema = z
  .object({
    vocabSize: z.number().int().min(2).describe("number of token ids the model embeds and predicts"),
    contextLength: z.number().int().min(1).describe("longest sequence (prompt plus completion) the model can attend over, in tokens"),
    dModel: z.number().int().min(1).describe("width of the residual stream"),
    nLayers: z.number().int().min(1).describe("number of transformer blocks"),
    nHeads: z.number().int().min(1).describe("attention heads per block; dModel must be a multiple of it"),
  })
  .refine((c) => c.dModel % c.nHeads === 0, {
    message: "dModel must be a multiple of nHeads",
    path: ["nHeads"],
  });
export type GPTConfig = z.infer<typeof gptConfigSchema>;

/** The four linear layers of a block that an adapter can sit on. */
export const loraTargetNames = ["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"] as const;
export type LoraTarget = (typeof loraTargetNames)[number];

export const loraConfigSchema = z.object({
  rank: z.number().int().min(1).default(8).describe("inner width r of each low-rank update B·A"),
  alpha: z.number().positive().default(16).describe("the update is scaled by alpha / rank"),
  dropout: z.number().min(0).max(0.99).default(0).describe("dropout on the adapter's input, during training only"),
  targets: z
    .array(z.enum(loraTargetNames))
    .min(1)
    .default([...loraTargetNames])
    .describe("which linear layers of every block get an adapter"),
});
export type LoraConfig = z.infer<typeof loraConfigSchema>;
export type LoraConfigInput = z.input<typeof loraConfigSchema>;

export function parseGPTConfig(input: unknown): GPTConfig {
  const parsed = gptConfigSchema.safeParse(input);
  if (!parsed.success) {
    throw new Error(`invalid model config: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

export function parseLoraConfig(input: unknown): LoraConfig {
  const parsed = loraConfigSchema.safeParse(input);
  if (!parsed.success) {
    throw new Error(`invalid LoRA config: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

/**
 * Lists every field where `found` (from a checkpoint) differs from `expected` (what the model in memory has),
 * in the words a user needs: "checkpoint has dModel=128, model expects dModel=64".
 */
export function describeMismatch(found: Record<string, unknown>, expected: Record<string, unknown>, what = "model"): string[] {
  const keys = new Set([...Object.keys(expected), ...Object.keys(found)]);
  const problems: string[] = [];
  for (const key of keys) {
    const a = JSON.stringify(found[key]);
    const b = JSON.stringify(expected[key]);
    if (a !== b) problems.push(`checkpoint has ${key}=${a ?? "nothing"}, ${what} expects ${key}=${b ?? "nothing"}`);
  }
  return problems;
}

export function countParameters(config: GPTConfig): number {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L } = config;
  const perBlock = 4 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C);
  return V * C + T * C + L * perBlock + 2 * C + C * V;
}
