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
export type SpecialTokenName = keyof typeof specialTokens;

const specialText: Record<number, string> = {
  [specialTokens.pad]: "<|pad|>",
  [specialTokens.bos]: "<|bos|>",
  [specialTokens.system]: "<|system|>",
  [specialTokens.user]: "<|user|>",
  [specialTokens.assistant]: "<|assistant|>",
  [specialTokens.endOfTurn]: "<|end|>",
};

export interface TokenizerSpec {
  type: "byte";
  vocabSize: number;
  specialTokens: typeof specialTokens;
}

export class ByteTokenizer {
  readonly vocabSize = 262;
  readonly special = specialTokens;
  private encoder = new TextEncoder();

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

  toJSON(): TokenizerSpec {
    return { type: "byte", vocabSize: this.vocabSize, specialTokens };
  }

  /** Rebuilds a tokenizer from its saved spec, refusing one whose special ids differ from this code's. */
  static fromJSON(spec: TokenizerSpec): ByteTokenizer {
    const tokenizer = new ByteTokenizer();
    if (spec.type !== "byte" || JSON.stringify(spec.specialTokens) !== JSON.stringify(specialTokens)) {
      throw new Error(`checkpoint tokenizer ${JSON.stringify(spec)} differs from this byte tokenizer ${JSON.stringify(tokenizer.toJSON())}`);
    }
    return tokenizer;
  }
}
