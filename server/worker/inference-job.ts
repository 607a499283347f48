/**
 * An inference job: this worker serves one base, and any LoRA adapters on it, to the web server's
 * OpenAI-compatible endpoints (server/serving). Requests come and go while it decodes (continuous batching): each
 * model (the base, each adapter) has a decoder whose rows are the choices being written; a request that arrives is
 * prefilled into free rows and joins the next decoding step, and a choice that ends, or whose client went away,
 * frees its row at the step it is seen. Every model decodes its rows in the same step, so requests for two
 * adapters of the base advance together.
 *
 * Requests and tokens travel in exchanges with the web server (server/serving/protocol.ts): one in flight at a
 * time, carrying every token delta made since the last, answered with the requests that came meanwhile. Decoding
 * never waits for an exchange while it has rows; an idle job long-polls. After `idleSeconds` without a request
 * the job ends paused, freeing its place; the next request for its models queues it again.
 */
import { DECODER_CACHE_BYTES } from "@/lib/model/budgets";
import { describeMismatch, parseLoraConfig } from "@/lib/model/config";
import type { Decoder, ModelView } from "@/lib/model/engine";
import { initLoraAdapter, listLoraParameters } from "@/lib/model/lora";
import { Rng } from "@/lib/model/rng";
import { drawToken } from "@/lib/model/sampling";
import { type TokenAutomaton, tokenAutomaton } from "@/lib/model/token-automaton";
import { assignParameters } from "@/lib/model/weights";
import { automatonFor } from "@/lib/sdk/action-space";
import { serverEnv } from "../env";
import type { ReportInput } from "../jobs";
import { type BaseModel, readCheckpoint } from "../runtime";
import {
  type ChoiceDelta,
  type ExchangeAnswer,
  EXCHANGE_EVENT_BYTES,
  type ExchangeInput,
  MAX_EXCHANGE_WAIT_MS,
  SERVING_EXCHANGE_PATH,
  type ServeEvent,
  type ServePrompt,
  type ServeRequest,
  type ServedToken,
  type ServingHello,
} from "../serving/protocol";
import { WORKER_TOKEN_HEADER } from "../worker-protocol";
import { loadBaseModel } from "./base-models";
import type { JobOptions, JobOutcome } from "./job";

/** Most rows one model decodes at once (its cache is also held to DECODER_CACHE_BYTES). */
const MAX_ROWS_PER_MODEL = 64;
/** Adapters kept loaded; the least recently used beyond this are dropped. */
const MAX_ADAPTERS = 32;
/** How often a busy job says in its run's log what it served. */
const TRAFFIC_LOG_MS = 60_000;
/** A model's decoder with no row for this long is given back. */
const LANE_IDLE_MS = 60_000;
const DEFAULT_IDLE_SECONDS = 300;

type Finish = "stop" | "length";

/** One request being served: its settings, generator, and its choices' progress. */
type Active = {
  request: ServeRequest;
  lane: Lane;
  rng: Rng;
  choices: Choice[];
  /** The request's client went away: its rows are freed at the next step. */
  cancelled: boolean;
};

type Choice = {
  index: number;
  /** The row it decodes in, or -1 once it has ended. */
  row: number;
  tokens: number[];
  /** Text already sent. */
  sent: string;
  automaton: TokenAutomaton | null;
  state: number;
  limit: number;
  finish: Finish | null;
  /** This step's news, sent with the next exchange. */
  delta: ChoiceDelta | null;
};

/** One model's decoder: rows 1..capacity are choices' rows; row 0 stays empty, and copying it empties a row. */
type Lane = { key: string; view: ModelView; decoder: Decoder; free: number[]; logits: Float32Array; rows: number; usedAt: number };

export async function runInferenceJob(options: JobOptions): Promise<JobOutcome> {
  const { channel, workerId, spec } = options;
  const jobId = spec.job.id;
  const config = spec.run.config;
  const env = serverEnv();
  if (!env.TINKERLAB_SERVER_URL || !env.TINKERLAB_WORKER_TOKEN) {
    return {
      outcome: "failed",
      reason:
        "an inference job answers the server's /v1 endpoints through the web server: its worker needs TINKERLAB_SERVER_URL and TINKERLAB_WORKER_TOKEN (a worker joined with DATABASE_URL alone cannot serve)",
    };
  }
  const serverUrl = env.TINKERLAB_SERVER_URL.replace(/\/$/, "");
  const token = env.TINKERLAB_WORKER_TOKEN;
  const idleMs = (config.session?.leaseSeconds ?? DEFAULT_IDLE_SECONDS) * 1000;
  const log = (level: "info" | "warn" | "error", message: string) =>
    channel.report({ workerId, jobId, logs: [{ level, message }] } satisfies ReportInput).catch(() => {});

  const base = loadBaseModel(spec.base ?? config.agent.base);
  const engine = new ServingEngine(base);
  const hello: ServingHello = {
    runId: spec.run.id,
    projectId: spec.run.projectId,
    base: config.agent.base,
    contextLength: base.config.contextLength,
    rowsPerModel: engine.rowsPerModel,
  };
  void log(
    "info",
    `Serving ${config.agent.base} (context ${hello.contextLength}, ${hello.rowsPerModel} rows per model); ends after ${idleMs / 1000} s without a request.`,
  );

  const exchange = async (events: ServeEvent[], waitMs: number, closing = false): Promise<ExchangeAnswer> => {
    const body: ExchangeInput = { workerId, jobId, hello, events, waitMs, closing, load: engine.load() };
    const response = await fetch(`${serverUrl}${SERVING_EXCHANGE_PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", [WORKER_TOKEN_HEADER]: token },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(waitMs + 30_000),
    });
    if (!response.ok) throw new Error(`the server answered the exchange with ${response.status}: ${(await response.text()).slice(0, 500)}`);
    return (await response.json()) as ExchangeAnswer;
  };

  /** The last moment a request came or a row was decoding: the idle time counts from it. */
  let lastBusyAt = Date.now();
  type Flight = { done: boolean; answer: ExchangeAnswer | null; failure: unknown; promise: Promise<void> };
  let inFlight = null as Flight | null;
  let failures = 0;
  const send = (waitMs: number) => {
    const flight: Flight = { done: false, answer: null, failure: null, promise: Promise.resolve() };
    const events = engine.takeEvents();
    flight.promise = exchange(events, waitMs).then(
      (answer) => {
        flight.answer = answer;
        flight.done = true;
      },
      (failure: unknown) => {
        flight.failure = failure;
        flight.done = true;
      },
    );
    inFlight = flight;
  };
  /** Takes a finished exchange's answer: its requests wait for rows, its cancellations end their choices. */
  const settle = async () => {
    const flight = inFlight!;
    inFlight = null;
    if (flight.failure) {
      failures++;
      if (failures === 1 || failures % 30 === 0) void log("warn", `Exchange with the server failed (${(flight.failure as Error).message}); trying again.`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * failures)));
      return;
    }
    failures = 0;
    const answer = flight.answer!;
    if (answer.requests.length > 0) lastBusyAt = Date.now();
    for (const request of answer.requests) engine.enqueue(request);
    for (const id of answer.cancelled) engine.cancel(id);
  };

  const end = async (outcome: JobOutcome, why: string): Promise<JobOutcome> => {
    if (inFlight) await inFlight.promise;
    engine.abandonAll(why);
    // The last events, then the closing exchange: the hub stops sending this job requests.
    while (engine.hasEvents()) await exchange(engine.takeEvents(), 0).catch(() => {});
    await exchange([], 0, true).catch(() => {});
    engine.dispose();
    // Stored before the job finishes: a report of a finished job is refused.
    await logTraffic();
    await log("info", `Serving ended: ${outcome.reason ?? outcome.outcome}.`);
    return outcome;
  };

  let trafficSince = Date.now();
  /** What the job served since the last such line, in its run's log (its page shows it). */
  const logTraffic = async () => {
    const { requests, tokens } = engine.takeTraffic();
    const seconds = Math.max(1, (Date.now() - trafficSince) / 1000);
    trafficSince = Date.now();
    if (requests > 0 || tokens > 0) {
      await log(
        "info",
        `Served ${requests} request${requests === 1 ? "" : "s"} and ${tokens} tokens in ${Math.round(seconds)} s (${Math.round(tokens / seconds)} tokens/s).`,
      );
    }
  };

  for (;;) {
    if (Date.now() - trafficSince >= TRAFFIC_LOG_MS) void logTraffic();
    const stop = options.stopRequested();
    if (stop === "cancel") return end({ outcome: "cancelled", reason: null }, "its serving job was cancelled");
    if (stop) return end({ outcome: stop === "pause" ? "paused" : "preempted", reason: null }, "its serving job was stopped; retry");
    if (inFlight?.done) await settle();
    const busy = engine.busy();
    if (!busy) {
      if (!inFlight && engine.hasEvents()) send(0);
      if (!inFlight) {
        const quiet = Date.now() - lastBusyAt;
        if (quiet >= idleMs) return end({ outcome: "paused", reason: `idle for ${Math.round(quiet / 1000)} s; the next request starts it again` }, "");
        send(Math.min(MAX_EXCHANGE_WAIT_MS, idleMs - quiet));
      }
      await inFlight!.promise;
      continue;
    }
    lastBusyAt = Date.now();
    if (!inFlight) send(0);
    await engine.step();
    // A turn of the event loop: the exchange's response is read, and stop requests arrive.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** The decoding of every request the job holds, step by step. */
class ServingEngine {
  readonly rowsPerModel: number;
  private readonly lanes = new Map<string, Lane>();
  private readonly adapters = new Map<string, ModelView>();
  private readonly waiting: ServeRequest[] = [];
  private readonly active: Active[] = [];
  private events: ServeEvent[] = [];
  private cancelledCount = 0;
  private traffic = { requests: 0, tokens: 0 };
  private readonly V: number;
  private readonly probs: Float64Array;
  private readonly masked: Float32Array;

  constructor(private readonly base: BaseModel) {
    const { config } = base;
    this.V = config.vocabSize;
    this.probs = new Float64Array(this.V);
    this.masked = new Float32Array(this.V);
    // Keys and values of every layer, each position a row of dModel floats, for a whole context per row.
    const rowBytes = 2 * config.nLayers * config.dModel * 4 * config.contextLength;
    this.rowsPerModel = Math.max(1, Math.min(MAX_ROWS_PER_MODEL, Math.floor(DECODER_CACHE_BYTES / rowBytes) - 1));
  }

  load(): ExchangeInput["load"] {
    let rows = 0;
    for (const lane of this.lanes.values()) rows += lane.rows - lane.free.length;
    return { rows, waiting: this.waiting.length, adapters: [...this.adapters.keys()], cancelled: this.cancelledCount };
  }

  /** Requests started and tokens written since the last call. */
  takeTraffic(): { requests: number; tokens: number } {
    const traffic = this.traffic;
    this.traffic = { requests: 0, tokens: 0 };
    return traffic;
  }

  busy(): boolean {
    return this.active.length > 0 || this.waiting.length > 0;
  }

  hasEvents(): boolean {
    return this.events.length > 0;
  }

  /** The events made since the last exchange, oldest first, up to EXCHANGE_EVENT_BYTES (at least one); the rest wait. */
  takeEvents(): ServeEvent[] {
    let bytes = 0;
    let count = 0;
    while (count < this.events.length) {
      bytes += JSON.stringify(this.events[count]).length;
      if (count > 0 && bytes > EXCHANGE_EVENT_BYTES) break;
      count++;
    }
    return this.events.splice(0, count);
  }

  enqueue(request: ServeRequest): void {
    this.waiting.push(request);
  }

  cancel(id: string): void {
    const at = this.waiting.findIndex((request) => request.id === id);
    if (at >= 0) this.waiting.splice(at, 1);
    for (const active of this.active) if (active.request.id === id) active.cancelled = true;
  }

  /** Ends every request with an error (the job is ending). */
  abandonAll(why: string): void {
    for (const request of this.waiting.splice(0)) this.fail(request.id, 503, `the model's server stopped before answering: ${why}`, null, "server_stopped");
    for (const active of this.active.splice(0)) {
      for (const choice of active.choices) this.freeRow(active.lane, choice);
      this.fail(active.request.id, 503, `the model's server stopped before the answer was complete: ${why}`, null, "server_stopped");
    }
  }

  dispose(): void {
    for (const lane of this.lanes.values()) lane.decoder.dispose();
    this.lanes.clear();
  }

  private fail(id: string, status: number, message: string, param: string | null, code: string | null): void {
    this.events.push({ id, type: "error", status, message, param, code });
  }

  /** One decoding step: waiting requests that fit are prefilled, every row draws a token, rows that go on advance. */
  async step(): Promise<void> {
    this.dropCancelled();
    this.admit();
    const going = new Map<Lane, number[]>();
    for (const active of this.active) {
      const params = { temperature: active.request.temperature, topP: active.request.topP, topK: 0 };
      for (const choice of active.choices) {
        if (choice.row < 0) continue;
        this.draw(active, choice, params);
        if (choice.finish === null) {
          const rows = going.get(active.lane) ?? [];
          rows.push(choice.row);
          going.set(active.lane, rows);
        }
      }
    }
    this.report();
    for (const [lane, rows] of going) {
      const logits = lane.decoder.extend(
        rows,
        rows.map((row) => [this.lastTokenOf(lane, row)]),
      );
      rows.forEach((row, i) => lane.logits.set(logits.subarray(i * this.V, (i + 1) * this.V), row * this.V));
      lane.usedAt = Date.now();
    }
    this.retireLanes();
  }

  /** The row's last token, which the next step feeds. */
  private readonly rowToken = new Map<Lane, Map<number, number>>();
  private lastTokenOf(lane: Lane, row: number): number {
    return this.rowToken.get(lane)!.get(row)!;
  }

  private dropCancelled(): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const active = this.active[i]!;
      if (!active.cancelled) continue;
      for (const choice of active.choices) this.freeRow(active.lane, choice);
      this.cancelledCount++;
      this.active.splice(i, 1);
    }
  }

  private freeRow(lane: Lane, choice: Choice): void {
    if (choice.row < 0) return;
    lane.free.push(choice.row);
    choice.row = -1;
  }

  /** Prefills the waiting requests that fit, in the order they came (one that does not fit yet waits its turn). */
  private admit(): void {
    for (let i = 0; i < this.waiting.length; ) {
      const request = this.waiting[i]!;
      let lane: Lane;
      let prompts: number[][];
      try {
        lane = this.laneFor(request.adapter);
        prompts = request.prompts.map((prompt) => this.tokensOf(prompt));
        this.check(request, prompts);
      } catch (failure) {
        this.waiting.splice(i, 1);
        const refusal = failure instanceof Refusal ? failure : null;
        this.fail(request.id, refusal?.status ?? 500, (failure as Error).message, refusal?.param ?? null, refusal?.code ?? null);
        continue;
      }
      const needed = prompts.length * request.n;
      if (needed > lane.rows) {
        this.waiting.splice(i, 1);
        this.fail(request.id, 400, `this request needs ${needed} rows (prompts × n), over the ${lane.rows} one model decodes at once`, "n", null);
        continue;
      }
      if (lane.free.length < needed) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      this.start(request, lane, prompts);
    }
  }

  private check(request: ServeRequest, prompts: number[][]): void {
    const context = this.base.config.contextLength;
    prompts.forEach((prompt, i) => {
      const where = prompts.length > 1 ? `prompt ${i} has` : "the prompt has";
      if (prompt.length === 0) throw new Refusal(400, `${where} no tokens; send some text`, "messages", null);
      if (prompt.length >= context) {
        throw new Refusal(
          400,
          `This model's maximum context length is ${context} tokens, and ${where} ${prompt.length}: shorten it to leave room for at least one new token.`,
          "messages",
          "context_length_exceeded",
        );
      }
      if (request.maxTokens !== null && prompt.length + request.maxTokens > context) {
        throw new Refusal(
          400,
          `This model's maximum context length is ${context} tokens. However, you requested ${prompt.length + request.maxTokens} tokens (${prompt.length} in the prompt, ${request.maxTokens} in the completion). Reduce the prompt or max_tokens.`,
          "max_tokens",
          "context_length_exceeded",
        );
      }
      for (const t of prompt) {
        if (!Number.isInteger(t) || t < 0 || t >= this.V)
          throw new Refusal(400, `token id ${t} is outside this model's vocabulary of ${this.V}`, "prompt", null);
      }
    });
  }

  private tokensOf(prompt: ServePrompt): number[] {
    const tokenizer = this.base.tokenizer;
    if (prompt.kind === "tokens") return prompt.tokens;
    if (prompt.kind === "text") return tokenizer.encode(prompt.text);
    try {
      return tokenizer.encodeChat(prompt.messages, { addGenerationPrompt: true });
    } catch (failure) {
      throw new Refusal(400, `the messages do not fit this model's chat template: ${(failure as Error).message}`, "messages", null);
    }
  }

  /** Prefills a request's prompts, each into its first row, and copies it into the rest of its n. */
  private start(request: ServeRequest, lane: Lane, prompts: number[][]): void {
    const context = this.base.config.contextLength;
    let automaton: TokenAutomaton | null = null;
    if (request.constraint) {
      try {
        automaton = tokenAutomaton(automatonFor(request.constraint), this.base.tokenizer);
      } catch (failure) {
        this.fail(request.id, 400, `response_format: ${(failure as Error).message}`, "response_format", null);
        return;
      }
    }
    const tokenMap = this.rowToken.get(lane) ?? new Map<number, number>();
    this.rowToken.set(lane, tokenMap);
    const choices: Choice[] = [];
    prompts.forEach((prompt, p) => {
      const first = lane.free.pop()!;
      lane.decoder.copyRow(0, first); // empty it
      const logits = lane.decoder.extend([first], [prompt]);
      lane.logits.set(logits.subarray(0, this.V), first * this.V);
      for (let j = 0; j < request.n; j++) {
        const row = j === 0 ? first : lane.free.pop()!;
        if (j > 0) {
          lane.decoder.copyRow(first, row);
          lane.logits.copyWithin(row * this.V, first * this.V, (first + 1) * this.V);
        }
        choices.push({
          index: p * request.n + j,
          row,
          tokens: [],
          sent: "",
          automaton,
          state: 0,
          limit: Math.min(request.maxTokens ?? context, context - prompt.length),
          finish: null,
          delta: null,
        });
      }
    });
    lane.usedAt = Date.now();
    this.active.push({ request, lane, rng: new Rng(request.seed ?? Math.floor(Math.random() * 2 ** 31)), choices, cancelled: false });
    this.events.push({ id: request.id, type: "started", promptTokens: prompts.map((prompt) => prompt.length) });
    this.traffic.requests++;
  }

  /** Draws a choice's next token, under its constraint, and notes what it adds. */
  private draw(active: Active, choice: Choice, params: { temperature: number; topP: number; topK: number }): void {
    const { lane, request } = active;
    const tokenizer = this.base.tokenizer;
    const V = this.V;
    let source = lane.logits;
    let offset = choice.row * V;
    const endOfTurn = tokenizer.stopTokens[0]!;
    if (choice.automaton) {
      const allowed = [...choice.automaton.tokens(choice.state)];
      if (choice.automaton.accepting(choice.state)) allowed.push(endOfTurn);
      this.masked.fill(-Infinity);
      for (const t of allowed) this.masked[t] = lane.logits[offset + t]!;
      source = this.masked;
      offset = 0;
    }
    const token = drawToken(source, offset, V, params, active.rng, this.probs);
    const temperature = request.temperature === 0 ? 1 : request.temperature;
    const info = request.logprobs !== null ? this.logprobsOf(source, offset, temperature, token, request.logprobs) : null;
    choice.tokens.push(token);
    this.traffic.tokens++;
    this.rowToken.get(lane)!.set(choice.row, token);
    let finish: Finish | null = null;
    if (choice.automaton) {
      if (token === endOfTurn) finish = "stop";
      else choice.state = choice.automaton.next(choice.state, token);
    } else if (!request.ignoreEos && tokenizer.stopTokens.includes(token)) finish = "stop";
    let text = tokenizer.decode(choice.tokens, { skipSpecial: true });
    for (const stop of request.stop) {
      const at = text.indexOf(stop);
      if (at >= 0) {
        text = text.slice(0, at);
        finish = "stop";
      }
    }
    if (finish === null && choice.tokens.length >= choice.limit) finish = "length";
    // Text that a stop string may yet claim, or a character whose bytes are not all written, waits.
    let ready = text;
    if (finish === null) {
      if (ready.endsWith("\uFFFD")) ready = ready.slice(0, -1);
      for (const stop of request.stop) {
        for (let k = Math.min(stop.length - 1, ready.length); k > 0; k--) {
          if (ready.endsWith(stop.slice(0, k))) {
            ready = ready.slice(0, ready.length - k);
            break;
          }
        }
      }
    }
    const delta = (choice.delta ??= { index: choice.index, text: "", count: 0, finish: null });
    if (ready.length > choice.sent.length && ready.startsWith(choice.sent)) {
      delta.text += ready.slice(choice.sent.length);
      choice.sent = ready;
    }
    delta.count++;
    if (info) (delta.tokens ??= []).push(info);
    if (finish !== null) {
      choice.finish = finish;
      delta.finish = finish;
      this.freeRow(lane, choice);
    }
  }

  /** log softmax(logits / temperature) of `token`, and the `k` most likely tokens with theirs. */
  private logprobsOf(source: Float32Array, offset: number, temperature: number, token: number, k: number): ServedToken {
    const V = this.V;
    const inv = 1 / temperature;
    let max = -Infinity;
    for (let j = 0; j < V; j++) max = Math.max(max, source[offset + j]! * inv);
    let sum = 0;
    for (let j = 0; j < V; j++) sum += Math.exp(source[offset + j]! * inv - max);
    const logZ = max + Math.log(sum);
    const lp = (j: number) => source[offset + j]! * inv - logZ;
    const text = (id: number) => this.base.tokenizer.decode([id]);
    const served: ServedToken = { id: token, text: text(token), bytes: this.bytesOf(token), logprob: lp(token) };
    if (k > 0) {
      const top: number[] = [];
      for (let j = 0; j < V; j++) {
        if (source[offset + j] === -Infinity) continue;
        if (top.length < k) top.push(j);
        else if (source[offset + j]! > source[offset + top[top.length - 1]!]!) top[top.length - 1] = j;
        else continue;
        top.sort((a, b) => source[offset + b]! - source[offset + a]! || a - b);
      }
      served.top = top.map((id) => ({ id, text: text(id), bytes: this.bytesOf(id), logprob: lp(id) }));
    }
    return served;
  }

  /** The bytes a token writes: its own where the tokenizer knows them (a byte, a byte-level BPE token), else its text's. */
  private tokenBytes: Map<number, readonly number[]> | null = null;
  private bytesOf(id: number): number[] {
    const tokenizer = this.base.tokenizer;
    if (tokenizer.kind === "byte" && id < 256) return [id];
    this.tokenBytes ??= new Map(tokenizer.textTokens?.() ?? []);
    return [...(this.tokenBytes.get(id) ?? Buffer.from(tokenizer.decode([id]), "utf8"))];
  }

  /** This step's deltas as one event per request; ended requests leave. */
  private report(): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const active = this.active[i]!;
      const choices: ChoiceDelta[] = [];
      for (const choice of active.choices) {
        if (choice.delta) choices.push(choice.delta);
        choice.delta = null;
      }
      if (choices.length > 0) this.events.push({ id: active.request.id, type: "delta", choices: choices.sort((a, b) => a.index - b.index) });
      if (active.choices.every((choice) => choice.finish !== null)) this.active.splice(i, 1);
    }
  }

  /** The decoder of the base or of an adapter on it, made when first needed. */
  private laneFor(adapter: ServeRequest["adapter"]): Lane {
    const key = adapter?.id ?? "base";
    let lane = this.lanes.get(key);
    if (!lane) {
      const view = adapter ? this.adapterView(adapter) : { config: this.base.config, weights: this.base.weights, lora: null, valueHead: null };
      const rows = this.rowsPerModel;
      const decoder = this.base.engine.createDecoder(view, rows + 1, this.base.config.contextLength);
      lane = {
        key,
        view,
        decoder,
        rows,
        free: Array.from({ length: rows }, (_, i) => rows - i),
        logits: new Float32Array((rows + 1) * this.V),
        usedAt: Date.now(),
      };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  /** A LoRA checkpoint's adapter on the base, read once and kept (the least recently used dropped past MAX_ADAPTERS). */
  private adapterView(adapter: { id: string; path: string }): ModelView {
    const known = this.adapters.get(adapter.id);
    if (known) {
      this.adapters.delete(adapter.id);
      this.adapters.set(adapter.id, known);
      return known;
    }
    let ckpt: ReturnType<typeof readCheckpoint>;
    try {
      ckpt = readCheckpoint(adapter.path);
    } catch (failure) {
      throw new Refusal(500, `checkpoint '${adapter.id}' could not be read: ${(failure as Error).message.replaceAll(adapter.path, adapter.id)}`, "model", null);
    }
    if (ckpt.manifest.contents !== "lora") throw new Refusal(400, `checkpoint '${adapter.id}' holds full weights, not an adapter on this base`, "model", null);
    const problems = describeMismatch(ckpt.json("model_config.json"), this.base.config, "its base");
    if (problems.length > 0) throw new Refusal(400, `checkpoint '${adapter.id}' does not fit this base: ${problems.join("; ")}`, "model", null);
    const lora = initLoraAdapter(this.base.weights, parseLoraConfig(ckpt.json("lora_config.json")), new Rng(0));
    assignParameters(listLoraParameters(lora, this.base.weights), ckpt.tensors("weights.safetensors"), `checkpoint '${adapter.id}'`);
    const view: ModelView = { config: this.base.config, weights: this.base.weights, lora, valueHead: null };
    this.adapters.set(adapter.id, view);
    if (this.adapters.size > MAX_ADAPTERS) {
      const oldest = this.adapters.keys().next().value!;
      if (!this.lanes.has(oldest)) this.adapters.delete(oldest);
    }
    return view;
  }

  /** Gives back the decoders of models that have had no row for a while. */
  private retireLanes(): void {
    const now = Date.now();
    for (const [key, lane] of this.lanes) {
      if (lane.free.length === lane.rows && now - lane.usedAt > LANE_IDLE_MS) {
        lane.decoder.dispose();
        this.lanes.delete(key);
        this.rowToken.delete(lane);
      }
    }
  }
}

/** A request refused for what it asked (its client gets `status` and the words). */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null,
    readonly code: string | null,
  ) {
    super(message);
  }
}
