/**
 * `GET /api/trpc/runs.metricStream` served straight from the run's feed (server/metrics/feed.ts), in the wire format
 * of tRPC's server-sent events, so the browser's tRPC client (httpSubscriptionLink) reads it as the subscription it
 * asked for. tRPC's own producer serialises every event once per subscriber and writes it in four pieces; here an
 * event is serialised once and the same bytes go to every viewer in one write. Two transports: the web server
 * writes to each socket itself (serveMetricStream), and the Next.js route answers a web Response when Next runs on
 * its own (metricStreamResponse); the same bytes either way. The runs.metricStream procedure remains for
 * in-process callers and gives the same events.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { TRPCError } from "@trpc/server";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import superjson from "superjson";
import { z } from "zod";
import { Access, authenticate, type Principal, signInMessage, watchRunAccess } from "../auth";
import { type Database, getDatabase } from "../db";
import { serverEnv } from "../env";
import { newErrorId } from "../error-ids";
import { metricStreamInput, runFeed, RunNotFoundError, type FeedFrame } from "./feed";

const PATH = "runs.metricStream";
const encoder = new TextEncoder();
const PING = encoder.encode("event: ping\ndata: \n\n");
const RETURN = encoder.encode("event: return\ndata: \n\n");
/** What the client hears in the connected event: reconnect after 15 s without a byte (pings come every 5 s). */
const CONNECTED = encoder.encode(`event: connected\ndata: ${JSON.stringify({ reconnectAfterInactivityMs: 15_000 })}\n\n`);
const PING_MS = 5000;
/** A viewer this far behind (a stalled connection) is cut off; its client reconnects and resumes. */
const MAX_BACKLOG_BYTES = 8 * 1024 * 1024;

const HTTP_STATUS: Partial<Record<TRPC_ERROR_CODE_KEY, number>> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  INTERNAL_SERVER_ERROR: 500,
};

function errorEvent(code: TRPC_ERROR_CODE_KEY, message: string): Uint8Array {
  const shape = { message, code: TRPC_ERROR_CODES_BY_KEY[code], data: { code, httpStatus: HTTP_STATUS[code] ?? 500, path: PATH, zodError: null } };
  return encoder.encode(`event: serialized-error\ndata: ${JSON.stringify(superjson.serialize(shape))}\n\n`);
}

const headers = { "content-type": "text/event-stream", "cache-control": "no-cache, no-transform", connection: "keep-alive", "x-accel-buffering": "no" };

/**
 * Where a stream request goes: a run's feed and the sequence number to continue after, with who opened it (its
 * right to the run is watched while the stream is open), or an error event to answer.
 */
type Opened = { feed: ReturnType<typeof runFeed>; after: number; db: Database; principal: Principal; runId: string } | { error: Uint8Array };

/** tRPC's `connectionParams` (what an EventSource sends in place of headers: a share link's token), or null. */
function connectionParamsOf(url: URL): Record<string, string> | null {
  try {
    const parsed: unknown = JSON.parse(url.searchParams.get("connectionParams") ?? "null");
    return parsed && typeof parsed === "object" ? (parsed as Record<string, string>) : null;
  } catch {
    return null;
  }
}

/** Checks a stream request (its input, credentials and last event id) and finds the run's feed. */
async function openStream(url: URL, requestHeaders: Headers): Promise<Opened> {
  let input: z.infer<typeof metricStreamInput>;
  try {
    const raw = url.searchParams.get("input");
    const parsed = metricStreamInput.safeParse(raw === null ? undefined : superjson.deserialize(JSON.parse(raw)));
    if (!parsed.success)
      return {
        error: errorEvent("BAD_REQUEST", `input: ${z.prettifyError(parsed.error)} (expected {"json":{"runId":"run_…","lastEventId"?: "<sequence number>"}})`),
      };
    input = parsed.data;
  } catch {
    return { error: errorEvent("BAD_REQUEST", 'input: not JSON; expected ?input={"json":{"runId":"run_…"}} (URL-encoded)') };
  }
  const { db } = await getDatabase();
  // A share link's token comes in tRPC's connectionParams here: an EventSource cannot set headers.
  const principal = await authenticate(db, requestHeaders, serverEnv().TINKERLAB_AUTH, connectionParamsOf(url)?.share);
  if (principal.kind === "anonymous") return { error: errorEvent("UNAUTHORIZED", signInMessage(principal)) };
  const access = new Access(db, principal);
  // The same check as the procedure's (a project member, or a link sharing this run); else as if there were no run.
  try {
    await access.require("viewer", { kind: "run", id: input.runId }, { shared: true });
  } catch (error) {
    if (!(error instanceof TRPCError)) throw error;
    return { error: errorEvent(error.code === "FORBIDDEN" ? "FORBIDDEN" : "NOT_FOUND", error.message) };
  }
  const lastEventId =
    requestHeaders.get("last-event-id") ?? url.searchParams.get("lastEventId") ?? url.searchParams.get("Last-Event-Id") ?? input.lastEventId ?? null;
  const after = lastEventId === null ? 0 : Number(lastEventId);
  if (!Number.isSafeInteger(after) || after < 0)
    return { error: errorEvent("BAD_REQUEST", `lastEventId: '${lastEventId}' is not an event id of this stream (a sequence number, 0 or more)`) };
  return { feed: runFeed(db, input.runId), after, db, principal, runId: input.runId };
}

/**
 * Sends the feed to one viewer after `after` through `out`, with pings while idle, until the run ends (return), it
 * fails (an error event), the viewer loses its right to the run (the error event a fresh open would get: its link,
 * key or session revoked, its membership removed) or it is cut off for falling too far behind. Returns the
 * function that stops it.
 */
function streamFeed(
  { feed, after, db, principal, runId }: Extract<Opened, { feed: unknown }>,
  out: { write(bytes: Uint8Array): void; backlog(): number; end(): void },
): () => void {
  let open = true;
  let lastWrite = Date.now();
  let unsubscribe = () => {};
  let unwatch = () => {};
  const write = (bytes: Uint8Array) => {
    if (!open) return;
    if (out.backlog() > MAX_BACKLOG_BYTES) return close();
    out.write(bytes);
    lastWrite = Date.now();
  };
  const stop = () => {
    if (!open) return;
    open = false;
    clearInterval(ping);
    unsubscribe();
    unwatch();
  };
  const close = () => {
    if (!open) return;
    stop();
    out.end();
  };
  // A ping when nothing else was sent for a while, so proxies and the client's inactivity timer keep it open.
  const ping = setInterval(() => Date.now() - lastWrite >= PING_MS / 2 && write(PING), PING_MS / 2);
  unsubscribe = feed.subscribe(
    {
      frame: (frame: FeedFrame) => write(frame.bytes()),
      end: () => (write(RETURN), close()),
      error: (error) => (write(error instanceof RunNotFoundError ? errorEvent("NOT_FOUND", error.message) : internalErrorEvent(error)), close()),
    },
    after,
  );
  // The feed may have ended the stream already (a finished run's history sent at once): then there is nothing to watch.
  if (open) unwatch = watchRunAccess(db, principal, runId, (error) => (write(errorEvent(error.code, error.message)), close()));
  return stop;
}

/** The stream as a web Response (the Next.js route). */
export async function metricStreamResponse(request: Request): Promise<Response> {
  const opened = await openStream(new URL(request.url), request.headers);
  if ("error" in opened) return new Response(new Blob([CONNECTED, opened.error] as BlobPart[]).stream(), { headers });
  let stop = () => {};
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(CONNECTED);
        const onAbort = () => stop();
        request.signal.addEventListener("abort", onAbort, { once: true });
        const stopFeed = streamFeed(opened, {
          write: (bytes) => controller.enqueue(bytes),
          backlog: () => -(controller.desiredSize ?? 0),
          end: () => {
            request.signal.removeEventListener("abort", onAbort);
            try {
              controller.close();
            } catch {
              // already closed by the client
            }
          },
        });
        stop = () => (request.signal.removeEventListener("abort", onAbort), stopFeed());
      },
      cancel() {
        stop();
      },
    },
    { highWaterMark: 0, size: (chunk) => chunk.byteLength },
  );
  return new Response(stream, { headers });
}

/** Whether a request is for the metric stream (which the web server serves itself, see serveMetricStream). */
export function isMetricStreamRequest(method: string | undefined, url: string | undefined): boolean {
  return method === "GET" && !!url && (url === `/api/trpc/${PATH}` || url.startsWith(`/api/trpc/${PATH}?`));
}

/**
 * The stream written straight to a Node response: the web server takes `GET /api/trpc/runs.metricStream` before
 * Next.js does, because each viewer's events would otherwise pass through a web ReadableStream and Next's pipe to
 * the socket, which cost the server about as much CPU per viewer and event as the write itself.
 */
export async function serveMetricStream(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const requestHeaders = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) requestHeaders.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  let opened: Opened;
  try {
    opened = await openStream(new URL(request.url ?? "/", "http://localhost"), requestHeaders);
  } catch (error) {
    opened = { error: internalErrorEvent(error) };
  }
  if (response.destroyed) return;
  response.writeHead(200, headers);
  response.write(CONNECTED);
  if ("error" in opened) {
    response.end(opened.error);
    return;
  }
  const stop = streamFeed(opened, {
    write: (bytes) => response.write(bytes),
    backlog: () => response.writableLength,
    end: () => response.end(),
  });
  response.once("close", stop);
}

/** An unexpected failure: the log gets the error under an id, the client only the id (never SQL, a stack or a path). */
function internalErrorEvent(error: unknown): Uint8Array {
  const errorId = newErrorId();
  console.error(`metric stream failed (${errorId}):`, error);
  return errorEvent("INTERNAL_SERVER_ERROR", `The server failed to stream this run (error ${errorId}); the server's log has the details under that id.`);
}
