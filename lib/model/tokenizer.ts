import type { ChatMessage, ChatRole, RenderedChat } from "./chat";

/**
 * How a base turns text into token ids and back, and how it lays out a conversation. Two kinds: the project's
 * byte tokenizer (its own bases) and a Hugging Face tokenizer.json with its chat template (imported bases).
 */
export interface Tokenizer {
  readonly kind: "byte" | "hf";
  /** number of ids the tokenizer can produce (the model's vocabulary may be larger) */
  readonly vocabSize: number;
  /** plain text to ids; no special tokens are added */
  encode(text: string): number[];
  /** ids to text; `skipSpecial` leaves out special tokens instead of writing them */
  decode(tokens: readonly number[], options?: { skipSpecial?: boolean }): string;
  /** one id as readable text, for token chips */
  tokenText(id: number): string;
  /** a conversation in the model's chat template, with the mask of the tokens the policy produced */
  renderChat(messages: readonly ChatMessage[], options?: { addGenerationPrompt?: boolean }): RenderedChat;
  /** the same conversation's tokens alone (a prompt to sample from): no loss mask is worked out */
  encodeChat(messages: readonly ChatMessage[], options?: { addGenerationPrompt?: boolean }): number[];
  /** ids that end a reply, the chat template's end of turn first; sampling stops at any of them unless told otherwise */
  readonly stopTokens: readonly number[];
  readonly padToken: number;
  /** every ordinary token with the bytes it writes, where they are known (byte-level BPE): legal actions need them */
  textTokens?(): readonly (readonly [number, readonly number[]])[];
}

/**
 * A byte-level tokenizer: ids 0..255 are the UTF-8 bytes of the text, followed by a few special tokens that
 * frame chat turns. No merges, so any text round-trips and the vocabulary stays tiny.
 */
export const specialTokens = {
  pad: 256,
  bos: 257,
  system: 258,
  user: 259,
  assistant: 260,
  endOfTurn: 261,
} as const;

const specialText: Record<number, string> = {
  [specialTokens.pad]: "<|pad|>",
  [specialTokens.bos]: "<|bos|>",
  [specialTokens.system]: "<|system|>",
  [specialTokens.user]: "<|user|>",
  [specialTokens.assistant]: "<|assistant|>",
  [specialTokens.endOfTurn]: "<|end|>",
};

export interface ByteTokenizerSpec {
  type: "byte";
  vocabSize: number;
  specialTokens: typeof specialTokens;
}

export class ByteTokenizer implements Tokenizer {
  readonly kind = "byte" as const;
  readonly vocabSize = 262;
  readonly special = specialTokens;
  readonly stopTokens: readonly number[] = [specialTokens.endOfTurn];
  readonly padToken: number = specialTokens.pad;
  private encoder = new TextEncoder();

  renderChat(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): RenderedChat {
    return renderByteChat(this, messages, options);
  }

  encodeChat(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): number[] {
    return renderByteChat(this, messages, options).tokens;
  }

  /** A byte as its character when it is printable ASCII, else its hex (a lone byte of a longer UTF-8 character). */
  tokenText(id: number): string {
    if (id >= 32 && id < 127) return String.fromCharCode(id);
    if (id === 10) return "\\n";
    if (id >= 0 && id < 256) return `<0x${id.toString(16).toUpperCase().padStart(2, "0")}>`;
    return specialText[id] ?? `<${id}>`;
  }

  encode(text: string): number[] {
    return Array.from(this.encoder.encode(text));
  }

  /**
   * Bytes become text (an incomplete UTF-8 sequence becomes U+FFFD); special tokens are written as `<|user|>`
   * and friends. With `skipSpecial` every id that is not a byte is left out (a model may have a larger vocabulary
   * than this tokenizer); without it such an id is an error, not silently dropped.
   */
  decode(tokens: readonly number[], options: { skipSpecial?: boolean } = {}): string {
    let out = "";
    let bytes: number[] = [];
    const flush = () => {
      if (bytes.length > 0) out += new TextDecoder().decode(Uint8Array.from(bytes));
      bytes = [];
    };
    for (const t of tokens) {
      if (Number.isInteger(t) && t >= 0 && t < 256) {
        bytes.push(t);
      } else if (options.skipSpecial) {
        flush();
      } else if (specialText[t] !== undefined) {
        flush();
        out += specialText[t];
      } else {
        throw new Error(`token id ${t} is not in the byte tokenizer's vocabulary (0..${this.vocabSize - 1})`);
      }
    }
    flush();
    return out;
  }

  toJSON(): ByteTokenizerSpec {
    return { type: "byte", vocabSize: this.vocabSize, specialTokens };
  }

  /** Rebuilds a tokenizer from its saved spec, refusing one whose special ids differ from this code's. */
  static fromJSON(spec: ByteTokenizerSpec): ByteTokenizer {
    const tokenizer = new ByteTokenizer();
    if (spec.type !== "byte" || JSON.stringify(spec.specialTokens) !== JSON.stringify(specialTokens)) {
      throw new Error(`checkpoint tokenizer ${JSON.stringify(spec)} differs from this byte tokenizer ${JSON.stringify(tokenizer.toJSON())}`);
    }
    return tokenizer;
  }
}

const roleToken: Record<ChatRole, number> = {
  system: specialTokens.system,
  user: specialTokens.user,
  assistant: specialTokens.assistant,
};

/**
 * The byte tokenizer's chat template: `<|bos|>` then, per message, `<|role|> content <|end|>`. With
 * `addGenerationPrompt` the rendering ends with `<|assistant|>`, ready for sampling the next reply (which should
 * stop at `<|end|>`).
 */
function renderByteChat(tokenizer: ByteTokenizer, messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): RenderedChat {
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
