import { type ByteTokenizer, specialTokens } from "./tokenizer";

export type ChatRole = "system" | "user" | "assistant";

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

export interface RenderedChat {
  /** the whole conversation as token ids */
  tokens: number[];
  /**
   * 1 where the policy produced the token (the assistant's content and its end-of-turn), else 0; aligned with
   * `tokens`, so it can be passed as `weights` to `forwardBackward`.
   */
  lossMask: number[];
}

const roleToken: Record<ChatRole, number> = {
  system: specialTokens.system,
  user: specialTokens.user,
  assistant: specialTokens.assistant,
};

/**
 * The chat template: `<|bos|>` then, per message, `<|role|> content <|end|>`. With `addGenerationPrompt` the
 * rendering ends with `<|assistant|>`, ready for sampling the next reply (which should stop at `<|end|>`).
 */
export function renderChat(tokenizer: ByteTokenizer, messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): RenderedChat {
  const tokens: number[] = [specialTokens.bos];
  const lossMask: number[] = [0];
  for (const message of messages) {
    if (!(message.role in roleToken)) {
      throw new Error(`chat role must be system, user or assistant; got '${String(message.role)}'`);
    }
    const byPolicy = message.role === "assistant" ? 1 : 0;
    tokens.push(roleToken[message.role]);
    lossMask.push(0);
    for (const t of tokenizer.encode(message.content)) {
      tokens.push(t);
      lossMask.push(byPolicy);
    }
    tokens.push(specialTokens.endOfTurn);
    lossMask.push(byPolicy);
  }
  if (options.addGenerationPrompt) {
    tokens.push(specialTokens.assistant);
    lossMask.push(0);
  }
  return { tokens, lossMask };
}
