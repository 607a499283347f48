import { describe, expect, it } from "vitest";
import { renderChat } from "@/lib/model/chat";
import { ByteTokenizer, specialTokens } from "@/lib/model/tokenizer";

const tokenizer = new ByteTokenizer();

describe("byte tokenizer", () => {
  it("round-trips any UTF-8 text through byte ids", () => {
    const text = "héllo, wörld → 你好 🙂";
    const ids = tokenizer.encode(text);
    expect(ids.every((t) => t >= 0 && t < 256)).toBe(true);
    expect(ids.length).toBe(new TextEncoder().encode(text).length);
    expect(tokenizer.decode(ids)).toBe(text);
  });

  it("writes special tokens by name, or leaves them out on request", () => {
    const ids = [specialTokens.user, ...tokenizer.encode("hi"), specialTokens.endOfTurn];
    expect(tokenizer.decode(ids)).toBe("<|user|>hi<|end|>");
    expect(tokenizer.decode(ids, { skipSpecial: true })).toBe("hi");
    expect(() => tokenizer.decode([999])).toThrow(/token id 999 is not in the byte tokenizer's vocabulary/);
  });
});

describe("chat template", () => {
  const messages = [
    { role: "system" as const, content: "be brief" },
    { role: "user" as const, content: "2+2?" },
    { role: "assistant" as const, content: "4" },
    { role: "user" as const, content: "and 3+3?" },
    { role: "assistant" as const, content: "6" },
  ];

  it("renders bos, then <|role|> content <|end|> per message", () => {
    const { tokens } = renderChat(tokenizer, messages);
    expect(tokenizer.decode(tokens)).toBe(
      "<|bos|><|system|>be brief<|end|><|user|>2+2?<|end|><|assistant|>4<|end|><|user|>and 3+3?<|end|><|assistant|>6<|end|>",
    );
  });

  it("marks exactly the assistant's content and its end-of-turn as produced by the policy", () => {
    const { tokens, lossMask } = renderChat(tokenizer, messages);
    expect(lossMask.length).toBe(tokens.length);
    const marked = tokens.filter((_, i) => lossMask[i] === 1);
    expect(tokenizer.decode(marked)).toBe("4<|end|>6<|end|>");
  });

  it("ends with the assistant's role token when asked for a generation prompt", () => {
    const { tokens, lossMask } = renderChat(tokenizer, messages.slice(0, 2), { addGenerationPrompt: true });
    expect(tokens.at(-1)).toBe(specialTokens.assistant);
    expect(lossMask.every((m) => m === 0)).toBe(true);
  });
});
