/**
 * How large a request each tRPC procedure accepts (docs/RUNTIME.md, "Request limits"), and the gate that holds
 * requests to it while their bodies stream in. The web server calls `admitRequestBody` before Next.js sees a
 * request; the Next.js route (`app/api/trpc/[trpc]/route.ts`) calls `holdToRequestLimit`, so the same limits hold
 * when Next.js runs on its own (`next dev`). A request over its limit is answered 413 with a tRPC error envelope
 * (`PAYLOAD_TOO_LARGE`) naming the procedure, the limit and what to do; nothing of it reaches a procedure.
 */
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { TRPC_ERROR_CODES_BY_KEY } from "@trpc/server/rpc";
import superjson from "superjson";
import { MAX_DATASET_BYTES } from "../datasets";
import { WORKER_TOKEN_HEADER } from "../worker-protocol";

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

/**
 * The 413's body: tRPC's error envelope (as superjson sends it), one per call of a batch, so a tRPC client throws a
 * TRPCClientError whose message says what happened and whose `data` holds the procedure and the limit.
 */
function payloadTooLarge(call: TrpcCall | null, allowance: Allowance, size: { declared?: number }): string {
  const limit = `${formatBytes(allowance.bytes)} (${allowance.bytes} bytes)`;
  const what = allowance.procedure ?? (call && call.procedures.length > 1 ? `a batch of ${call.procedures.join(", ")}` : "this endpoint");
  const message =
    size.declared !== undefined
      ? `This request is ${formatBytes(size.declared)} (${size.declared} bytes); ${what} accepts at most ${limit} in one request: ${allowance.advice}.`
      : `This request passed ${limit}, the most ${what} accepts in one request: ${allowance.advice}.`;
  const envelope = (path: string | null) => ({
    error: superjson.serialize({
      message,
      code: TRPC_ERROR_CODES_BY_KEY.PAYLOAD_TOO_LARGE,
      data: {
        code: "PAYLOAD_TOO_LARGE",
        httpStatus: 413,
        path,
        limitBytes: allowance.bytes,
        limit: formatBytes(allowance.bytes),
        ...(size.declared !== undefined ? { requestBytes: size.declared } : {}),
      },
    }),
  });
  return JSON.stringify(call?.batch ? call.procedures.map(envelope) : envelope(call?.procedures[0] ?? null));
}

const admitted = new WeakSet<IncomingMessage>();

/**
 * Holds a request's body to its limit before anything reads it. True: the request may go on now (no body, or a
 * Content-Length within the limit, which Node's parser never lets a body exceed). False: the gate has answered it
 * (413), or holds its chunked body until it has all arrived and then calls `resume(req, res)`, where this returns
 * true. A declared length over the limit is answered at once, before any of the body is read; a chunked body is
 * counted as it arrives and answered the moment it passes the limit, holding at most the limit in memory. After a
 * 413 the connection is closed, so the rest of the body is never read.
 */
export function admitRequestBody(req: IncomingMessage, res: ServerResponse, resume: (req: IncomingMessage, res: ServerResponse) => void): boolean {
  if (admitted.has(req)) return true;
  // A model file's upload streams to disk under its own cap (server/base-uploads.ts); it is never held here.
  if (req.method === "PUT" && /^\/api\/bases\/[^/]+\/files\/[^/?]+$/.test(req.url?.split("?")[0] ?? "")) return true;
  const declared = req.headers["content-length"];
  const chunked = req.headers["transfer-encoding"] !== undefined;
  if (!chunked && (declared === undefined || declared === "0")) return true;
  const call = trpcCallOf(req.url);
  const allowance = requestLimit(call?.procedures ?? null, { worker: isWorkerToken(req.headers[WORKER_TOKEN_HEADER]) });
  if (!chunked) {
    if (!(Number(declared) > allowance.bytes)) return true;
    refuse(res, payloadTooLarge(call, allowance, { declared: Number(declared) }));
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
      refuse(res, payloadTooLarge(call, allowance, {}));
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

function refuse(res: ServerResponse, body: string) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" }).end(body);
}

/**
 * The same limits for a request that reaches the tRPC route without the web server's gate (`next dev`, `next
 * start`): a Content-Length over the limit is answered 413 at once; a body without one is read, counting, up to the
 * limit and passed on as a new request (413 as soon as it passes). Returns the request to handle, or the 413.
 */
export async function holdToRequestLimit(req: Request): Promise<Request | Response> {
  if (req.method === "GET" || req.method === "HEAD" || req.body === null) return req;
  const url = new URL(req.url);
  const call = trpcCallOf(url.pathname + url.search);
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
