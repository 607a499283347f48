import type { Tokenizer } from "./tokenizer";

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

/** A conversation in the tokenizer's chat template (the byte tokenizer's, or an imported model's own). */
export function renderChat(tokenizer: Tokenizer, messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): RenderedChat {
  return tokenizer.renderChat(messages, options);
}
