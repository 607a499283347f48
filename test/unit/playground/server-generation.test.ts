/**
 * The playground's "Server (/v1)" backend: what it asks the endpoint, how it reads the streamed events, and how the
 * tokens the endpoint names by text and bytes become chips.
 */
import { describe, expect, it } from "vitest";
import { parseBackendPreference } from "@/components/playground/backend-choice";
import { CHIP_ALTERNATIVES } from "@/components/playground/protocol";
import { chatCompletionBody, eventData } from "@/components/playground/server-generation";
import { ServedTokenLabels, servedTokenLabel } from "@/components/playground/token-label";

const settings = { maxTokens: 12, temperature: 0, topK: 0, topP: 0.9, seed: 7 };
const messages = [{ role: "user" as const, content: "2+3=" }];

function streamOf(parts: string[]): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(bytes.encode(part));
      controller.close();
    },
  });
}

describe("the playground's server backend", () => {
  it("is a backend a link or this browser's storage may name", () => {
    expect(parseBackendPreference("server")).toBe("server");
  });

  it("asks for a streamed chat completion with the form's sampling and a chip's alternatives", () => {
    expect(chatCompletionBody({ model: "ckpt_abc", messages, settings })).toEqual({
      model: "ckpt_abc",
      messages,
      max_tokens: 12,
      temperature: 0,
      top_p: 0.9,
      seed: 7,
      stream: true,
      stream_options: { include_usage: true },
      logprobs: true,
      top_logprobs: CHIP_ALTERNATIVES,
    });
    const { seed: _seed, ...unseeded } = settings;
    expect(chatCompletionBody({ model: "generalist-base", messages, settings: unseeded })).not.toHaveProperty("seed");
  });

  it("refuses top-k, which OpenAI's API has no field for, saying what to set", () => {
    expect(() => chatCompletionBody({ model: "generalist-base", messages, settings: { ...settings, topK: 4 } })).toThrow(/top-k 4 .* Set top-k to 0/);
  });

  it("reads each event's data, whatever the network's chunks cut", async () => {
    const events = ['data: {"a":1}\n\n', 'data: {"b"', ":2}\r\n\r\ndata: [DO", "NE]\n\n"];
    const read: string[] = [];
    for await (const data of eventData(streamOf(events))) read.push(data);
    expect(read).toEqual(['{"a":1}', '{"b":2}', "[DONE]"]);
  });

  it("labels served tokens as the browser's chips do, and gives the same token the same id", () => {
    expect(servedTokenLabel({ text: " ", bytes: [0x20] })).toBe("␣");
    expect(servedTokenLabel({ text: "5", bytes: [0x35] })).toBe("5");
    expect(servedTokenLabel({ text: "\uFFFD", bytes: [0xe2] })).toBe("\\xe2");
    expect(servedTokenLabel({ text: "<|end|>", bytes: [...new TextEncoder().encode("<|end|>")] })).toBe("<|end|>");
    expect(servedTokenLabel({ text: " the\n", bytes: [...new TextEncoder().encode(" the\n")] })).toBe("␣the↵");
    expect(servedTokenLabel({ text: "\uFFFD", bytes: [0xe2, 0x82] })).toBe("<0xE2><0x82>");

    const labels = new ServedTokenLabels();
    const five = labels.id({ text: "5", bytes: [0x35] });
    const newline = labels.id({ text: "\n", bytes: [0x0a] });
    expect(labels.id({ text: "5", bytes: [0x35] })).toBe(five);
    expect(newline).not.toBe(five);
    expect(labels.label(five)).toBe("5");
    expect(labels.endsLine(newline)).toBe(true);
    expect(labels.endsLine(five)).toBe(false);
  });
});
