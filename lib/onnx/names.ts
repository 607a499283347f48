/**
 * The names of an exported model's inputs and outputs (lib/onnx/export.ts), apart from the exporter so that the
 * playground's worker reads them without bundling it.
 */
import type { GPTConfig } from "@/lib/model/config";

/** The names of the graph's inputs, in order. */
export function onnxInputNames(config: Pick<GPTConfig, "nLayers">): string[] {
  const names = ["input_ids"];
  for (let i = 0; i < config.nLayers; i++) names.push(`past_key_values.${i}.key`, `past_key_values.${i}.value`);
  return names;
}

/**
 * The GPT graph's outputs after present.*: each layer's new keys and values alone, [batch, seq, nHeads·headDim]
 * (head h in columns h·headDim …), the rows that present.{i}.* appends to past_key_values.{i}.*. A caller that keeps
 * the cache itself fetches these instead of present.*: onnxruntime-web copies every fetched output out of its
 * WebAssembly memory, and the whole cache on every step took a third of a generalist-base step in Chromium
 * (components/playground/inference.worker.ts).
 */
export function onnxNewKeyValueNames(config: Pick<GPTConfig, "nLayers">): string[] {
  const names: string[] = [];
  for (let i = 0; i < config.nLayers; i++) names.push(`new_key_values.${i}.key`, `new_key_values.${i}.value`);
  return names;
}

/** The names of the graph's outputs, in order: logits, present.*, and a GPT's onnxNewKeyValueNames. */
export function onnxOutputNames(config: Pick<GPTConfig, "nLayers" | "architecture">): string[] {
  const names = ["logits"];
  for (let i = 0; i < config.nLayers; i++) names.push(`present.${i}.key`, `present.${i}.value`);
  return config.architecture === "llama" ? names : [...names, ...onnxNewKeyValueNames(config)];
}
