/**
 * A policy running in this browser: one inference worker holding one model. The page talks to it through this
 * class only; switching models ends the worker (which frees its WebAssembly memory and GPU buffers) and starts
 * another.
 */
import type { Tokenizer } from "@/lib/model/tokenizer";
import { tokenizerFromSpec } from "@/lib/model/tokenizer-spec";
import type { ActionConstraint } from "@/lib/sdk/action-space";
import type { BrowserBackend } from "./backend-choice";
import type { GeneratedToken, GenerationSummary, LoadedModel, ModelInfo, SamplingSettings, WorkerEvent, WorkerRequest } from "./protocol";

/** Where the app serves a base's or checkpoint's ONNX export. */
const modelUrl = (name: string) => `/api/models/${encodeURIComponent(name)}.onnx`;

const tokenizers = new WeakMap<ModelInfo, Tokenizer>();

/**
 * The loaded model's tokenizer, built from the spec its file carries, once per model (an imported model's
 * vocabulary takes a while to build): the page, the episode player and the window hook share it.
 */
export function modelTokenizer(model: ModelInfo): Tokenizer {
  let tokenizer = tokenizers.get(model);
  if (!tokenizer) {
    tokenizer = tokenizerFromSpec(model.tokenizer, "the model's tokenizer");
    tokenizers.set(model, tokenizer);
  }
  return tokenizer;
}

export interface Generation {
  done: Promise<GenerationSummary>;
  /** ends the generation after the token being computed */
  stop(): void;
}

type Waiting<T> = { resolve(value: T): void; reject(error: Error): void };

export class BrowserPolicy {
  /** the loaded model, or the reason it could not be loaded */
  readonly ready: Promise<LoadedModel>;
  private readonly worker: Worker;
  private readonly generations = new Map<number, Waiting<GenerationSummary> & { onToken(token: GeneratedToken): void }>();
  private readonly forwards = new Map<number, Waiting<Float32Array>>();
  private nextId = 1;
  /** where stop() writes, read by the worker between tokens without waiting for a message (see the worker) */
  private readonly stopSignal = window.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;

  constructor(
    readonly modelName: string,
    readonly backend: BrowserBackend = "auto",
  ) {
    const started = performance.now();
    this.worker = new Worker(new URL("./inference.worker.ts", import.meta.url), { type: "module" });
    this.ready = new Promise<LoadedModel>((resolve, reject) => {
      this.worker.onmessage = ({ data }: MessageEvent<WorkerEvent>) => {
        if (data.type === "loaded") resolve({ ...data.model, loadMs: performance.now() - started });
        else if (data.type === "load-failed") reject(new Error(data.message));
        else this.receive(data);
      };
      this.worker.onerror = (event) => {
        const error = new Error(`the inference worker failed: ${event.message || "it could not be started"}`);
        reject(error);
        this.failAll(error);
      };
    });
    this.ready.catch(() => {}); // a caller that never awaits it must not see an unhandled rejection
    this.send({ type: "load", url: modelUrl(modelName), stopSignal: this.stopSignal, backend });
  }

  /** Generates from `prompt`; under a `constraint` (a turn's legal actions) only a legal action, then the end of the turn. */
  generate(prompt: number[], settings: SamplingSettings, onToken: (token: GeneratedToken) => void, constraint: ActionConstraint | null = null): Generation {
    const id = this.nextId++;
    const done = new Promise<GenerationSummary>((resolve, reject) => this.generations.set(id, { resolve, reject, onToken }));
    this.send({ type: "generate", id, prompt, settings, constraint });
    const stop = () => (this.stopSignal ? Atomics.store(this.stopSignal, 0, id) : this.send({ type: "stop", id }));
    return { done, stop };
  }

  /** The logits after the last of `tokens`, from one forward pass over all of them. */
  logits(tokens: number[]): Promise<Float32Array> {
    const id = this.nextId++;
    const result = new Promise<Float32Array>((resolve, reject) => this.forwards.set(id, { resolve, reject }));
    this.send({ type: "logits", id, tokens });
    return result;
  }

  dispose() {
    this.worker.terminate();
    this.failAll(new Error(`the model '${this.modelName}' was closed`));
  }

  private send(request: WorkerRequest) {
    this.worker.postMessage(request);
  }

  private receive(event: Exclude<WorkerEvent, { type: "loaded" | "load-failed" }>) {
    if (event.type === "token") return this.generations.get(event.id)?.onToken(event.token);
    if (event.type === "done") this.generations.get(event.id)?.resolve(event.summary);
    else if (event.type === "logits") this.forwards.get(event.id)?.resolve(event.logits);
    else (this.generations.get(event.id) ?? this.forwards.get(event.id))?.reject(new Error(event.message));
    this.generations.delete(event.id);
    this.forwards.delete(event.id);
  }

  private failAll(error: Error) {
    for (const waiting of [...this.generations.values(), ...this.forwards.values()]) waiting.reject(error);
    this.generations.clear();
    this.forwards.clear();
  }
}

/** What end-to-end tests and `npm run bench:browser` drive: the page's current model, without the form. */
interface PlaygroundHook {
  ready: Promise<{ backend: string }>;
  logits(ids: number[]): Promise<number[]>;
  generate(
    ids: number[],
    /** `stop`: default the model's stop tokens (its chat template's end of turn first) */
    options: { maxTokens: number; temperature: 0; stop?: number[] },
  ): Promise<{ tokens: number[]; firstTokenMs: number; tokensPerSecond: number }>;
}

declare global {
  interface Window {
    __tinkerlabPlayground?: PlaygroundHook;
  }
}

/** Puts `policy` on window.__tinkerlabPlayground; returns the function that takes it off. */
export function exposePolicy(policy: BrowserPolicy): () => void {
  const hook: PlaygroundHook = {
    ready: policy.ready.then((model) => ({ backend: model.backend.label })),
    logits: async (ids) => Array.from(await policy.logits(ids)),
    generate: async (ids, options) => {
      const stop = options.stop ?? [...modelTokenizer(await policy.ready).stopTokens];
      const settings = { maxTokens: options.maxTokens, temperature: 0, topK: 0, topP: 1, stop };
      const { tokens, firstTokenMs, tokensPerSecond } = await policy.generate(ids, settings, () => {}).done;
      return { tokens, firstTokenMs, tokensPerSecond };
    },
  };
  window.__tinkerlabPlayground = hook;
  return () => {
    if (window.__tinkerlabPlayground === hook) delete window.__tinkerlabPlayground;
  };
}
