/**
 * Runs an exported policy (GET /api/models/<name>.onnx) with onnxruntime-web, off the page's thread: WebGPU when
 * the browser offers an adapter on a GPU, else WebAssembly (threaded for a wide model on a cross-origin-isolated page:
 * decoding-threads.ts); or the
 * backend the page asks for (backend-choice.ts). Generation is
 * incremental over the model's key/value cache (the prompt once, then one token per step) and each token goes to
 * the page as it is drawn, with its probability and the five most likely tokens at its position.
 *
 * Requests run one at a time, in order; `stop` is read between tokens, so it takes effect at the next one.
 */
import type * as Ort from "onnxruntime-web";
import { type GPTConfig, parseGPTConfig } from "@/lib/model/config";
import { Rng } from "@/lib/model/rng";
import { onnxNewKeyValueNames } from "@/lib/onnx/names";
import { decodeModel } from "@/lib/onnx/proto";
import { type AdapterLike, type BrowserBackend, chooseBackend, probeOfAdapter, type WebGpuProbe } from "./backend-choice";
import { decodingThreads } from "./decoding-threads";
import { KeptCacheEntry } from "./kept-cache";
import {
  type BackendInfo,
  CHIP_ALTERNATIVES,
  type GeneratedToken,
  type GenerationSummary,
  type ModelInfo,
  type SamplingSettings,
  type WorkerEvent,
  type WorkerRequest,
} from "./protocol";
import { drawToken } from "@/lib/model/sampling";
import { tokenAutomaton } from "@/lib/model/token-automaton";
import { ByteTokenizer, type Tokenizer } from "@/lib/model/tokenizer";
import { type TokenizerSpec, tokenizerFromSpec } from "@/lib/model/tokenizer-spec";
import { type ActionConstraint, automatonFor } from "@/lib/sdk/action-space";
import { softmax, topChoices } from "./sampling";

type GpuAdapterSource = { requestAdapter(): Promise<AdapterLike | null> };

const scope = self as unknown as {
  crossOriginIsolated: boolean;
  navigator: Navigator & { gpu?: GpuAdapterSource };
  postMessage(message: WorkerEvent): void;
  onmessage: ((event: MessageEvent<WorkerRequest>) => void) | null;
};

const post = (message: WorkerEvent) => scope.postMessage(message);

/** What the browser offers, probed once; the backend is the one the session was actually created on. */
interface Capabilities {
  /** the threads the runtime could start: one unless the page is cross-origin isolated */
  readonly threads: number;
  readonly crossOriginIsolated: boolean;
  /** the WebGPU adapter, in software or on a GPU, or why there is none */
  readonly webGpu: WebGpuProbe;
}

async function detectCapabilities(): Promise<Capabilities> {
  const crossOriginIsolated = scope.crossOriginIsolated;
  // Threads need SharedArrayBuffer, which only a cross-origin-isolated page has.
  const threads = crossOriginIsolated ? Math.min(4, scope.navigator.hardwareConcurrency || 1) : 1;
  let webGpu: WebGpuProbe;
  const gpu = scope.navigator.gpu;
  if (!gpu) webGpu = { kind: "none", reason: "this browser has no WebGPU" };
  else {
    try {
      const adapter = await gpu.requestAdapter();
      webGpu = adapter ? probeOfAdapter(adapter) : { kind: "none", reason: "no WebGPU adapter" };
    } catch (error) {
      webGpu = { kind: "none", reason: `no WebGPU adapter: ${error instanceof Error ? error.message : String(error)}` };
    }
  }
  return Object.freeze({ threads, crossOriginIsolated, webGpu });
}

function describeBackend(
  kind: BackendInfo["kind"],
  preference: BrowserBackend,
  why: string | null,
  capabilities: Capabilities,
  webGpuFailure: string | null,
  threadCount: number,
): BackendInfo {
  const base = { kind, preference, threads: threadCount, webGpu: capabilities.webGpu };
  if (kind === "webgpu") return { ...base, label: why ? `WebGPU (${why})` : "WebGPU" };
  const reasons = [capabilities.crossOriginIsolated ? null : "page not cross-origin isolated", webGpuFailure ?? why].filter((reason) => reason !== null);
  const threads = `${threadCount} thread${threadCount === 1 ? "" : "s"}`;
  return { ...base, label: `WASM, ${threads}${reasons.length > 0 ? ` (${reasons.join("; ")})` : ""}` };
}

type OrtRuntime = typeof Ort;

/**
 * onnxruntime-web in the build the backend needs. WebGPU runs on the default build's JSEP runtime (the `/webgpu`
 * build's native WebGPU provider was no faster here); its WebAssembly kernels run slower than the plain build's
 * (arithmetic-base, one thread, headless Chromium on 2 cores: 940 against 1,640 tokens/s), so WASM takes the plain
 * build. Only the build imported is downloaded.
 */
async function importRuntime(kind: BackendInfo["kind"]): Promise<OrtRuntime> {
  const ort = kind === "webgpu" ? await import("onnxruntime-web") : await import("onnxruntime-web/wasm");
  ort.env.wasm.wasmPaths = `/ort/${ort.env.versions.web}/`;
  return ort;
}

/**
 * Threads that wait for work sleep rather than spin: spinning threads took the cores the others needed
 * (text-world-base's graph of standard operators, 2 cores: two spinning threads 2,060 tokens/s, two sleeping threads
 * 2,570). A model narrow enough gets no pool at all (decoding-threads.ts).
 */
const sessionOptions = (threads: number): Ort.InferenceSession.SessionOptions =>
  threads > 1 ? { extra: { session: { intra_op: { allow_spinning: "0" } } } } : {};

/** A model with its session: the key/value cache's tensors are named past_key_values.{i}.key/value and present.{i}.key/value. */
interface Policy {
  ort: OrtRuntime;
  session: Ort.InferenceSession;
  config: GPTConfig;
  /** the model's own tokenizer: legal actions are held token by token in its vocabulary */
  tokenizer: Tokenizer;
  backend: BackendInfo;
  /** past_key_values.{i}.key, past_key_values.{i}.value for each layer, in that order */
  pastNames: string[];
  presentNames: string[];
  /**
   * On WASM, where the file has them (a GPT's: onnxNewKeyValueNames), new_key_values.{i}.* in pastNames' order: the
   * worker appends each step's new rows to its own cache (`kept`) and fetches only those, not present.*.
   * onnxruntime-web copies every fetched output out of its WebAssembly memory, and on a cross-origin-isolated page
   * that memory is shared, which makes the copy slow: fetching the whole cache every step took a third of a
   * generalist-base step. Under WebGPU present.* stays on the GPU instead.
   */
  newNames: string[] | null;
  /** the cache, with newNames: one entry per name of pastNames (kept-cache.ts) */
  kept: KeptCacheEntry[] | null;
}

let policy: Policy | null = null;

async function load(url: string, sharedStopSignal: Int32Array | null, preference: BrowserBackend): Promise<ModelInfo> {
  stopSignal = sharedStopSignal;
  const capabilities = await detectCapabilities();
  const chosen = chooseBackend(preference, capabilities.webGpu);
  const runtime = importRuntime(chosen.kind);
  const response = await fetch(url);
  if (!response.ok) {
    const body = await response.text();
    let message = body;
    try {
      message = (JSON.parse(body) as { error?: string }).error ?? body;
    } catch {}
    throw new Error(`GET ${url} answered ${response.status}: ${message || response.statusText}`);
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  const metadata = new Map(decodeModel(bytes).metadataProps?.map((prop) => [prop.key, prop.value]));
  const configText = metadata.get("tinkerlab.config");
  if (!configText) throw new Error(`${url} has no 'tinkerlab.config' in its metadata; export it again with this version of Tinkerlab`);
  const config = parseGPTConfig(JSON.parse(configText));
  const { tokenizer, spec } = readTokenizer(url, metadata.get("tinkerlab.tokenizer"));
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new Error(`${url}: its tokenizer has ${tokenizer.vocabSize} ids but the model embeds only ${config.vocabSize}; they are not one model's`);
  }
  const layers = Array.from({ length: config.nLayers }, (_, i) => i);
  const pastNames = layers.flatMap((i) => [`past_key_values.${i}.key`, `past_key_values.${i}.value`]);
  const presentNames = layers.flatMap((i) => [`present.${i}.key`, `present.${i}.value`]);

  const ort = await runtime;
  // read when the first inference session starts the runtime, which happens below
  const threads = decodingThreads(config, capabilities.threads);
  ort.env.wasm.numThreads = threads;
  const options = sessionOptions(threads);
  let session: Ort.InferenceSession | null = null;
  let kind: BackendInfo["kind"] = "wasm";
  let webGpuFailure: string | null = null;
  if (chosen.kind === "webgpu") {
    try {
      // The cache stays on the GPU from step to step; only the logits come back.
      session = await ort.InferenceSession.create(bytes, {
        ...options,
        executionProviders: ["webgpu"],
        preferredOutputLocation: { logits: "cpu", ...Object.fromEntries(presentNames.map((name) => [name, "gpu-buffer"])) },
      });
      kind = "webgpu";
    } catch (error) {
      // The JSEP build runs WebAssembly too, if more slowly than the plain build.
      webGpuFailure = `WebGPU failed: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  session ??= await ort.InferenceSession.create(bytes, { ...options, executionProviders: ["wasm"] });
  for (const name of ["input_ids", ...pastNames]) {
    if (!session.inputNames.includes(name)) throw new Error(`${url} has no input '${name}'; its inputs are ${session.inputNames.join(", ")}`);
  }
  const backend = describeBackend(kind, preference, chosen.why, capabilities, webGpuFailure, threads);
  const newNames = onnxNewKeyValueNames(config);
  const keepsCache = kind === "wasm" && newNames.every((name) => session.outputNames.includes(name));
  const hd = config.dModel / config.nHeads;
  const kept = keepsCache ? pastNames.map(() => new KeptCacheEntry(config.nHeads, hd, config.contextLength)) : null;
  policy = { ort, session, config, tokenizer, backend, pastNames, presentNames, newNames: keepsCache ? newNames : null, kept };
  return { backend, config, tokenizer: spec, bytes: bytes.length };
}

/** The file's tokenizer; files exported before tokenizers were recorded are byte-tokenizer bases. */
function readTokenizer(url: string, text: string | undefined): { tokenizer: Tokenizer; spec: TokenizerSpec } {
  if (text === undefined) {
    const tokenizer = new ByteTokenizer();
    return { tokenizer, spec: tokenizer.toJSON() };
  }
  let spec: TokenizerSpec;
  try {
    spec = JSON.parse(text) as TokenizerSpec;
  } catch (error) {
    throw new Error(`${url}: its 'tinkerlab.tokenizer' metadata is not JSON (${message(error)}); export it again`);
  }
  return { tokenizer: tokenizerFromSpec(spec, `${url} (tinkerlab.tokenizer)`), spec };
}

/** An empty cache: [1, nHeads, 0, headDim] per key and value of each layer (with `kept`, emptied and viewed). */
function emptyCache(model: Policy): Ort.Tensor[] {
  for (const entry of model.kept ?? []) entry.reset();
  if (model.kept) return keptTensors(model, model.kept);
  const dims = [1, model.config.nHeads, 0, model.config.dModel / model.config.nHeads];
  return model.pastNames.map(() => new model.ort.Tensor("float32", new Float32Array(0), dims));
}

/** The kept cache's entries as tensors over their buffers, for the next step's past_key_values.*. */
const keptTensors = ({ ort }: Policy, kept: KeptCacheEntry[]) =>
  kept.map((entry) => new ort.Tensor("float32", entry.data, [1, entry.nHeads, entry.length, entry.headDim]));

/** Appends `tokens` to the cache; returns the logits after the last of them and the grown cache. */
async function forward(model: Policy, tokens: readonly number[], cache: Ort.Tensor[]): Promise<{ logits: Float32Array; cache: Ort.Tensor[] }> {
  const feeds: Record<string, Ort.Tensor> = {
    input_ids: new model.ort.Tensor(
      "int64",
      BigInt64Array.from(tokens, (t) => BigInt(t)),
      [1, tokens.length],
    ),
  };
  model.pastNames.forEach((name, i) => (feeds[name] = cache[i]!));
  const { newNames, kept } = model;
  const out = await model.session.run(feeds, ["logits", ...(newNames ?? model.presentNames)]);
  const V = model.config.vocabSize;
  const all = out.logits!.data as Float32Array; // [1, T, V]
  let next: Ort.Tensor[];
  if (newNames && kept) {
    // the cache fed this step was copied into onnxruntime's memory when the step began: its buffers are free again
    kept.forEach((entry, i) => entry.append(out[newNames[i]!]!.data as Float32Array, tokens.length));
    next = keptTensors(model, kept);
  } else next = model.presentNames.map((name) => out[name]!);
  return { logits: all.slice((tokens.length - 1) * V, tokens.length * V), cache: next };
}

function release(cache: Ort.Tensor[]) {
  for (const tensor of cache) if (tensor.location === "gpu-buffer") tensor.dispose();
}

/** A task boundary, so that a `stop` posted meanwhile is read (a resolved promise alone would not let it in). */
const taskBoundary = new MessageChannel();
const waitingForBoundary: (() => void)[] = [];
taskBoundary.port1.onmessage = () => waitingForBoundary.shift()?.();
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    waitingForBoundary.push(resolve);
    taskBoundary.port2.postMessage(null);
  });
}

/** Generations the page asked to stop, by `stop` message (which needs a task boundary to arrive). */
const stopRequests = new Set<number>();
/** Shared with the page when it is cross-origin isolated: the id of the generation to stop, read without yielding. */
let stopSignal: Int32Array | null = null;

async function stopRequested(id: number): Promise<boolean> {
  if (stopSignal) return Atomics.load(stopSignal, 0) === id;
  await nextTask();
  return stopRequests.has(id);
}

async function generate(id: number, prompt: number[], settings: SamplingSettings, constraint: ActionConstraint | null): Promise<GenerationSummary> {
  const model = requirePolicy();
  const { contextLength, vocabSize } = model.config;
  if (prompt.length === 0) throw new Error("the prompt is empty; start it with at least one token (e.g. <|bos|>)");
  if (prompt.length > contextLength) throw new Error(`the prompt has ${prompt.length} tokens, over the model's contextLength=${contextLength}`);
  const start = performance.now();
  const rng = new Rng(settings.seed ?? Math.floor(Math.random() * 2 ** 32));
  const stop = new Set(settings.stop);
  const probs = new Float64Array(vocabSize);
  const weights = new Float64Array(vocabSize);
  // Under legal actions, as the server's sampler: every token but those that continue a legal action (and the end of
  // the turn once an action is complete) is masked out, and the turn ends at the tokenizer's end of turn.
  const automaton = constraint ? constrainedTokens(model.tokenizer, constraint) : null;
  const endOfTurn = model.tokenizer.stopTokens[0]!;
  let automatonState = automaton?.start ?? 0;
  const masked = automaton ? new Float32Array(vocabSize) : null;
  const tokens: number[] = [];
  let firstTokenAt = start;
  let finishReason: GenerationSummary["finishReason"] = "length";
  let cache = emptyCache(model);
  let cached = 0;
  let input: readonly number[] = prompt;
  try {
    for (;;) {
      const step = await forward(model, input, cache);
      release(cache);
      cache = step.cache;
      cached += input.length;
      let logits = step.logits;
      if (automaton && masked) {
        masked.fill(-Infinity);
        for (const allowed of automaton.tokens(automatonState)) masked[allowed] = logits[allowed]!;
        if (automaton.accepting(automatonState)) masked[endOfTurn] = logits[endOfTurn]!;
        logits = masked;
      }
      const token = drawToken(logits, 0, vocabSize, settings, rng, weights);
      // Probabilities are those of the temperature sampled at, or of temperature 1 when greedy, as the server's logprobs.
      softmax(logits, settings.temperature === 0 ? 1 : settings.temperature, probs);
      tokens.push(token);
      if (tokens.length === 1) firstTokenAt = performance.now();
      const generated: GeneratedToken = { token, probability: probs[token]!, alternatives: topChoices(probs, CHIP_ALTERNATIVES) };
      post({ type: "token", id, token: generated });
      if (automaton ? token === endOfTurn : stop.has(token)) {
        finishReason = "stop";
        break;
      }
      if (automaton) automatonState = automaton.next(automatonState, token);
      if (tokens.length >= settings.maxTokens || cached >= contextLength) break;
      if (await stopRequested(id)) {
        finishReason = "stopped";
        break;
      }
      input = [token];
    }
  } finally {
    release(cache);
    stopRequests.delete(id);
  }
  const seconds = (performance.now() - start) / 1000;
  return { tokens, finishReason, firstTokenMs: firstTokenAt - start, tokensPerSecond: tokens.length / seconds };
}

/** The constraint's automaton over the tokenizer's tokens, with its start state. */
function constrainedTokens(tokenizer: Tokenizer, constraint: ActionConstraint) {
  const automaton = automatonFor(constraint);
  return { start: automaton.start, ...tokenAutomaton(automaton, tokenizer) };
}

async function lastLogits(tokens: number[]): Promise<Float32Array> {
  const model = requirePolicy();
  if (tokens.length === 0 || tokens.length > model.config.contextLength) {
    throw new Error(`give 1 to ${model.config.contextLength} tokens (the model's contextLength); got ${tokens.length}`);
  }
  const step = await forward(model, tokens, emptyCache(model));
  release(step.cache);
  return step.logits;
}

function requirePolicy(): Policy {
  if (!policy) throw new Error("no model is loaded in this worker yet");
  return policy;
}

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));
let queue: Promise<void> = Promise.resolve();

scope.onmessage = ({ data: request }) => {
  if (request.type === "stop") {
    stopRequests.add(request.id);
    return;
  }
  queue = queue.then(async () => {
    if (request.type === "load") {
      try {
        post({ type: "loaded", model: await load(request.url, request.stopSignal, request.backend ?? "auto") });
      } catch (error) {
        post({ type: "load-failed", message: message(error) });
      }
    } else if (request.type === "generate") {
      try {
        post({ type: "done", id: request.id, summary: await generate(request.id, request.prompt, request.settings, request.constraint ?? null) });
      } catch (error) {
        post({ type: "failed", id: request.id, message: message(error) });
      }
    } else if (request.type === "logits") {
      try {
        post({ type: "logits", id: request.id, logits: await lastLogits(request.tokens) });
      } catch (error) {
        post({ type: "failed", id: request.id, message: message(error) });
      }
    }
  });
};
