/**
 * How many WebAssembly threads the playground's runtime gets for a model. A narrow model decodes a token in kernels
 * far too small to split, and onnxruntime still hands some of them (each layer's MultiHeadAttention, a product at
 * MLAS's threshold) to its pool: waking a pool thread costs more than the kernel saves. On generalist-base (dModel
 * 128) in headless Chromium on 2 cores, one thread decoded about 2.5x as many tokens a second as two sleeping ones
 * (docs/BROWSER.md). A wide model's products are worth the threads, its prompt's even more.
 */
import type { GPTConfig } from "@/lib/model/config";

/** The widest model that decodes on one thread: every shipped base (dModel 64 to 128) is narrower. */
export const SERIAL_DECODING_MAX_WIDTH = 256;

/** The threads for `config`'s model where `available` threads could run (1 on a page that is not cross-origin isolated). */
export function decodingThreads(config: Pick<GPTConfig, "dModel">, available: number): number {
  return config.dModel <= SERIAL_DECODING_MAX_WIDTH ? 1 : Math.max(1, available);
}
