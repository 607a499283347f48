/**
 * How large a request each tRPC procedure accepts (docs/RUNTIME.md, "Request limits"), and the gate that holds
 * requests to it while their bodies stream in. The web server calls `admitRequest` before Next.js sees a request;
 * the Next.js route (`app/api/trpc/[trpc]/route.ts`) calls `holdToRequestLimit`, so the same limits hold when
 * Next.js runs on its own (`next dev`). A request over its limit is answered 413 with a tRPC error envelope
 * (`PAYLOAD_TOO_LARGE`) naming the procedure, the limit and what to do; nothing of it reaches a procedure.
 *
 * Before its body, the gate reads a tRPC request's line and headers (`refusalOf`): a batch of more than
 * MAX_BATCH_CALLS calls (400), a body that is not JSON (415), and a signed-out address past its rate limit (429,
 * ./rate-limits.ts) are answered at once, without parsing, authenticating or routing anything of them.
 */
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import superjson from "superjson";
import { MAX_BATCH_CALLS } from "@/lib/trpc/limits";
import { CLIENT_IP_HEADER, SESSION_COOKIE, SHARE_HEADER } from "../auth/constants";
import { MAX_DATASET_BYTES } from "../datasets";
import { serverEnv } from "../env";
import { WORKER_TOKEN_HEADER } from "../worker-protocol";
import { signedOutRefusal } from "./rate-limits";

const KiB = 1024;
const MiB = 1024 * KiB;

export type RequestLimit = {
  /** The most bytes of body one request may carry. */
  bytes: number;
  /** What to do instead, for the 413's message. */
  advice: string;
  /** Only requests carrying the server's worker token get this limit; others get the default. */
  workersOnly?: boolean;
};

/** Every procedure not named in REQUEST_LIMITS, and every other request with a body. */
export const DEFAULT_REQUEST_LIMIT: RequestLimit = { bytes: 256 * KiB, advice: "send less in one call" };

const SOURCE: RequestLimit = {
  bytes: 2 * MiB,
  advice: "keep an experiment's source files and config under 2 MiB together; put large data in a dataset (Datasets page) and read it by name",
};

// A remote session's call: a batch of token sequences with their per-token arrays (weights, logprobs, advantages,
// allowed tokens), about 20-60 bytes of JSON a token; 16 MiB holds ~300,000 tokens.
const SESSION_CALL: RequestLimit = {
  bytes: 16 * MiB,
  advice:
    "split the batch: pass fewer sequences to each forwardBackward call and call it several times before one optimStep (gradients add up until the step); forward and sample take fewer sequences or prompts the same way",
};

const SESSION_ANSWER: RequestLimit = { bytes: 64 * MiB, advice: "ask for fewer samples or shorter ones in one call", workersOnly: true };

/** The procedures that take more than the default. A batch gets the largest limit among its procedures. */
export const REQUEST_LIMITS: Readonly<Record<string, RequestLimit>> = {
  "experiments.create": SOURCE,
  "experiments.save": SOURCE,
  "experiments.validate": SOURCE,
  // A dataset holds at most MAX_DATASET_BYTES of UTF-8 text; in JSON each character may take two bytes ('"', '\',
  // newlines), plus the name, description and envelope.
  "datasets.upload": {
    bytes: 2 * MAX_DATASET_BYTES + MiB,
    advice: `a dataset holds at most ${MAX_DATASET_BYTES / MiB} MiB of text: split it into several datasets`,
  },
  "sessions.invoke": SESSION_CALL,
  // Calls made together, in one request: the client sends a call larger than half of this alone.
  "sessions.invokeMany": SESSION_CALL,
  // Session calls' answers (a sample's or forward's tokens and logprobs), sent by the worker; one exchange carries
  // the answers of calls sent together (the worker sends them one by one when together they are refused).
  "worker.sessionExchange": SESSION_ANSWER,
  // One or more steps' metrics, rollouts (prompt, each turn's text, legal actions, tokens and their logprobs) and
  // log lines. A rollout of the built-in use cases is 0.3-6 KiB of JSON and a step's report at their templates'
  // settings 64 KiB-1.2 MiB (text-world's 200 evaluation episodes), so this holds 10,000 rollouts (the most a report
  // may carry, REPORT_LIMITS) of the largest kind.
  "worker.report": {
    bytes: 64 * MiB,
    advice: "report a step's rollouts in smaller reports (fewer groups per step, or fewer turns per episode)",
    workersOnly: true,
  },
};

/** "2 MiB", "256 KiB", "3.1 MiB", "900 bytes". */
export function formatBytes(bytes: number): string {
  const unit = (size: number, name: string) => `${Number.isInteger(bytes / size) ? bytes / size : (bytes / size).toFixed(1)} ${name}`;
  if (bytes >= MiB) return unit(MiB, "MiB");
  if (bytes >= KiB) return unit(KiB, "KiB");
  return `${bytes} bytes`;
}

/** The procedures a request to the tRPC endpoint calls, and whether as a batch (`?batch=1`). */
export type TrpcCall = { procedures: string[]; batch: boolean };

/**
 * The procedures a request calls: `/api/trpc/a,b?batch=1` is a batch of ["a", "b"], `/api/trpc/a` is ["a"]; null
 * when the path is not under /api/trpc. Dot segments and doubled slashes are resolved as a router would; any path
 * not read as tRPC's gets the default limit, so another spelling of a procedure's path can only get less.
 */
export function trpcCallOf(url: string | undefined): TrpcCall | null {
  if (!url) return null;
  let parsed: URL;
  try {
    parsed = new URL(url, "http://localhost");
  } catch {
    return null;
  }
  const match = /^\/api\/trpc(?:\/(.*))?$/.exec(parsed.pathname.replace(/\/{2,}/g, "/"));
  if (!match) return null;
  let path = match[1] ?? "";
  try {
    path = decodeURIComponent(path);
  } catch {
    // tRPC will not find such a procedure either: the default limit applies
  }
  const batch = parsed.searchParams.get("batch") === "1";
  return { procedures: batch ? path.split(",") : [path], batch };
}

export type Allowance = RequestLimit & { procedure: string | null };

/**
 * The limit of a request to `procedures` (null: not a tRPC request): the largest among them, so that a batch is
 * allowed what its most generous call is (a worker's heartbeat batched with its report) and repeating a procedure in
 * the URL buys nothing.
 */
export function requestLimit(procedures: string[] | null, options: { worker: boolean }): Allowance {
  let best: Allowance = { ...DEFAULT_REQUEST_LIMIT, procedure: procedures?.length === 1 ? procedures[0]! : null };
  let forWorkers: number | null = null;
  for (const procedure of procedures ?? []) {
    const limit = REQUEST_LIMITS[procedure];
    if (limit?.workersOnly && !options.worker) forWorkers = Math.max(forWorkers ?? 0, limit.bytes);
    else if (limit && limit.bytes > best.bytes) best = { ...limit, procedure };
  }
  if (forWorkers !== null && best.bytes < forWorkers) {
    best.advice += `; a worker that sends the server's worker token (${WORKER_TOKEN_HEADER}) may send up to ${formatBytes(forWorkers)}`;
  }
  return best;
}

/** Whether `given` is the server's worker token (set at start by `setWorkerToken`, server/api/routers/worker.ts). */
export function isWorkerToken(given: string | string[] | null | undefined): boolean {
  const expected = (globalThis as typeof globalThis & { __tinkerlabWorkerToken?: string }).__tinkerlabWorkerToken;
  if (typeof given !== "string" || expected === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The body of a refusal: tRPC's error envelope as superjson sends it, which a tRPC client throws as a TRPCClientError. */
function envelope(code: TRPC_ERROR_CODE_KEY, httpStatus: number, message: string, path: string | null, data: Record<string, unknown> = {}) {
  return { error: superjson.serialize({ message, code: TRPC_ERROR_CODES_BY_KEY[code], data: { code, httpStatus, path, ...data } }) };
}

/**
 * The 413's body: one envelope per call of a batch, so a tRPC client throws a TRPCClientError whose message says what
 * happened and whose `data` holds the procedure and the limit.
 */
function payloadTooLarge(call: TrpcCall | null, allowance: Allowance, size: { declared?: number }): string {
  const limit = `${formatBytes(allowance.bytes)} (${allowance.bytes} bytes)`;
  const what = allowance.procedure ?? (call && call.procedures.length > 1 ? `a batch of ${call.procedures.join(", ")}` : "this endpoint");
  const message =
    size.declared !== undefined
      ? `This request is ${formatBytes(size.declared)} (${size.declared} bytes); ${what} accepts at most ${limit} in one request: ${allowance.advice}.`
      : `This request passed ${limit}, the most ${what} accepts in one request: ${allowance.advice}.`;
  const data = { limitBytes: allowance.bytes, limit: formatBytes(allowance.bytes), ...(size.declared !== undefined ? { requestBytes: size.declared } : {}) };
  const of = (path: string | null) => envelope("PAYLOAD_TOO_LARGE", 413, message, path, data);
  return JSON.stringify(call?.batch ? call.procedures.map(of) : of(call?.procedures[0] ?? null));
}

/** A refusal the gate answers itself: its status, its body (JSON) and any header it adds. */
export type Refusal = { status: number; body: string; headers: Record<string, string> };

/** What `refusalOf` reads of a request: its method, URL (path and query) and headers, by lower-case name. */
type RequestHead = { method: string | undefined; url: string; header(name: string): string | null };

/**
 * What is wrong with a tRPC request before its body is read, or null: more calls than MAX_BATCH_CALLS (400, checked
 * on the path's comma list alone, so a batch of thousands costs no more than one call); a POST whose body is not
 * declared JSON (415: tRPC would pass a form or a byte stream to the procedure as it is); a request with no
 * credentials from a signed-out address past its rate limit (429, on a server with accounts or keys). One envelope
 * answers every call of a batch (a tRPC client gives it to each).
 */
export function refusalOf(call: TrpcCall, request: RequestHead): Refusal | null {
  const path = call.batch ? null : (call.procedures[0] ?? null);
  const answer = (code: TRPC_ERROR_CODE_KEY, status: number, message: string, data: Record<string, unknown> = {}, headers = {}): Refusal => ({
    status,
    body: JSON.stringify(envelope(code, status, message, path, data)),
    headers,
  });
  if (call.batch && call.procedures.length > MAX_BATCH_CALLS) {
    return answer(
      "BAD_REQUEST",
      400,
      `a batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${call.procedures.length}: split it into requests of ${MAX_BATCH_CALLS} calls or fewer`,
      { maxBatchCalls: MAX_BATCH_CALLS, batchCalls: call.procedures.length },
    );
  }
  if (request.method === "POST") {
    const type = request.header("content-type");
    if ((type ?? "").split(";", 1)[0]!.trim().toLowerCase() !== "application/json") {
      return answer(
        "UNSUPPORTED_MEDIA_TYPE",
        415,
        `a tRPC call's body must be JSON, sent with content-type: application/json; this request's content-type is ${type === null ? "missing" : JSON.stringify(type)}`,
      );
    }
  }
  if (!carriesCredentials(request) && serverEnv().TINKERLAB_AUTH !== "local") {
    const limited = signedOutRefusal(request.header(CLIENT_IP_HEADER), call.procedures.length);
    if (limited) return answer("TOO_MANY_REQUESTS", 429, limited.message, { retryAfterS: limited.retryAfterS }, { "retry-after": String(limited.retryAfterS) });
  }
  return null;
}

/**
 * Whether a request carries anything that may name a caller (a session cookie, an API key, a share token, the
 * worker token): only tRPC's context can tell who that is. A request with none is a signed-out caller's.
 */
function carriesCredentials(request: RequestHead): boolean {
  return (
    request.header("authorization") !== null ||
    request.header(SHARE_HEADER) !== null ||
    request.header(WORKER_TOKEN_HEADER) !== null ||
    (request.header("cookie") ?? "").includes(SESSION_COOKIE) ||
    // A live stream's share token travels in its query (an EventSource sets no headers).
    /[?&]connectionParams=/.test(request.url)
  );
}

const admitted = new WeakSet<IncomingMessage>();

/**
 * The web server's gate, which every request passes before anything else sees it. It writes the client's address
 * as the socket sees it into CLIENT_IP_HEADER, replacing any value the client sent (rate limits and sign-in's count
 * by it, and a header a client writes itself would let it dodge them). A tRPC request `refusalOf` refuses is
 * answered here. Then its body is held to its limit before anything reads it. True: the request may go on now (no
 * body, or a Content-Length within the limit, which Node's parser never lets a body exceed). False: the gate has
 * answered it (413), or holds its chunked body until it has all arrived and then calls `resume(req, res)`, where
 * this returns true. A declared length over the limit is answered at once, before any of the body is read; a
 * chunked body is counted as it arrives and answered the moment it passes the limit, holding at most the limit in
 * memory. After a 413 the connection is closed, so the rest of the body is never read.
 */
export function admitRequest(req: IncomingMessage, res: ServerResponse, resume: (req: IncomingMessage, res: ServerResponse) => void): boolean {
  req.headers[CLIENT_IP_HEADER] = req.socket.remoteAddress ?? "unknown";
  if (admitted.has(req)) return true;
  // A model file's upload streams to disk under its own cap (server/base-uploads.ts); it is never held here.
  if (req.method === "PUT" && /^\/api\/bases\/[^/]+\/files\/[^/?]+$/.test(req.url?.split("?")[0] ?? "")) return true;
  const declared = req.headers["content-length"];
  const chunked = req.headers["transfer-encoding"] !== undefined;
  const call = trpcCallOf(req.url);
  const refusal = call && refusalOf(call, { method: req.method, url: req.url ?? "", header: (name) => headerOf(req, name) });
  if (refusal) {
    send(res, refusal, { close: chunked || (declared !== undefined && declared !== "0") });
    return false;
  }
  if (!chunked && (declared === undefined || declared === "0")) return true;
  const allowance = requestLimit(call?.procedures ?? null, { worker: isWorkerToken(req.headers[WORKER_TOKEN_HEADER]) });
  if (!chunked) {
    if (!(Number(declared) > allowance.bytes)) return true;
    tooLarge(res, payloadTooLarge(call, allowance, { declared: Number(declared) }));
    return false;
  }

  // Node's HTTP parser hands each piece of the body to req.push; until the whole body is in, the pieces wait here
  // (nothing downstream has seen the request yet), then go on to req in order.
  const push = req.push;
  const held: Buffer[] = [];
  let received = 0;
  let settled = false;
  req.push = ((chunk: Buffer | null, encoding?: BufferEncoding) => {
    if (settled) return false;
    if (chunk === null) {
      settled = true;
      req.push = push;
      for (const piece of held.splice(0)) push.call(req, piece);
      push.call(req, null, encoding);
      admitted.add(req);
      // Out of the parser's callback: Next.js starts on the request as on any other.
      process.nextTick(resume, req, res);
      return false;
    }
    received += chunk.length;
    if (received > allowance.bytes) {
      settled = true;
      held.length = 0;
      tooLarge(res, payloadTooLarge(call, allowance, {}));
      return false; // the parser stops reading the socket
    }
    held.push(chunk);
    return true;
  }) as typeof req.push;
  // A client that goes away mid-body: drop what was held; the request never reaches Next.js.
  req.once("close", () => {
    if (!settled) (settled = true), (held.length = 0);
  });
  return false;
}

function headerOf(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name];
  return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
}

/** Answers a refusal; `close`: the request's body has not been read, so the connection ends with the answer. */
function send(res: ServerResponse, refusal: Refusal, options: { close: boolean }) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res
    .writeHead(refusal.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(refusal.body),
      ...refusal.headers,
      ...(options.close ? { connection: "close" } : {}),
    })
    .end(refusal.body);
}

/** A 413: the rest of the body is never read, so the connection ends with the answer. */
function tooLarge(res: ServerResponse, body: string) {
  send(res, { status: 413, body, headers: {} }, { close: true });
}
/**
 * The same refusals and limits for a request that reaches the tRPC route without the web server's gate (`next dev`,
 * `next start`; behind the gate they cost a comparison or two again): `refusalOf`'s, then a Content-Length over the
 * limit is answered 413 at once; a body without one is read, counting, up to the limit and passed on as a new
 * request (413 as soon as it passes). Returns the request to handle, or the refusal.
 */
export async function holdToRequestLimit(req: Request): Promise<Request | Response> {
  const url = new URL(req.url);
  const call = trpcCallOf(url.pathname + url.search);
  const refusal = call && refusalOf(call, { method: req.method, url: url.pathname + url.search, header: (name) => req.headers.get(name) });
  if (refusal) return new Response(refusal.body, { status: refusal.status, headers: { "content-type": "application/json", ...refusal.headers } });
  if (req.method === "GET" || req.method === "HEAD" || req.body === null) return req;
  const allowance = requestLimit(call?.procedures ?? null, { worker: isWorkerToken(req.headers.get(WORKER_TOKEN_HEADER)) });
  const tooLarge = (size: { declared?: number }) =>
    new Response(payloadTooLarge(call, allowance, size), { status: 413, headers: { "content-type": "application/json" } });
  const declared = req.headers.get("content-length");
  if (declared !== null) return Number(declared) > allowance.bytes ? tooLarge({ declared: Number(declared) }) : req;

  const reader = req.body.getReader();
  const pieces: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > allowance.bytes) {
      await reader.cancel().catch(() => {});
      return tooLarge({});
    }
    pieces.push(value);
  }
  const body = new Uint8Array(received);
  let at = 0;
  for (const piece of pieces) body.set(piece, at), (at += piece.byteLength);
  return new Request(req.url, { method: req.method, headers: req.headers, body, signal: req.signal });
}
