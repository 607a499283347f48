/**
 * What a Hugging Face model folder holds for an import, in one place for every side that reads one: the server's
 * upload route, the CLI's `bases push` and the Models page's folder picker.
 */

/** The files an import reads; any other file of the folder (README, onnx/, original/) is not sent. */
export const modelFileRule =
  /^(config\.json|generation_config\.json|tokenizer\.json|tokenizer_config\.json|special_tokens_map\.json|chat_template\.jinja|model\.safetensors|model\.safetensors\.index\.json|model-\d{5}-of-\d{5}\.safetensors)$/;

export const MODEL_FILES_ACCEPTED =
  "config.json, model.safetensors (or model.safetensors.index.json and its model-0000k-of-0000n.safetensors shards), tokenizer.json, tokenizer_config.json, generation_config.json, special_tokens_map.json, chat_template.jinja";

/** A base's name from its folder's: lower-cased, other characters as '-' ("SmolLM2-135M-Instruct" → "smollm2-135m-instruct"). */
export function baseNameFromFolder(folder: string): string {
  return folder
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 64);
}
