import fs from "node:fs";
import path from "node:path";

/**
 * Small Hugging Face tokenizer folders for tests, written without any download: a byte-level BPE vocabulary (the 256
 * byte symbols plus merges learned from a short English text) shaped like a real family's files.
 *  - "chatml": Qwen2/SmolLM2-like. NFC normalizer, GPT-2's ByteLevel pre-tokenizer, merges as "a b" strings,
 *    specials <|endoftext|> <|im_start|> <|im_end|>, eos <|im_end|>, pad <|endoftext|>, a ChatML template with a
 *    default system message in tokenizer_config.json, generation_config eos_token_id a number.
 *  - "llama3": Llama 3-like. Split with Llama 3's regex then ByteLevel without regex, merges as pairs, ignore_merges,
 *    a TemplateProcessing post-processor that would add <|begin_of_text|>, the template in chat_template.jinja
 *    (bos_token first, content trimmed, <|eot_id|> after each turn), generation_config eos_token_id a list.
 */
export type TokenizerVariant = "chatml" | "llama3";

export const trainingText = `The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest.
In the morning the sun rose over the hills, and the people of the town went to the market to buy bread and cheese.
"Hello there," said the baker. "What would you like today?" The answer was always the same: bread, bread, and more bread.
It's a small town; they're friendly, and we've always liked it there. I'm sure you'll like it too.
Numbers: 1, 2, 3, 10, 20, 100, 2024. The café sold 12 croissants and the naïve tourist paid 3.50 for each one.
def hello(name): return "Hello, " + name  # a line of code in the text
Déjà vu at the café: crème brûlée, a résumé, an éclair, café au lait, and the élan of the café.
The end of the story is near, and the story of the town ends here.`;

const specials: Record<TokenizerVariant, string[]> = {
  chatml: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
  llama3: ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
};

export const llama3Pattern =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

export const chatmlTemplate =
  "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}" +
  "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}" +
  "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export const llama3Template =
  "{% set loop_messages = messages %}{% for message in loop_messages %}" +
  "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}" +
  "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

/** GPT-2's byte → printable character table, in GPT-2's vocabulary order (printable bytes first). */
export function bytesToUnicode(): Map<number, string> {
  const bytes: number[] = [];
  for (let b = 0; b < 256; b++) if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) bytes.push(b);
  const chars = bytes.map((b) => String.fromCharCode(b));
  for (let b = 0, n = 0; b < 256; b++) {
    if (!bytes.includes(b)) {
      bytes.push(b);
      chars.push(String.fromCharCode(256 + n++));
    }
  }
  return new Map(bytes.map((b, i) => [b, chars[i]]));
}

/** Learns `count` byte-level BPE merges from `text` (most frequent pair first, ties broken by the pair's text). */
export function learnMerges(text: string, count: number): [string, string][] {
  const table = bytesToUnicode();
  const encoder = new TextEncoder();
  const frequency = new Map<string, number>();
  for (const word of text.match(/'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu) ?? []) {
    const symbols = Array.from(encoder.encode(word), (b) => table.get(b)!).join(" ");
    frequency.set(symbols, (frequency.get(symbols) ?? 0) + 1);
  }
  let words = [...frequency].map(([symbols, n]) => ({ symbols: symbols.split(" "), n }));
  const merges: [string, string][] = [];
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { symbols, n } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) pairs.set(`${symbols[i]} ${symbols[i + 1]}`, (pairs.get(`${symbols[i]} ${symbols[i + 1]}`) ?? 0) + n);
    }
    const best = [...pairs].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0];
    if (!best) break;
    const [left, right] = best[0].split(" ");
    merges.push([left, right]);
    words = words.map(({ symbols, n }) => {
      const merged: string[] = [];
      for (let i = 0; i < symbols.length; i++) {
        if (symbols[i] === left && symbols[i + 1] === right) merged.push(left + symbols[++i]);
        else merged.push(symbols[i]);
      }
      return { symbols: merged, n };
    });
  }
  return merges;
}

export interface TokenizerFolderFiles {
  tokenizer: Record<string, any>;
  config: Record<string, any>;
  chatTemplate?: string;
  generationConfig: Record<string, any>;
}

/** The parsed files of a fixture folder (what writeTokenizerFolder writes). */
export function tokenizerFiles(variant: TokenizerVariant): TokenizerFolderFiles {
  const vocab: Record<string, number> = {};
  for (const char of bytesToUnicode().values()) vocab[char] = Object.keys(vocab).length;
  const merges = learnMerges(trainingText, variant === "chatml" ? 80 : 100);
  for (const [a, b] of merges) vocab[a + b] ??= Object.keys(vocab).length;
  // Llama 3 keeps whole words no merge path builds; ignore_merges takes them directly.
  const unmergedWord = "Ġzebra";
  if (variant === "llama3") vocab[unmergedWord] = Object.keys(vocab).length;
  const firstSpecial = Object.keys(vocab).length;
  const addedTokens = specials[variant].map((content, i) => ({
    id: firstSpecial + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const model = {
    type: "BPE",
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
  };
  if (variant === "chatml") {
    return {
      tokenizer: {
        version: "1.0",
        added_tokens: addedTokens,
        normalizer: { type: "NFC" },
        pre_tokenizer: byteLevel,
        post_processor: { ...byteLevel, trim_offsets: false },
        decoder: byteLevel,
        model: { ...model, vocab, merges: merges.map(([a, b]) => `${a} ${b}`) },
      },
      config: {
        add_prefix_space: false,
        bos_token: null,
        eos_token: "<|im_end|>",
        pad_token: "<|endoftext|>",
        unk_token: null,
        clean_up_tokenization_spaces: false,
        model_max_length: 2048,
        tokenizer_class: "Qwen2Tokenizer",
        chat_template: chatmlTemplate,
      },
      generationConfig: { eos_token_id: firstSpecial },
    };
  }
  const bos = firstSpecial;
  return {
    tokenizer: {
      version: "1.0",
      added_tokens: addedTokens,
      normalizer: null,
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          { type: "Split", pattern: { Regex: llama3Pattern }, behavior: "Isolated", invert: false },
          { ...byteLevel, use_regex: false },
        ],
      },
      post_processor: {
        type: "Sequence",
        processors: [
          { ...byteLevel, use_regex: false },
          {
            type: "TemplateProcessing",
            single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
            pair: [
              { SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
              { Sequence: { id: "A", type_id: 0 } },
              { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } },
              { Sequence: { id: "B", type_id: 1 } },
            ],
            special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [bos], tokens: ["<|begin_of_text|>"] } },
          },
        ],
      },
      decoder: { ...byteLevel, use_regex: true },
      model: { ...model, ignore_merges: true, vocab, merges },
    },
    config: {
      // An AddedToken object rather than a plain string, as older tokenizer_config.json files write it.
      bos_token: { __type: "AddedToken", content: "<|begin_of_text|>", lstrip: false, normalized: false, rstrip: false, single_word: false },
      eos_token: "<|end_of_text|>",
      clean_up_tokenization_spaces: true,
      model_max_length: 131072,
      tokenizer_class: "PreTrainedTokenizerFast",
    },
    chatTemplate: llama3Template,
    generationConfig: { bos_token_id: bos, eos_token_id: [bos + 1, bos + 4] },
  };
}

/** Writes tokenizer.json, tokenizer_config.json, generation_config.json (and chat_template.jinja for llama3) to `dir`. */
export function writeTokenizerFolder(dir: string, variant: TokenizerVariant): string {
  const files = tokenizerFiles(variant);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(files.tokenizer, null, 2));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(files.config, null, 2));
  fs.writeFileSync(path.join(dir, "generation_config.json"), JSON.stringify(files.generationConfig, null, 2));
  if (files.chatTemplate !== undefined) fs.writeFileSync(path.join(dir, "chat_template.jinja"), files.chatTemplate);
  return dir;
}
