import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HFTokenizer } from "@/lib/model/hf/tokenizer";
import { chatmlTemplate, type TokenizerVariant, tokenizerFiles, writeTokenizerFolder } from "@/test/support/hf-fixtures";

type Message = { role: "system" | "user" | "assistant"; content: string };

const texts = [
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "  leading and trailing spaces   ",
  "tabs\tand\nnewlines\n\n\nand\r\nCRLF line ends\n",
  "numbers 1234567 and 3.14159, the 42nd of 2024",
  "punctuation!!! ??? ... --- (parens) [brackets] {braces} \"quotes\" 'single' #$%&*@^_~`|\\",
  "don't I'm we're they've she'll he'd it's; DON'T WE'RE mixed CASE 'S 'LL",
  "café naïve résumé — “smart quotes” … déjà vu, crème brûlée",
  "日本語のテキスト and 中文 mixed with Ελληνικά and русский",
  "emoji 😀👍🏽 and 🇫🇷 flags, family 👨‍👩‍👧",
  "non\u00a0breaking space and    a run of spaces",
  "special tokens inline: <|im_start|>user\nhi<|im_end|> <|endoftext|> <|begin_of_text|><|eot_id|> <|start_header_id|>",
  "almost special: <|im_start and im_end|> <|unknown|>",
  "a zebra and zebras",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "",
  " ",
  "\n",
];

const conversations: { messages: Message[]; add_generation_prompt: boolean }[] = [
  {
    messages: [
      { role: "user", content: "Hi there!" },
      { role: "assistant", content: "Hello! How can I help you today?" },
    ],
    add_generation_prompt: false,
  },
  {
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "What is 2+2?" },
    ],
    add_generation_prompt: true,
  },
  {
    messages: [
      { role: "user", content: "Name a colour." },
      { role: "assistant", content: "Blue." },
      { role: "user", content: "Another one, in French?" },
      { role: "assistant", content: "  Vert, comme un café 😀  \n" },
    ],
    add_generation_prompt: false,
  },
  {
    messages: [
      { role: "user", content: "Quote the token <|im_end|> and <|eot_id|> please" },
      { role: "assistant", content: "\nThe  text\n\nhas\tspaces " },
      { role: "user", content: "Thanks" },
    ],
    add_generation_prompt: true,
  },
  {
    // "e" + combining acute: the chatml variant's NFC normalizer composes it, so decoded text differs from the source.
    messages: [
      { role: "user", content: "Spell cafe\u0301." },
      { role: "assistant", content: "cafe\u0301 is spelled c-a-f-e\u0301" },
    ],
    add_generation_prompt: false,
  },
];

const python = "/usr/bin/python3";
/** Fails (never skips) where the reference cannot run: it is the tokenizer's one independent check. */
function requireJinja(): void {
  if (spawnSync(python, ["-c", "import jinja2"]).status !== 0) {
    throw new Error(
      `the tokenizer is compared with a Python reference, and ${python} cannot import jinja2; install it with \`apt-get install -y python3-jinja2\` (CI installs it)`,
    );
  }
}

let root: string;
beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "hf-tokenizer-"));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function folder(variant: TokenizerVariant): string {
  const dir = path.join(root, variant);
  return fs.existsSync(dir) ? dir : writeTokenizerFolder(dir, variant);
}

/** Decoded token ids of the masked runs, one string per run. */
function maskedRuns(tokenizer: HFTokenizer, tokens: number[], mask: number[]): string[] {
  const runs: number[][] = [];
  mask.forEach((m, i) => {
    if (m === 1 && (i === 0 || mask[i - 1] === 0)) runs.push([]);
    if (m === 1) runs.at(-1)!.push(tokens[i]);
  });
  return runs.map((run) => tokenizer.decode(run));
}

describe.each(["chatml", "llama3"] as const)("HFTokenizer (%s fixture)", (variant) => {
  const eot = variant === "chatml" ? "<|im_end|>" : "<|eot_id|>";

  it("matches the Python reference on texts and rendered conversations", () => {
    requireJinja();
    const dir = folder(variant);
    const input = path.join(root, `${variant}-input.json`);
    fs.writeFileSync(input, JSON.stringify({ texts, conversations }));
    const reference = JSON.parse(execFileSync(python, ["test/reference/hf_tokenizer.py", dir, input], { encoding: "utf8" })) as {
      texts: number[][];
      conversations: { text: string; ids: number[] }[];
    };
    const tokenizer = HFTokenizer.fromFolder(dir);
    texts.forEach((text, i) => expect(tokenizer.encode(text), JSON.stringify(text)).toEqual(reference.texts[i]));
    conversations.forEach((c, i) => {
      const { tokens } = tokenizer.renderChat(c.messages, { addGenerationPrompt: c.add_generation_prompt });
      expect(tokens, `conversation ${i}`).toEqual(reference.conversations[i].ids);
      expect(tokenizer.decode(tokens)).toBe(variant === "chatml" ? reference.conversations[i].text.normalize("NFC") : reference.conversations[i].text);
    });
  });

  it("round-trips text through encode and decode, and tokenizes a conversation as its rendered text in one piece", () => {
    const tokenizer = HFTokenizer.fromFolder(folder(variant));
    for (const text of texts) expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
    const { tokens } = tokenizer.renderChat(conversations[2].messages);
    expect(tokenizer.encode(tokenizer.decode(tokens))).toEqual(tokens);
  });

  it("masks exactly each assistant message's content and its end-of-turn token", () => {
    const tokenizer = HFTokenizer.fromFolder(folder(variant));
    for (const c of conversations) {
      const { tokens, lossMask } = tokenizer.renderChat(c.messages, { addGenerationPrompt: c.add_generation_prompt });
      expect(lossMask).toHaveLength(tokens.length);
      // The llama3 template trims contents; the chatml tokenizer composes to NFC.
      const expected = c.messages
        .filter((m) => m.role === "assistant")
        .map((m) => (variant === "llama3" ? m.content.trim() : m.content.normalize("NFC")) + eot);
      expect(maskedRuns(tokenizer, tokens, lossMask)).toEqual(expected);
    }
  });

  it("adds no BOS of its own: encode adds none, and a rendered chat holds only what the template writes", () => {
    const tokenizer = HFTokenizer.fromFolder(folder(variant));
    const { tokens } = tokenizer.renderChat(conversations[0].messages);
    expect(tokenizer.decode(tokenizer.encode("hi"))).toBe("hi");
    if (variant === "llama3") {
      const [bos] = tokenizer.encode("<|begin_of_text|>");
      expect(tokenizer.encode("hi")).not.toContain(bos);
      expect(tokens.filter((t) => t === bos)).toHaveLength(1);
      expect(tokens[0]).toBe(bos);
    } else {
      expect(tokens[0]).toBe(tokenizer.encode("<|im_start|>")[0]);
    }
  });

  it("knows its vocabulary size, stop tokens and pad token", () => {
    const files = tokenizerFiles(variant);
    const tokenizer = HFTokenizer.fromFolder(folder(variant));
    const id = (s: string) => files.tokenizer.added_tokens.find((t: { content: string }) => t.content === s).id as number;
    expect(tokenizer.kind).toBe("hf");
    expect(tokenizer.vocabSize).toBe(Math.max(...files.tokenizer.added_tokens.map((t: { id: number }) => t.id)) + 1);
    expect(tokenizer.endOfTurn).toBe(eot);
    if (variant === "chatml") {
      // the template's end of turn <|im_end|> first, then eos_token <|im_end|> and generation_config's <|endoftext|>
      expect(tokenizer.stopTokens).toEqual([id("<|im_end|>"), id("<|endoftext|>")]);
      expect(tokenizer.padToken).toBe(id("<|endoftext|>"));
    } else {
      // the template's <|eot_id|> first, then eos_token <|end_of_text|> (generation_config repeats both); no
      // pad_token, so the first stop
      expect(tokenizer.stopTokens).toEqual([id("<|eot_id|>"), id("<|end_of_text|>")]);
      expect(tokenizer.padToken).toBe(id("<|eot_id|>"));
    }
  });

  it("rebuilds an equal tokenizer from files()", () => {
    const tokenizer = HFTokenizer.fromFolder(folder(variant));
    const copy = HFTokenizer.fromFiles(JSON.parse(JSON.stringify(tokenizer.files())));
    expect(copy.vocabSize).toBe(tokenizer.vocabSize);
    expect(copy.stopTokens).toEqual(tokenizer.stopTokens);
    expect(copy.padToken).toBe(tokenizer.padToken);
    for (const text of texts) expect(copy.encode(text)).toEqual(tokenizer.encode(text));
    for (const c of conversations) expect(copy.renderChat(c.messages)).toEqual(tokenizer.renderChat(c.messages));
  });
});

describe("HFTokenizer details", () => {
  it("shows tokens readably: byte symbols as text, partial UTF-8 as <0xNN>, specials as written", () => {
    const tokenizer = HFTokenizer.fromFolder(folder("chatml"));
    const [the] = tokenizer.encode(" the");
    expect(tokenizer.tokenText(the)).toBe(" the");
    const cafe = tokenizer.encode(" café");
    expect(cafe).toHaveLength(1);
    expect(tokenizer.tokenText(cafe[0])).toBe(" café");
    expect(tokenizer.encode("😀").map((t) => tokenizer.tokenText(t))).toEqual(["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]);
    expect(tokenizer.encode("\n").map((t) => tokenizer.tokenText(t))).toEqual(["\n"]);
    expect(tokenizer.tokenText(tokenizer.encode("<|im_end|>")[0])).toBe("<|im_end|>");
    expect(tokenizer.tokenText(tokenizer.vocabSize + 5)).toBe(`<id ${tokenizer.vocabSize + 5}>`);
  });

  it("refuses ids outside the vocabulary unless skipping specials, which also drops special tokens", () => {
    const tokenizer = HFTokenizer.fromFolder(folder("chatml"));
    const ids = tokenizer.encode("<|im_start|>hi<|im_end|>");
    expect(() => tokenizer.decode([...ids, tokenizer.vocabSize])).toThrow(
      `token id ${tokenizer.vocabSize} is not in this tokenizer's vocabulary (0..${tokenizer.vocabSize - 1})`,
    );
    expect(tokenizer.decode([...ids, tokenizer.vocabSize], { skipSpecial: true })).toBe("hi");
    expect(tokenizer.decode([])).toBe("");
  });

  it("takes chat_template from tokenizer_config as a list with a 'default' entry, and chat_template.jinja over it", () => {
    const files = tokenizerFiles("chatml");
    const base = HFTokenizer.fromFiles(files);
    const listed = HFTokenizer.fromFiles({
      ...files,
      config: {
        ...files.config,
        chat_template: [
          { name: "tool_use", template: "x" },
          { name: "default", template: chatmlTemplate },
        ],
      },
    });
    expect(listed.renderChat(conversations[0].messages)).toEqual(base.renderChat(conversations[0].messages));
    const fromFile = HFTokenizer.fromFiles({ ...files, chatTemplate: "{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}" });
    expect(fromFile.decode(fromFile.renderChat(conversations[0].messages).tokens)).toBe("Hi there!<|im_end|>Hello! How can I help you today?<|im_end|>");
    expect(() => HFTokenizer.fromFiles({ ...files, config: { ...files.config, chat_template: [{ name: "rag", template: "x" }] } })).toThrow(
      /chat_template is a list with no template named "default" \(names: "rag"\)/,
    );
  });

  it("refuses what it cannot load, naming the field and what is accepted", () => {
    const files = tokenizerFiles("chatml");
    expect(() => HFTokenizer.fromFiles({ ...files, tokenizer: { ...files.tokenizer, model: { ...files.tokenizer.model, type: "CharLevel" } } })).toThrow(
      'tokenizer.json model.type "CharLevel" is not supported; accepted: BPE, Unigram, WordPiece',
    );
    expect(() => HFTokenizer.fromFiles({ ...files, config: { ...files.config, eos_token: "<|nope|>" } })).toThrow(
      'tokenizer_config.json eos_token "<|nope|>" is not in tokenizer.json\'s vocabulary',
    );
    expect(() => HFTokenizer.fromFolder(path.join(root, "missing"))).toThrow(/has no tokenizer.json/);
  });

  it("encodes and decodes without a chat template, and refuses to render a conversation", () => {
    const files = tokenizerFiles("chatml");
    const { chat_template: _, ...config } = files.config;
    const tokenizer = HFTokenizer.fromFiles({ ...files, config });
    expect(tokenizer.decode(tokenizer.encode("Hello, world!"))).toBe("Hello, world!");
    expect(tokenizer.endOfTurn).toBeUndefined();
    expect(tokenizer.stopTokens).toEqual(tokenizer.encode("<|im_end|><|endoftext|>"));
    expect(() => tokenizer.renderChat(conversations[0].messages)).toThrow(
      /has no chat template \(tokenizer_config.json chat_template or chat_template.jinja\); encode and decode work/,
    );
  });

  it("refuses an unknown chat role", () => {
    const tokenizer = HFTokenizer.fromFolder(folder("chatml"));
    expect(() => tokenizer.renderChat([{ role: "tool" as "user", content: "x" }])).toThrow("chat role must be system, user or assistant; got 'tool'");
  });
});
