/**
 * A tokenizer as a checkpoint stores it (`tokenizer.json` of a checkpoint folder, `tinkerlab.tokenizer` of an
 * ONNX file): the byte tokenizer's spec, or an imported model's Hugging Face files whole, so a checkpoint is
 * complete on its own and any machine rebuilds the same tokenizer from it.
 */
import { HFTokenizer, type HFTokenizerFiles } from "./hf/tokenizer";
import { ByteTokenizer, type ByteTokenizerSpec, type Tokenizer } from "./tokenizer";

interface HFTokenizerSpec {
  type: "hf";
  files: HFTokenizerFiles;
}

export type TokenizerSpec = ByteTokenizerSpec | HFTokenizerSpec;

export function tokenizerSpec(tokenizer: Tokenizer): TokenizerSpec {
  if (tokenizer instanceof ByteTokenizer) return tokenizer.toJSON();
  if (tokenizer instanceof HFTokenizer) return { type: "hf", files: tokenizer.files() };
  throw new Error(`a tokenizer of kind '${tokenizer.kind}' cannot be saved; accepted: the byte tokenizer and Hugging Face tokenizers`);
}

export function tokenizerFromSpec(spec: unknown, source: string): Tokenizer {
  const type = (spec as { type?: unknown } | null)?.type;
  if (type === "byte") return ByteTokenizer.fromJSON(spec as ByteTokenizerSpec);
  if (type === "hf") {
    const files = (spec as HFTokenizerSpec).files;
    if (!files || typeof files !== "object" || typeof files.tokenizer !== "object") {
      throw new Error(`${source}: a Hugging Face tokenizer spec needs files.tokenizer (the parsed tokenizer.json)`);
    }
    return HFTokenizer.fromFiles(files);
  }
  throw new Error(`${source}: tokenizer type ${JSON.stringify(type)} is not known; accepted: "byte", "hf"`);
}
