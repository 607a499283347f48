import { z } from "zod";

const ropeScalingSchema = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("linear"),
    factor: z.number().positive().describe("positions are divided by this factor"),
  }),
  z.object({
    type: z.literal("llama3"),
    factor: z.number().positive(),
    lowFreqFactor: z.number().positive(),
    highFreqFactor: z.number().positive(),
    originalContextLength: z.number().int().positive().describe("the context length the model was pretrained on"),
  }),
]);
export type RopeScaling = z.infer<typeof ropeScalingSchema>;

/**
 * The shape of a decoder-only transformer. Every field is stored with each checkpoint and checked on load.
 *
 * Two architectures share one engine:
 * - "gpt" (the default when `architecture` is absent): LayerNorm, learned positions, a GELU MLP, biases
 *   everywhere; GPT-2's block.
 * - "llama": RMSNorm, rotary positions, a SwiGLU MLP, grouped-query attention and biases only where the flags
 *   say; the block of Llama, SmolLM and Qwen2.
 *
 * The optional fields are left out of a config that does not need them, so the project's own bases keep the
 * five fields they always had.
 */
export const gptConfigSchema = z
  .object({
    architecture: z.enum(["gpt", "llama"]).optional().describe("gpt (default): GPT-2's block; llama: Llama's block"),
    vocabSize: z.number().int().min(2).describe("number of token ids the model embeds and predicts"),
    contextLength: z.number().int().min(1).describe("longest sequence (prompt plus completion) the model can attend over, in tokens"),
    dModel: z.number().int().min(1).describe("width of the residual stream"),
    nLayers: z.number().int().min(1).describe("number of transformer blocks"),
    nHeads: z.number().int().min(1).describe("attention heads per block; dModel must be a multiple of it"),
    nKvHeads: z.number().int().min(1).optional().describe("key/value heads (llama); nHeads must be a multiple of it; default nHeads"),
    dFF: z.number().int().min(1).optional().describe("hidden width of the MLP; default 4 * dModel"),
    normEps: z.number().positive().optional().describe("epsilon of the norms; default 1e-5"),
    ropeTheta: z.number().positive().optional().describe("base of the rotary frequencies (llama); default 10000"),
    ropeScaling: ropeScalingSchema.optional().describe("how rotary frequencies are stretched for long contexts (llama)"),
    tiedEmbeddings: z.boolean().optional().describe("the output layer is the token embedding, transposed; no lm_head"),
    qkvBias: z.boolean().optional().describe("the query/key/value projection has a bias; default: gpt yes, llama no"),
    attnOutBias: z.boolean().optional().describe("the attention output projection has a bias; default: gpt yes, llama no"),
    mlpBias: z.boolean().optional().describe("the MLP's projections have biases; default: gpt yes, llama no"),
  })
  .refine((c) => c.dModel % c.nHeads === 0, {
    message: "dModel must be a multiple of nHeads",
    path: ["nHeads"],
  })
  .refine((c) => c.nKvHeads === undefined || c.nHeads % c.nKvHeads === 0, {
    message: "nHeads must be a multiple of nKvHeads",
    path: ["nKvHeads"],
  })
  .refine((c) => c.architecture === "llama" || (c.nKvHeads === undefined && c.ropeTheta === undefined && c.ropeScaling === undefined), {
    message: "nKvHeads, ropeTheta and ropeScaling belong to the llama architecture",
    path: ["architecture"],
  })
  .refine((c) => c.architecture === "llama" || c.normEps === undefined || c.normEps === 1e-5, {
    message: "the gpt architecture's LayerNorm uses epsilon 1e-5",
    path: ["normEps"],
  })
  .refine((c) => c.architecture !== "llama" || (c.dModel / c.nHeads) % 2 === 0, {
    message: "rotary positions need an even head width (dModel / nHeads)",
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

/** What the optional fields of a config come to: the shape every part of the engine computes with. */
export interface ModelShape {
  llama: boolean;
  headDim: number;
  /** key/value heads; each serves nHeads / nKvHeads query heads */
  nKvHeads: number;
  /** width of the keys (and of the values): nKvHeads * headDim */
  kvDim: number;
  /** hidden width of the MLP; mlp_fc has twice this many outputs in llama (gate, then up) */
  dFF: number;
  normEps: number;
  ropeTheta: number;
  tied: boolean;
  qkvBias: boolean;
  attnOutBias: boolean;
  mlpBias: boolean;
  /** norms have a bias (LayerNorm) or not (RMSNorm) */
  normBias: boolean;
  /** learned position embeddings (gpt) or rotary positions (llama) */
  learnedPositions: boolean;
}

export function modelShape(config: GPTConfig): ModelShape {
  const llama = config.architecture === "llama";
  const headDim = config.dModel / config.nHeads;
  const nKvHeads = config.nKvHeads ?? config.nHeads;
  return {
    llama,
    headDim,
    nKvHeads,
    kvDim: nKvHeads * headDim,
    dFF: config.dFF ?? 4 * config.dModel,
    normEps: config.normEps ?? 1e-5,
    ropeTheta: config.ropeTheta ?? 10000,
    tied: config.tiedEmbeddings ?? false,
    qkvBias: config.qkvBias ?? !llama,
    attnOutBias: config.attnOutBias ?? !llama,
    mlpBias: config.mlpBias ?? !llama,
    normBias: !llama,
    learnedPositions: !llama,
  };
}

export function countParameters(config: GPTConfig): number {
  const { vocabSize: V, contextLength: T, dModel: C, nLayers: L } = config;
  const s = modelShape(config);
  const fcOut = s.llama ? 2 * s.dFF : s.dFF;
  const norm = s.normBias ? 2 * C : C;
  const qkvOut = C + 2 * s.kvDim;
  const perBlock =
    2 * norm +
    (C * qkvOut + (s.qkvBias ? qkvOut : 0)) +
    (C * C + (s.attnOutBias ? C : 0)) +
    (C * fcOut + (s.mlpBias ? fcOut : 0)) +
    (s.dFF * C + (s.mlpBias ? C : 0));
  return V * C + (s.learnedPositions ? T * C : 0) + L * perBlock + norm + (s.tied ? 0 : C * V);
}
