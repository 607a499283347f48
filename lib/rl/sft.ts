/** Supervised fine-tuning: cross-entropy on the agent's own tokens of demonstration conversations. */
import { renderChat, type ChatMessage } from "@/lib/model/chat";
import type { ByteTokenizer } from "@/lib/model/tokenizer";
import type { PolicyModel } from "./primitives";
import { chunkBatch } from "./rollouts";
import { CHUNK_SEQUENCES } from "./update";

export type Conversation = ChatMessage[];

/** Renders conversations with the chat template; the loss mask keeps only the assistant's tokens. */
export function renderConversations(policy: PolicyModel, conversations: Conversation[]) {
  const tokens: number[][] = [];
  const weights: number[][] = [];
  for (const [i, conversation] of conversations.entries()) {
    const rendered = renderChat(policy.tokenizer as ByteTokenizer, conversation);
    if (rendered.tokens.length > policy.contextLength) {
      throw new Error(`conversation ${i} is ${rendered.tokens.length} tokens; the model's context holds ${policy.contextLength}`);
    }
    tokens.push(rendered.tokens);
    weights.push(rendered.lossMask);
  }
  return { tokens, weights };
}

/** One optimizer step of SFT on a batch of conversations; returns the mean token loss before the step. */
export async function sftStep(
  policy: PolicyModel,
  conversations: Conversation[],
  options: { learningRate: number; weightDecay?: number; gradClip?: number },
): Promise<Record<string, number>> {
  const batch = renderConversations(policy, conversations);
  let lossSum = 0;
  let tokens = 0;
  for (const chunk of chunkBatch(batch, CHUNK_SEQUENCES)) {
    const { loss, metrics } = await policy.primitives.forwardBackward(chunk, "cross_entropy");
    lossSum += loss * (metrics.tokens ?? 1);
    tokens += metrics.tokens ?? 1;
  }
  const { gradNorm } = await policy.primitives.optimStep({ lr: options.learningRate, weightDecay: options.weightDecay ?? 0, gradClip: options.gradClip ?? 1 });
  return { "loss/sft": lossSum / Math.max(tokens, 1), "train/grad_norm": gradNorm, "train/tokens": tokens };
}
