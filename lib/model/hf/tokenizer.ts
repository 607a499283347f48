import { Template } from "@huggingface/jinja";
import { Tokenizer as LibraryTokenizer } from "@huggingface/tokenizers";

/**
 * A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json, optionally chat_template.jinja and
 * generation_config.json) behind the engine's Tokenizer interface. Tokenization is @huggingface/tokenizers' (the
 * classes transformers.js uses); chat templates are rendered with @huggingface/jinja as transformers'
 * apply_chat_template does, and the rendered text is tokenized in one piece, special-token strings becoming their ids.
 */
import type { ChatMessage, RenderedChat } from "../chat";
import { nodeFs } from "../node-fs";
import type { Tokenizer } from "../tokenizer";

export interface HFTokenizerFiles {
  /** tokenizer.json, parsed */
  tokenizer: object;
  /** tokenizer_config.json, parsed ({} when the folder has none) */
  config: object;
  /** chat_template.jinja; when present it wins over tokenizer_config.json's chat_template */
  chatTemplate?: string;
  /** generation_config.json, parsed */
  generationConfig?: object;
}

const loadableModels = ["BPE", "Unigram", "WordPiece"];
const roles: readonly string[] = ["system", "user", "assistant"];
const noTemplate =
  "this Hugging Face tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja); " +
  "encode and decode work, but conversations cannot be rendered until the model folder has one";

export class HFTokenizer implements Tokenizer {
  readonly kind = "hf" as const;
  readonly vocabSize: number;
  readonly stopTokens: readonly number[];
  readonly padToken: number;
  /** the special token that closes an assistant turn in the template (e.g. `<|im_end|>`), when there is one */
  readonly endOfTurn: string | undefined;
  private readonly lib: LibraryTokenizer;
  private readonly vocab: readonly (string | undefined)[];
  private readonly specials: Set<string>;
  private readonly added: ReadonlyMap<number, unknown>;
  private readonly byteLevel: boolean;
  private readonly template: Template | undefined;
  private readonly templateError: string | undefined;
  private readonly templateTokens: Record<string, string>;

  private constructor(private readonly parts: HFTokenizerFiles) {
    const json = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, added_tokens: [], ...parts.tokenizer } as Record<string, any>;
    const config = parts.config as Record<string, unknown>;
    const modelType = json.model?.type;
    if (!loadableModels.includes(modelType)) {
      throw new Error(`tokenizer.json model.type ${JSON.stringify(modelType)} is not supported; accepted: ${loadableModels.join(", ")}`);
    }
    this.templateTokens = {};
    for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
      const value = tokenString(config[key]);
      if (value !== undefined) this.templateTokens[key] = value;
    }
    try {
      this.lib = new LibraryTokenizer(json, { ...config, ...this.templateTokens });
    } catch (error) {
      throw new Error(`tokenizer.json cannot be loaded: ${(error as Error).message}`);
    }
    this.vocab = this.lib.model?.vocab ?? [];
    this.vocabSize = this.vocab.length;
    this.added = this.lib.get_added_tokens_decoder();
    this.specials = new Set((json.added_tokens as { content: string; special?: boolean }[]).filter((t) => t.special).map((t) => t.content));
    const decoders = json.decoder?.type === "Sequence" ? (json.decoder.decoders ?? []) : [json.decoder];
    this.byteLevel = decoders.some((d: { type?: string } | null) => d?.type === "ByteLevel");

    const source = parts.chatTemplate ?? configTemplate(config.chat_template);
    if (source === undefined) this.templateError = noTemplate;
    else {
      try {
        this.template = new Template(source);
      } catch (error) {
        this.templateError = `the chat template does not parse with @huggingface/jinja: ${(error as Error).message}`;
      }
    }
    this.endOfTurn = this.findEndOfTurn();

    // The template's end of turn first: it is where a reply ends (and what a constrained action ends with).
    const stops: number[] = [];
    if (this.endOfTurn !== undefined) stops.push(this.idOf(this.endOfTurn, "the chat template's end-of-turn token"));
    const eos = this.templateTokens.eos_token;
    if (eos !== undefined) stops.push(this.idOf(eos, "tokenizer_config.json eos_token"));
    const generationEos = (parts.generationConfig as { eos_token_id?: unknown } | undefined)?.eos_token_id;
    for (const id of generationEos === undefined || generationEos === null ? [] : [generationEos].flat()) {
      if (!Number.isInteger(id) || this.vocab[id as number] === undefined) {
        throw new Error(
          `generation_config.json eos_token_id ${JSON.stringify(generationEos)} must be a token id or a list of them in 0..${this.vocabSize - 1}`,
        );
      }
      stops.push(id as number);
    }
    this.stopTokens = [...new Set(stops)];
    const pad = this.templateTokens.pad_token;
    const padToken = pad !== undefined ? this.idOf(pad, "tokenizer_config.json pad_token") : this.stopTokens[0];
    if (padToken === undefined) {
      throw new Error("tokenizer has no stop token: set eos_token in tokenizer_config.json or eos_token_id in generation_config.json");
    }
    this.padToken = padToken;
  }

  static fromFiles(parts: HFTokenizerFiles): HFTokenizer {
    return new HFTokenizer(parts);
  }

  /** Reads a Hugging Face model folder; tokenizer.json is required, the other files are optional. */
  static fromFolder(dir: string): HFTokenizer {
    const fs = nodeFs("HFTokenizer.fromFolder (elsewhere use HFTokenizer.fromFiles)");
    const read = (name: string) => (fs.existsSync(`${dir}/${name}`) ? fs.readFileSync(`${dir}/${name}`, "utf8") : undefined);
    const readJSON = (name: string) => {
      const text = read(name);
      try {
        return text === undefined ? undefined : (JSON.parse(text) as object);
      } catch (error) {
        throw new Error(`${dir}/${name} is not valid JSON: ${(error as Error).message}`);
      }
    };
    const tokenizer = readJSON("tokenizer.json");
    if (tokenizer === undefined) throw new Error(`${dir} has no tokenizer.json; a Hugging Face tokenizer needs one (the "fast" tokenizer format)`);
    return new HFTokenizer({
      tokenizer,
      config: readJSON("tokenizer_config.json") ?? {},
      chatTemplate: read("chat_template.jinja"),
      generationConfig: readJSON("generation_config.json"),
    });
  }

  /** The parts this tokenizer was built from, for a checkpoint to store; `fromFiles(t.files())` rebuilds it. */
  files(): HFTokenizerFiles {
    return { ...this.parts };
  }

  /** Plain text to ids; adds no BOS/EOS, but special-token strings in the text become their ids (as transformers does). */
  encode(text: string): number[] {
    return this.lib.encode(text, { add_special_tokens: false }).ids;
  }

  /**
   * Ids to text, without transformers' legacy clean-up of spaces before punctuation, so that decode(encode(t)) === t.
   * An id outside the vocabulary (a model's embedding table is often padded past it) is an error, or with
   * `skipSpecial` left out together with the special tokens.
   */
  decode(tokens: readonly number[], options: { skipSpecial?: boolean } = {}): string {
    const known = tokens.filter((t) => {
      if (Number.isInteger(t) && this.vocab[t] !== undefined) return true;
      if (options.skipSpecial) return false;
      throw new Error(`token id ${t} is not in this tokenizer's vocabulary (0..${this.vocabSize - 1})`);
    });
    if (known.length === 0) return "";
    return this.lib.decode(known, { skip_special_tokens: options.skipSpecial ?? false, clean_up_tokenization_spaces: false });
  }

  /** One token for display: its text, with bytes that are not whole UTF-8 characters written as `<0xE2>`. */
  tokenText(id: number): string {
    const token = this.vocab[id];
    if (token === undefined) return `<id ${id}>`;
    if (this.added.has(id)) return token;
    const bytes = this.tokenBytes(id);
    if (bytes) return readableBytes(bytes);
    // SentencePiece-style vocabularies: ▁ is a space, and byte-fallback tokens are already written <0xNN>.
    return token.replaceAll("\u2581", " ");
  }

  /**
   * Every ordinary token (not an added or special one) with the bytes it writes, for holding sampling to legal
   * actions; empty when the vocabulary is not byte-level (its tokens' bytes are not known exactly).
   */
  textTokens(): readonly (readonly [number, readonly number[]])[] {
    if (this.textTokenList) return this.textTokenList;
    const list: [number, number[]][] = [];
    if (this.byteLevel) {
      for (let id = 0; id < this.vocab.length; id++) {
        if (this.added.has(id)) continue;
        const bytes = this.tokenBytes(id);
        if (bytes && bytes.length > 0) list.push([id, bytes]);
      }
    }
    this.textTokenList = list;
    return list;
  }
  private textTokenList: [number, number[]][] | undefined;

  /** The UTF-8 bytes a token stands for, when known: added tokens, and every token of a byte-level vocabulary. */
  tokenBytes(id: number): number[] | undefined {
    const token = this.vocab[id];
    if (token === undefined) return undefined;
    if (this.added.has(id)) return Array.from(utf8.encode(token));
    if (!this.byteLevel) return undefined;
    const bytes = Array.from(token, (c) => unicodeToByte.get(c));
    return bytes.every((b) => b !== undefined) ? (bytes as number[]) : undefined;
  }

  /**
   * The conversation through the chat template, tokenized in one piece. The loss mask is 1 on the tokens of each
   * assistant message's content and the end-of-turn token that closes it, found in the rendered text:
   *  - the content starts where the conversation before it, rendered with the generation prompt, ends;
   *  - it ends after the content (or the trimmed content, for templates that trim) and the end-of-turn token if that
   *    follows; a template that writes the content otherwise is masked up to its first end-of-turn token.
   * A token is masked when its text overlaps that span, so a token straddling the boundary counts as the policy's.
   */
  renderChat(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): RenderedChat {
    const text = this.render(messages, options.addGenerationPrompt ?? false);
    const tokens = this.encode(text);
    const lossMask = new Array<number>(tokens.length).fill(0);
    const offsets = new TokenOffsets(this, tokens, text);
    messages.forEach((message, i) => {
      if (message.role !== "assistant") return;
      const [start, end] = this.assistantSpan(messages, i, text);
      lossMask.fill(1, offsets.firstEndingAfter(start), offsets.firstStartingAt(end));
    });
    return { tokens, lossMask };
  }

  /** The rendered conversation's tokens alone: one template render, where the loss mask needs one per reply more. */
  encodeChat(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): number[] {
    return this.encode(this.render(messages, options.addGenerationPrompt ?? false));
  }

  private render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string {
    for (const m of messages) {
      if (!roles.includes(m.role)) throw new Error(`chat role must be system, user or assistant; got '${String(m.role)}'`);
    }
    if (!this.template) throw new Error(this.templateError);
    try {
      return this.template.render({
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
        add_generation_prompt: addGenerationPrompt,
        ...this.templateTokens,
      });
    } catch (error) {
      throw new Error(`the chat template failed to render: ${(error as Error).message}`);
    }
  }

  /** The character span [start, end) of messages[i] (an assistant message) and its end-of-turn in `text`. */
  private assistantSpan(messages: readonly ChatMessage[], i: number, text: string): [number, number] {
    const unstable = (count: number) =>
      new Error(
        `the chat template renders the first ${count} messages differently from the start of the whole conversation, so assistant message ${i} cannot be located for the loss mask`,
      );
    const prompt = this.render(messages.slice(0, i), true);
    if (!text.startsWith(prompt)) throw unstable(i);
    const start = prompt.length;
    const content = messages[i].content;
    const eot = this.endOfTurn;
    let end: number;
    if (text.startsWith(content, start)) end = start + content.length;
    else if (text.startsWith(content.trim(), start)) end = start + content.trim().length;
    else {
      // The template rewrote the content: take the turn up to its first end-of-turn token, or all of it.
      const turn = this.render(messages.slice(0, i + 1), false);
      if (!text.startsWith(turn) || turn.length < start) throw unstable(i + 1);
      const close = eot === undefined ? -1 : text.indexOf(eot, start);
      end = close >= 0 && close < turn.length ? close : turn.length;
    }
    if (eot !== undefined && text.startsWith(eot, end)) end += eot.length;
    return [start, end];
  }

  /** The special token the template writes right after an assistant message's content, found by rendering a probe. */
  private findEndOfTurn(): string | undefined {
    if (!this.template) return undefined;
    const probe = "tinkerlab0probe";
    let after: string;
    try {
      const text = this.render(
        [
          { role: "user", content: "hello" },
          { role: "assistant", content: probe },
        ],
        false,
      );
      after = text.slice(text.lastIndexOf(probe) + probe.length);
    } catch {
      return undefined;
    }
    let best: string | undefined;
    for (const special of this.specials) {
      if (after.startsWith(special) && special.length > (best?.length ?? 0)) best = special;
    }
    return best;
  }

  private idOf(token: string, what: string): number {
    const id = this.lib.token_to_id(token);
    if (id === undefined) throw new Error(`${what} ${JSON.stringify(token)} is not in tokenizer.json's vocabulary`);
    return id;
  }
}

/**
 * Where tokens sit in the text they were encoded from (the library gives no offsets), as a monotone measure of
 * "text before token k" and of "text before character p", so that overlaps are found by binary search:
 *  - in bytes, when every token's bytes are known and they concatenate to the text's UTF-8 (byte-level BPE whose
 *    normalizer, if any, left this text alone): exact, and linear in the number of tokens;
 *  - otherwise in decoded characters, by decoding prefixes of the token list; a position in the source is first
 *    carried into decoded text by round-tripping the source's prefix (an NFC normalizer may have shortened it).
 */
class TokenOffsets {
  private readonly byteStarts: number[] | undefined;
  private readonly decodedLengths = new Map<number, number>();
  private readonly exactDecode: boolean;

  constructor(
    private readonly tokenizer: HFTokenizer,
    private readonly tokens: readonly number[],
    private readonly text: string,
  ) {
    this.byteStarts = byteStarts(
      tokens.map((t) => tokenizer.tokenBytes(t)),
      utf8.encode(text),
    );
    this.exactDecode = this.byteStarts !== undefined || tokenizer.decode(tokens) === text;
  }

  /** The first token whose text ends after character `position`: the first one overlapping the text from there on. */
  firstEndingAfter(position: number): number {
    const target = this.measureText(position);
    return this.search((k) => this.measureTokens(k + 1) > target);
  }

  /** The first token that starts at or after character `position`: the end of the tokens overlapping the text before it. */
  firstStartingAt(position: number): number {
    const target = this.measureText(position);
    return this.search((k) => this.measureTokens(k) >= target);
  }

  private measureText(position: number): number {
    if (this.byteStarts) return utf8Length(this.text, position);
    return this.exactDecode ? position : this.tokenizer.decode(this.tokenizer.encode(this.text.slice(0, position))).length;
  }

  /** The size of the first k tokens' text; in decoded characters a trailing partial UTF-8 character counts as one. */
  private measureTokens(k: number): number {
    if (this.byteStarts) return this.byteStarts[k];
    let length = this.decodedLengths.get(k);
    if (length === undefined) {
      length = this.tokenizer.decode(this.tokens.slice(0, k)).length;
      this.decodedLengths.set(k, length);
    }
    return length;
  }

  /** The smallest k in [0, tokens.length] for which `holds` is true (it is monotone in k), else tokens.length. */
  private search(holds: (k: number) => boolean): number {
    let low = 0;
    let high = this.tokens.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (holds(mid)) high = mid;
      else low = mid + 1;
    }
    return low;
  }
}

const utf8 = new TextEncoder();

/** The UTF-8 size of text.slice(0, end) as TextEncoder writes it, without encoding it. */
function utf8Length(text: string, end: number): number {
  let bytes = 0;
  for (let i = 0; i < end; i++) {
    const unit = text.charCodeAt(i);
    const pair = unit >= 0xd800 && unit < 0xdc00 && i + 1 < end && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    // A surrogate pair is one 4-byte character; a lone surrogate becomes U+FFFD, 3 bytes.
    bytes += unit < 0x80 ? 1 : unit < 0x800 ? 2 : pair ? 4 : 3;
    if (pair) i++;
  }
  return bytes;
}

/** Byte offset of each token's start (and of the end, last), or undefined unless the tokens spell `text` exactly. */
function byteStarts(pieces: (number[] | undefined)[], text: Uint8Array): number[] | undefined {
  const starts = [0];
  let at = 0;
  for (const bytes of pieces) {
    if (bytes === undefined) return undefined;
    for (const b of bytes) if (text[at++] !== b) return undefined;
    starts.push(at);
  }
  return at === text.length ? starts : undefined;
}

/** A special token in tokenizer_config.json: a string, or an AddedToken object `{content, ...}`. */
function tokenString(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && typeof (value as { content?: unknown }).content === "string") return (value as { content: string }).content;
  return undefined;
}

function configTemplate(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const named = value.find((t) => t?.name === "default");
    if (typeof named?.template === "string") return named.template;
    const names = value.map((t) => JSON.stringify(t?.name)).join(", ");
    throw new Error(
      `tokenizer_config.json chat_template is a list with no template named "default" (names: ${names}); accepted: a template string, or a list of {name, template} including "default"`,
    );
  }
  throw new Error(`tokenizer_config.json chat_template must be a template string or a list of {name, template}; got ${typeof value}`);
}

/** GPT-2's byte-level alphabet, reversed: each vocabulary character stands for one byte. */
const unicodeToByte = (() => {
  const map = new Map<string, number>();
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    map.set(String.fromCharCode(printable ? b : 256 + shifted++), b);
  }
  return map;
})();

/** UTF-8 bytes as text, each byte that is not part of a whole, valid character written as `<0xNN>`. */
function readableBytes(bytes: number[]): string {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i];
    const width = lead < 0x80 ? 1 : lead >= 0xc2 && lead < 0xe0 ? 2 : lead >= 0xe0 && lead < 0xf0 ? 3 : lead >= 0xf0 && lead < 0xf5 ? 4 : 0;
    if (width > 0 && i + width <= bytes.length) {
      try {
        out += decoder.decode(Uint8Array.from(bytes.slice(i, i + width)));
        i += width;
        continue;
      } catch {
        // not a valid sequence: fall through and show the lead byte alone
      }
    }
    out += `<0x${lead.toString(16).toUpperCase().padStart(2, "0")}>`;
    i += 1;
  }
  return out;
}
