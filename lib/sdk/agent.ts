/** Agents: which model acts, how it is trained (LoRA or full), and how it samples. */
import { z } from "zod";
import { describeConfigError, rangedInt, rangedNumber } from "./config-errors";

const ranged = rangedNumber;

/** The built-in base trained for any short text task: where a new experiment starts when it names none. */
export const GENERALIST_BASE = "generalist-base";

export const loraTargets = ["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"] as const;

export const agentSchema = z.object({
  name: z.string().min(1).max(64).default("agent").describe("the agent's name, shown in rollouts"),
  base: z
    .string()
    .min(1, "name a base model: a built-in base (e.g. 'arithmetic-base') or a checkpoint id")
    .describe("the base model: a built-in base checkpoint or a checkpoint of an earlier run"),
  training: z
    .discriminatedUnion(
      "mode",
      [
        z.object({
          mode: z.literal("lora"),
          rank: rangedInt(1, 256).default(8).describe("LoRA rank r"),
          alpha: ranged(0.1, 1024).default(16).describe("LoRA scale numerator: the update is (alpha / rank)·B·A"),
          dropout: ranged(0, 0.9).default(0).describe("dropout on the adapter's input during training"),
          targets: z
            .array(z.enum(loraTargets, `targets are ${loraTargets.join(", ")}`))
            .min(1, "name at least one target module")
            .default(["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"])
            .describe("the layers that get adapters"),
        }),
        z.object({ mode: z.literal("full") }),
      ],
      { message: "must be 'lora' or 'full'" },
    )
    .default({ mode: "lora", rank: 8, alpha: 16, dropout: 0, targets: ["attn_qkv", "attn_proj", "mlp_fc", "mlp_proj"] })
    .describe("LoRA adapters on a frozen base, or full-parameter training"),
  sampling: z
    .object({
      temperature: ranged(0, 5).default(1).describe("softmax temperature while collecting rollouts"),
      topP: ranged(0.01, 1).default(1).describe("nucleus sampling threshold"),
      topK: rangedInt(0, 100_000).default(0).describe("sample among the K most likely tokens (0 = all)"),
      maxTokens: rangedInt(1, 4096).default(32).describe("most tokens the agent writes per turn"),
    })
    .default({ temperature: 1, topP: 1, topK: 0, maxTokens: 32 })
    .describe("how the agent samples its actions"),
  valueHead: z.boolean().default(false).describe("add a value head (needed by PPO)"),
});

export type AgentConfig = z.infer<typeof agentSchema>;
export type AgentConfigInput = z.input<typeof agentSchema>;

/** Validates an agent; an invalid value gets a message naming the field and the accepted range. */
export function defineAgent(input: AgentConfigInput): AgentConfig {
  const parsed = agentSchema.safeParse(input);
  if (!parsed.success) throw new Error(`Invalid agent:\n${describeConfigError(parsed.error, input)}`);
  return parsed.data;
}
