import type { Tokenizer } from "@/lib/model/tokenizer";
import { ByteTokenizer } from "@/lib/model/tokenizer";

const byteTokenizer = new ByteTokenizer();

/**
 * One byte-tokenizer token as a chip shows it: a printable ASCII byte as itself, whitespace as a visible sign, any
 * other byte (part of a longer UTF-8 character) as its hex value, a special token by its name (`<|end|>`).
 */
export function tokenLabel(token: number): string {
  if (token === 0x20) return "␣";
  if (token === 0x0a) return "↵";
  if (token === 0x09) return "⇥";
  if (token > 0x20 && token < 0x7f) return String.fromCharCode(token);
  if (token >= 0 && token < 256) return `\\x${token.toString(16).padStart(2, "0")}`;
  try {
    return byteTokenizer.decode([token]);
  } catch {
    return `<${token}>`;
  }
}

/** How a tokenizer's tokens are shown as chips: the label, and whether the chip ends a line of the text. */
export interface TokenLabels {
  label(token: number): string;
  endsLine(token: number): boolean;
}

const byteLabels: TokenLabels = { label: tokenLabel, endsLine: (token) => token === 0x0a };
const labelsOf = new WeakMap<Tokenizer, TokenLabels>();

const visible: Record<string, string> = { " ": "␣", "\n": "↵", "\t": "⇥" };
// Control characters (C0, DEL, C1) have no glyph: they are written as the byte notation tokenText uses for partial bytes.
const invisible = /[ \n\t]|\p{Cc}/gu;
const hexByte = (c: string) => `<0x${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}>`;

/** Text with whitespace made visible as the byte tokenizer's chips show it, and control characters as `<0x04>`. */
const visibleText = (text: string) => text.replace(invisible, (c) => visible[c] ?? hexByte(c));

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A token as the serving endpoint names it (`/v1/chat/completions` logprobs: its text and the bytes it writes) as a
 * chip shows it, without the model's tokenizer: one byte as the byte tokenizer's chip (`␣`, `a`, `\xe2`), a longer
 * token as its text with whitespace made visible, and bytes that are not whole UTF-8 characters (part of a character
 * split across tokens) as `<0xE2><0x82>`.
 */
export function servedTokenLabel(token: { text: string; bytes: readonly number[] }): string {
  if (token.bytes.length === 1) return tokenLabel(token.bytes[0]!);
  if (token.bytes.length === 0) return visibleText(token.text);
  try {
    strictUtf8.decode(new Uint8Array(token.bytes));
  } catch {
    return token.bytes.map((byte) => `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`).join("");
  }
  return visibleText(token.text);
}

/**
 * Chip labels for the tokens a serving endpoint streamed, which names them by text and bytes, not by id: each
 * distinct token gets an id of this generation's own (the same token, the same id, so a chip's alternative that is
 * the token drawn is marked as such).
 */
export class ServedTokenLabels implements TokenLabels {
  private readonly ids = new Map<string, number>();
  private readonly tokens: { label: string; endsLine: boolean }[] = [];

  id(token: { text: string; bytes: readonly number[] }): number {
    const key = `${token.bytes.join(",")} ${token.text}`;
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.tokens.length;
      this.tokens.push({ label: servedTokenLabel(token), endsLine: token.text.endsWith("\n") });
      this.ids.set(key, id);
    }
    return id;
  }

  label(id: number): string {
    return this.tokens[id]?.label ?? `<${id}>`;
  }

  endsLine(id: number): boolean {
    return this.tokens[id]?.endsLine ?? false;
  }
}

/**
 * Chip labels for `tokenizer`'s tokens. A BPE token is its text (`tokenText`) with whitespace made visible as the byte
 * tokenizer's chips show it (` the` → `␣the`), since a chip would otherwise drop a leading space and a token that is
 * only whitespace would be an empty chip, and control characters written as `<0x04>`.
 */
export function tokenLabels(tokenizer: Tokenizer): TokenLabels {
  if (tokenizer.kind === "byte") return byteLabels;
  let labels = labelsOf.get(tokenizer);
  if (!labels) {
    labels = {
      label(token) {
        const text = tokenizer.tokenText(token);
        // An id past the tokenizer's vocabulary (the model's embedding table is often padded) is shown as tokenText names it.
        if (text === `<id ${token}>`) return text;
        return visibleText(text);
      },
      endsLine: (token) => tokenizer.tokenText(token).endsWith("\n"),
    };
    labelsOf.set(tokenizer, labels);
  }
  return labels;
}

/** The generated text as the server returns it: special tokens left out. */
export function completionText(tokenizer: Tokenizer, tokens: readonly number[]): string {
  return tokenizer.decode(tokens, { skipSpecial: true });
}
