import { ByteTokenizer } from "@/lib/model/tokenizer";

const tokenizer = new ByteTokenizer();

/**
 * One token as a chip shows it: a printable ASCII byte as itself, whitespace as a visible sign, any other byte
 * (part of a longer UTF-8 character) as its hex value, a special token by its name (`<|end|>`).
 */
export function tokenLabel(token: number): string {
  if (token === 0x20) return "␣";
  if (token === 0x0a) return "↵";
  if (token === 0x09) return "⇥";
  if (token > 0x20 && token < 0x7f) return String.fromCharCode(token);
  if (token >= 0 && token < 256) return `\\x${token.toString(16).padStart(2, "0")}`;
  try {
    return tokenizer.decode([token]);
  } catch {
    return `<${token}>`;
  }
}

/** The generated text as the server returns it: bytes decoded as UTF-8, special tokens left out. */
export function completionText(tokens: readonly number[]): string {
  return tokenizer.decode(tokens, { skipSpecial: true });
}
