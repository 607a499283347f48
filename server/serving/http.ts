/**
 * The OpenAI-compatible endpoints, answered by the web server before Next.js (as the metric stream and workers'
 * calls are): `GET /v1/models`, `POST /v1/chat/completions`, `POST /v1/completions`, with OpenAI's request and
 * response shapes, server-sent events when `stream` is set, and OpenAI's error object. Also the serving jobs'
 * exchange (`POST /api/serving/exchange`, with the worker token) and what is being served (`GET /v1/serving`).
 *
 * A request for a model no job serves yet starts one (a run of the project's "Serving" experiment, placed by the
 * scheduler like any job) and is answered 503 with Retry-After while the worker loads it.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { TRPCError } from "@trpc/server";
import { Access, authenticate, signInMessage } from "../auth";
import { getDatabase } from "../db";
import { serverEnv } from "../env";
import { baseShapeFor } from "../experiments";
import { ensureServing, JobRejectedError, SERVING_RETRY_AFTER_FAILURE_S, servingJobOf } from "../jobs";
import { WORKER_TOKEN_HEADER } from "../worker-protocol";
import type { ServingHub } from "./hub";
import { listModels, type ModelTarget, resolveModel, UnknownModelError } from "./models";
import { type ChoiceDelta, type ExchangeInput, SERVING_EXCHANGE_PATH, type ServeEvent, type ServeRequest } from "./protocol";
import { BadRequestError, chatBodySchema, chatRequest, completionBodySchema, completionRequest, parseBody } from "./requests";

/** Most bytes of a request body (a conversation, a prompt, a worker's exchange). */
const MAX_BODY_BYTES = 8 * 1024 * 1024;
/** Rows a serving job's footprint counts (the job decodes up to this many per model). */
const FOOTPRINT_ROWS = 32;
/** What a client is told to wait while a worker loads its model. */
const RETRY_AFTER_S = 2;

export const SERVING_STATUS_PATH = "/v1/serving";

/** Whether the web server answers this request here (a path of the endpoints or the exchange). */
export function isServingRequest(url: string | undefined): boolean {
  const path = (url ?? "").split("?")[0]!;
  return path.startsWith("/v1/") || path === SERVING_EXCHANGE_PATH;
}

type ErrorBody = { message: string; type: string; param: string | null; code: string | null };

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
    readonly headers: Record<string, string> = {},
  ) {
    super(body.message);
  }
}

const invalid = (message: string, param: string | null = null, code: string | null = null) =>
  new HttpError(400, { message, type: "invalid_request_error", param, code });

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, { error: error.body }, error.headers);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, { message: `the request body is over ${MAX_BODY_BYTES} bytes`, type: "invalid_request_error", param: null, code: null });
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw invalid("the request body is not valid JSON; send a JSON object with Content-Type: application/json");
  }
}

function headersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(":")) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.append(name, value);
  }
  return headers;
}

/** Serving's part of the web server: the hub of live jobs and the routes. */
export function createServingRoutes(hub: ServingHub, options: { workerToken: string }) {
  const expected = Buffer.from(options.workerToken);
  const isWorker = (given: string | string[] | undefined) => {
    if (typeof given !== "string") return false;
    const bytes = Buffer.from(given);
    return bytes.length === expected.length && timingSafeEqual(bytes, expected);
  };
  /** Starts (or finds starting) per project and base: requests that come together ask the database once. */
  const starting = new Map<string, Promise<Awaited<ReturnType<typeof ensureServing>>>>();

  async function caller(req: IncomingMessage): Promise<Access> {
    const { db } = await getDatabase();
    const principal = await authenticate(db, headersOf(req), serverEnv().TINKERLAB_AUTH);
    if (principal.kind === "anonymous") {
      throw new HttpError(401, { message: signInMessage(principal), type: "invalid_request_error", param: null, code: "invalid_api_key" });
    }
    if (principal.kind === "share") {
      throw new HttpError(403, {
        message: "A share link shows a run's view; models are for the project's members. Send an API key as 'Authorization: Bearer tl_…'.",
        type: "invalid_request_error",
        param: null,
        code: null,
      });
    }
    return new Access(db, principal);
  }

  async function target(access: Access, model: string): Promise<ModelTarget> {
    try {
      return await resolveModel((await getDatabase()).db, access, model);
    } catch (error) {
      if (error instanceof UnknownModelError)
        throw new HttpError(404, { message: error.message, type: "invalid_request_error", param: "model", code: "model_not_found" });
      throw error;
    }
  }

  /** A 503 saying the model is loading, after making sure a job is on its way. */
  async function loading(access: Access, found: ModelTarget): Promise<HttpError> {
    const key = `${found.projectId} ${found.base}`;
    let started = starting.get(key);
    if (!started) {
      started = (async () => {
        const { db } = await getDatabase();
        let shape;
        try {
          shape = await baseShapeFor({ db, access }, found.base, "model");
        } catch (error) {
          if (error instanceof TRPCError) throw invalid(error.message, "model");
          throw error;
        }
        return ensureServing(db, {
          projectId: found.projectId,
          userId: access.user?.id ?? "local",
          base: found.base,
          shape,
          idleSeconds: serverEnv().TINKERLAB_SERVE_IDLE_S,
          rows: FOOTPRINT_ROWS,
        });
      })().finally(() => setTimeout(() => starting.delete(key), 500));
      starting.set(key, started);
    }
    let state;
    try {
      state = await started;
    } catch (error) {
      if (error instanceof JobRejectedError)
        throw new HttpError(503, {
          message: `The model '${found.model}' cannot be served here: ${error.message}`,
          type: "server_error",
          param: "model",
          code: "model_unservable",
        });
      throw error;
    }
    if (state.started === "failed") {
      return new HttpError(
        503,
        {
          message: `The model '${found.model}' cannot be served now: its serving job (run ${state.runId}) failed: ${state.reason ?? "no reason given"}. Another is tried ${SERVING_RETRY_AFTER_FAILURE_S} s after it failed.`,
          type: "server_error",
          param: "model",
          code: "model_failed",
        },
        { "retry-after": String(SERVING_RETRY_AFTER_FAILURE_S) },
      );
    }
    const what = found.adapter ? `base '${found.base}' (with checkpoint '${found.adapter.id}')` : `'${found.base}'`;
    return new HttpError(
      503,
      {
        message: `The model '${found.model}' is loading: a worker is starting to serve ${what} (run ${state.runId}, its job ${state.status}). Retry in ${RETRY_AFTER_S} s.`,
        type: "server_error",
        param: null,
        code: "model_loading",
      },
      { "retry-after": String(RETRY_AFTER_S) },
    );
  }

  async function exchange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!isWorker(req.headers[WORKER_TOKEN_HEADER])) {
      throw new HttpError(401, {
        message: `a serving job's exchange needs the worker token in ${WORKER_TOKEN_HEADER}`,
        type: "invalid_request_error",
        param: null,
        code: null,
      });
    }
    const input = (await readJson(req)) as ExchangeInput;
    if (!hub.knows(input.jobId, input.workerId)) {
      const { db } = await getDatabase();
      const job = await servingJobOf(db, input.workerId, input.jobId);
      if (!job || job.runId !== input.hello.runId || job.projectId !== input.hello.projectId) {
        throw new HttpError(409, {
          message: `worker ${input.workerId} runs no inference job '${input.jobId}'`,
          type: "invalid_request_error",
          param: null,
          code: null,
        });
      }
    }
    sendJson(res, 200, await hub.exchange(input));
  }

  async function models(req: IncomingMessage, res: ServerResponse, id: string | null): Promise<void> {
    const access = await caller(req);
    const { db } = await getDatabase();
    if (id === null) {
      sendJson(res, 200, { object: "list", data: await listModels(db, access) });
      return;
    }
    await target(access, id);
    sendJson(res, 200, { id, object: "model", created: 0, owned_by: "tinkerlab" });
  }

  async function status(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const access = await caller(req);
    const visible = new Set(access.principal.kind === "apikey" ? [access.principal.projectId] : await access.visibleProjects());
    sendJson(res, 200, { object: "list", data: hub.servers().filter((server) => visible.has(server.projectId)) });
  }

  async function complete(req: IncomingMessage, res: ServerResponse, kind: "chat" | "text"): Promise<void> {
    const access = await caller(req);
    const body = await readJson(req);
    let request: ServeRequest;
    let stream: boolean;
    let includeUsage: boolean;
    let model: string;
    try {
      if (kind === "chat") {
        const parsed = parseBody(chatBodySchema, body);
        request = chatRequest(parsed);
        ({ stream, includeUsage, model } = streamSettings(parsed));
      } else {
        const parsed = parseBody(completionBodySchema, body);
        request = completionRequest(parsed);
        ({ stream, includeUsage, model } = streamSettings(parsed));
      }
    } catch (error) {
      if (error instanceof BadRequestError) throw invalid(error.message, error.param, error.code);
      throw error;
    }
    const found = await target(access, model);
    request.adapter = found.adapter;
    const server = hub.serverFor(found.projectId, found.base);
    if (!server) throw await loading(access, found);
    const reply = new Reply(res, kind, model, request, { stream, includeUsage });
    const handle = hub.submit(server.jobId, request, (event) => {
      if (reply.take(event)) handle.finish();
    });
    // A client that goes away: its rows are freed at the job's next step.
    res.on("close", () => {
      if (!reply.ended) handle.cancel();
    });
  }

  return {
    /** Answers a request `isServingRequest` named. */
    async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const path = (req.url ?? "").split("?")[0]!;
      try {
        if (path === SERVING_EXCHANGE_PATH && req.method === "POST") return await exchange(req, res);
        if (path === "/v1/chat/completions" && req.method === "POST") return await complete(req, res, "chat");
        if (path === "/v1/completions" && req.method === "POST") return await complete(req, res, "text");
        if (path === "/v1/models" && req.method === "GET") return await models(req, res, null);
        if (path.startsWith("/v1/models/") && req.method === "GET") return await models(req, res, decodeURIComponent(path.slice("/v1/models/".length)));
        if (path === SERVING_STATUS_PATH && req.method === "GET") return await status(req, res);
        throw new HttpError(404, {
          message: `No route ${req.method} ${path}. This server answers GET /v1/models, POST /v1/chat/completions and POST /v1/completions.`,
          type: "invalid_request_error",
          param: null,
          code: "unknown_url",
        });
      } catch (error) {
        if (error instanceof HttpError) return sendError(res, error);
        const id = randomBytes(6).toString("hex");
        console.error(`serving ${req.method} ${path} failed (error ${id}):`, error);
        sendError(
          res,
          new HttpError(500, { message: `The server failed to answer (error ${id}); its log says why.`, type: "server_error", param: null, code: null }),
        );
      }
    },
  };
}

function streamSettings(body: { stream?: boolean | null; stream_options?: { include_usage?: boolean | null } | null; model: string }) {
  return { stream: body.stream === true, includeUsage: body.stream_options?.include_usage === true, model: body.model };
}

type ChoiceState = { text: string; tokens: NonNullable<ChoiceDelta["tokens"]>; count: number; finish: "stop" | "length" | null };

/** One request's answer, built from its events: streamed as they come, or sent whole at the end. */
class Reply {
  ended = false;
  private readonly id: string;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly choices: ChoiceState[];
  private promptTokens = 0;
  private opened = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly kind: "chat" | "text",
    private readonly model: string,
    private readonly request: ServeRequest,
    private readonly options: { stream: boolean; includeUsage: boolean },
  ) {
    this.id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${request.id.replaceAll("-", "")}`;
    this.choices = Array.from({ length: request.prompts.length * request.n }, () => ({ text: "", tokens: [], count: 0, finish: null }));
  }

  /** Takes an event; true once the reply has ended. */
  take(event: ServeEvent): boolean {
    if (this.ended) return true;
    if (event.type === "error") return this.fail(event);
    if (event.type === "started") {
      this.promptTokens = event.promptTokens.reduce((a, b) => a + b, 0);
      if (this.options.stream) this.open();
      return false;
    }
    for (const delta of event.choices) {
      const choice = this.choices[delta.index]!;
      choice.text += delta.text;
      choice.count += delta.count;
      if (delta.tokens) choice.tokens.push(...delta.tokens);
      if (delta.finish) choice.finish = delta.finish;
    }
    if (this.options.stream) this.chunk(event.choices);
    if (this.choices.every((choice) => choice.finish !== null)) this.finish();
    return this.ended;
  }

  private usage() {
    const completion = this.choices.reduce((sum, choice) => sum + choice.count, 0);
    return { prompt_tokens: this.promptTokens, completion_tokens: completion, total_tokens: this.promptTokens + completion };
  }

  private envelope(object: string) {
    return { id: this.id, object, created: this.created, model: this.model, system_fingerprint: null };
  }

  private open(): void {
    this.opened = true;
    this.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
    if (this.kind === "chat") {
      const choices = this.choices.map((_, index) => ({ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }));
      this.send({ ...this.envelope("chat.completion.chunk"), choices, ...(this.options.includeUsage ? { usage: null } : {}) });
    }
  }

  private send(data: unknown): void {
    this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  private chunk(deltas: ChoiceDelta[]): void {
    const usage = this.options.includeUsage ? { usage: null } : {};
    if (this.kind === "chat") {
      const choices = deltas.map((delta) => ({
        index: delta.index,
        delta: delta.text || !delta.finish ? { content: delta.text } : {},
        logprobs: delta.tokens ? { content: delta.tokens.map(chatLogprob), refusal: null } : null,
        finish_reason: delta.finish,
      }));
      this.send({ ...this.envelope("chat.completion.chunk"), choices, ...usage });
    } else {
      const choices = deltas.map((delta) => ({
        index: delta.index,
        text: delta.text,
        logprobs: delta.tokens ? completionLogprobs(delta.tokens, 0) : null,
        finish_reason: delta.finish,
      }));
      this.send({ ...this.envelope("text_completion"), choices, ...usage });
    }
  }

  private finish(): void {
    this.ended = true;
    if (this.options.stream) {
      if (this.options.includeUsage) {
        this.send({ ...this.envelope(this.kind === "chat" ? "chat.completion.chunk" : "text_completion"), choices: [], usage: this.usage() });
      }
      this.res.end("data: [DONE]\n\n");
      return;
    }
    const wantLogprobs = this.request.logprobs !== null;
    const choices =
      this.kind === "chat"
        ? this.choices.map((choice, index) => ({
            index,
            message: { role: "assistant", content: choice.text, refusal: null },
            logprobs: wantLogprobs ? { content: choice.tokens.map(chatLogprob), refusal: null } : null,
            finish_reason: choice.finish,
          }))
        : this.choices.map((choice, index) => ({
            index,
            text: choice.text,
            logprobs: wantLogprobs ? completionLogprobs(choice.tokens, 0) : null,
            finish_reason: choice.finish,
          }));
    sendJson(this.res, 200, { ...this.envelope(this.kind === "chat" ? "chat.completion" : "text_completion"), choices, usage: this.usage() });
  }

  private fail(event: Extract<ServeEvent, { type: "error" }>): boolean {
    this.ended = true;
    const body: ErrorBody = {
      message: event.message,
      type: event.status >= 500 ? "server_error" : "invalid_request_error",
      param: event.param,
      code: event.code,
    };
    if (!this.opened) sendJson(this.res, event.status, { error: body }, event.status === 503 ? { "retry-after": String(RETRY_AFTER_S) } : {});
    else this.res.end(`data: ${JSON.stringify({ error: body })}\n\n`);
    return true;
  }
}

function chatLogprob(token: NonNullable<ChoiceDelta["tokens"]>[number]) {
  return {
    token: token.text,
    logprob: token.logprob,
    bytes: token.bytes,
    top_logprobs: (token.top ?? []).map((alt) => ({ token: alt.text, logprob: alt.logprob, bytes: alt.bytes })),
  };
}

function completionLogprobs(tokens: NonNullable<ChoiceDelta["tokens"]>, start: number) {
  let offset = start;
  const offsets = tokens.map((token) => {
    const at = offset;
    offset += token.text.length;
    return at;
  });
  return {
    tokens: tokens.map((token) => token.text),
    token_logprobs: tokens.map((token) => token.logprob),
    top_logprobs: tokens.map((token) => Object.fromEntries((token.top ?? []).map((alt) => [alt.text, alt.logprob]))),
    text_offset: offsets,
  };
}
