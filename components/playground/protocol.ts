/** The messages between the playground page and its inference worker (inference.worker.ts). */
import type { GPTConfig } from "@/lib/model/config";
import type { BrowserBackend, WebGpuProbe } from "./backend-choice";
import type { TokenizerSpec } from "@/lib/model/tokenizer-spec";
import type { ActionConstraint } from "@/lib/sdk/action-space";

/** How to draw each token, as the server's sampler reads them (server/runtime/sampler.ts). */
export interface SamplingSettings {
  /** most new tokens */
  maxTokens: number;
  /** softmax temperature; 0 picks the most likely token */
  temperature: number;
  /** sample from the K most likely tokens (0 = all) */
  topK: number;
  /** sample from the smallest set of tokens whose probability reaches topP */
  topP: number;
  /** token ids that end the generation (kept in it) */
  stop: number[];
  /** seed of the draws; without it, a fresh one each generation */
  seed?: number;
}

/** Where the model runs, chosen once per worker from what the browser offers and the page's preference. */
export interface BackendInfo {
  kind: "webgpu" | "wasm";
  /** what the page asked for */
  preference: BrowserBackend;
  /** the WebGPU adapter the browser offers (a GPU's or a software one), or why there is none */
  webGpu: WebGpuProbe;
  /** WebAssembly threads (WebGPU runs its CPU-side operators on them too) */
  threads: number;
  /**
   * what the page shows: "WebGPU", "WASM, 4 threads", "WASM, 1 thread (page not cross-origin isolated)",
   * "WASM, 2 threads (WebGPU's only adapter runs in software (google swiftshader), slower than WASM)"
   */
  label: string;
}

export interface TokenChoice {
  token: number;
  /** probability under softmax(logits / temperature) before top-k and top-p (temperature 1 when greedy) */
  probability: number;
}

/** How many of the most likely tokens a chip shows as the alternatives at its position. */
export const CHIP_ALTERNATIVES = 5;

/** One generated token with the CHIP_ALTERNATIVES most likely tokens at its position (itself among them when it is). */
export interface GeneratedToken extends TokenChoice {
  alternatives: TokenChoice[];
}

export interface GenerationSummary {
  tokens: number[];
  finishReason: "stop" | "length" | "stopped";
  /** from the request reaching the worker to the first token drawn (the prompt's forward pass included) */
  firstTokenMs: number;
  /** new tokens over the whole generation's time, the prompt's forward pass included */
  tokensPerSecond: number;
}

/** What the worker reports of the model it loaded. */
export interface ModelInfo {
  backend: BackendInfo;
  config: GPTConfig;
  /** the file's `tinkerlab.tokenizer`: the byte tokenizer's spec, or an imported model's Hugging Face files */
  tokenizer: TokenizerSpec;
  /** size of the .onnx file */
  bytes: number;
}

export interface LoadedModel extends ModelInfo {
  /** from starting the worker to a session ready to run: the runtime, the download and the session's creation */
  loadMs: number;
}

export type WorkerRequest =
  /** `stopSignal`: an Int32Array on shared memory (cross-origin-isolated pages only) where the page writes the id of a generation to stop */
  | { type: "load"; url: string; stopSignal: Int32Array | null; backend?: BrowserBackend }
  /** `constraint`: the turn's legal actions, which the tokens drawn are held to as the server's sampler holds them */
  | { type: "generate"; id: number; prompt: number[]; settings: SamplingSettings; constraint?: ActionConstraint | null }
  | { type: "stop"; id: number }
  | { type: "logits"; id: number; tokens: number[] };

export type WorkerEvent =
  | { type: "loaded"; model: ModelInfo }
  | { type: "load-failed"; message: string }
  | { type: "token"; id: number; token: GeneratedToken }
  | { type: "done"; id: number; summary: GenerationSummary }
  | { type: "logits"; id: number; logits: Float32Array }
  | { type: "failed"; id: number; message: string };
