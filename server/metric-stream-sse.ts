/**
 * `GET /api/trpc/runs.metricStream` served straight from the run's feed (server/metric-feed.ts), in the wire format
 * of tRPC's server-sent events, so the browser's tRPC client (httpSubscriptionLink) reads it as the subscription it
 * asked for. tRPC's own producer serialises every event once per subscriber and writes it in four pieces; here an
 * event is serialised once and the same bytes go to every viewer in one write. The runs.metricStream procedure
 * remains for in-process callers and gives the same events.
 */
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import superjson from "superjson";
import { z } from "zod";
import { createTRPCContext } from "./api/trpc";
import { metricStreamInput, runFeed, RunNotFoundError, type FeedFrame } from "./metric-feed";

const PATH = "runs.metricStream";
const encoder = new TextEncoder();
const PING = encoder.encode("event: ping\ndata: \n\n");
const RETURN = encoder.encode("event: return\ndata: \n\n");
/** What the client hears in the connected event: reconnect after 15 s without a byte (pings come every 5 s). */
const CONNECTED = encoder.encode(`event: connected\ndata: ${JSON.stringify({ reconnectAfterInactivityMs: 15_000 })}\n\n`);
const PING_MS = 5000;
/** A viewer this many events behind (a stalled connection) is cut off; its client reconnects and resumes. */
const MAX_BACKLOG = 2000;

const HTTP_STATUS: Partial<Record<TRPC_ERROR_CODE_KEY, number>> = { BAD_REQUEST: 400, UNAUTHORIZED: 401, NOT_FOUND: 404, INTERNAL_SERVER_ERROR: 500 };

function errorEvent(code: TRPC_ERROR_CODE_KEY, message: string): Uint8Array {
  const shape = { message, code: TRPC_ERROR_CODES_BY_KEY[code], data: { code, httpStatus: HTTP_STATUS[code] ?? 500, path: PATH, zodError: null } };
  return encoder.encode(`event: serialized-error\ndata: ${JSON.stringify(superjson.serialize(shape))}\n\n`);
}

const headers = { "content-type": "text/event-stream", "cache-control": "no-cache, no-transform", connection: "keep-alive", "x-accel-buffering": "no" };

/** One SSE response that sends `first` (an error) and ends. */
const single = (bytes: Uint8Array) => new Response(new Blob([CONNECTED, bytes] as BlobPart[]).stream(), { headers });

export async function metricStreamResponse(request: Request): Promise<Response> {
  const url = new URL(request.url);
  let input: z.infer<typeof metricStreamInput>;
  try {
    const raw = url.searchParams.get("input");
    const parsed = metricStreamInput.safeParse(raw === null ? undefined : superjson.deserialize(JSON.parse(raw)));
    if (!parsed.success) return single(errorEvent("BAD_REQUEST", `input: ${z.prettifyError(parsed.error)} (expected {"json":{"runId":"run_…","lastEventId"?: "<sequence number>"}})`));
    input = parsed.data;
  } catch {
    return single(errorEvent("BAD_REQUEST", 'input: not JSON; expected ?input={"json":{"runId":"run_…"}} (URL-encoded)'));
  }
  const context = await createTRPCContext({ headers: request.headers });
  if (!context.user) {
    return single(errorEvent("UNAUTHORIZED", context.rejectedApiKey ? "The API key in the Authorization header is unknown or revoked." : "Sign in required: send an API key as 'Authorization: Bearer tl_…'."));
  }
  const lastEventId = request.headers.get("last-event-id") ?? url.searchParams.get("lastEventId") ?? url.searchParams.get("Last-Event-Id") ?? input.lastEventId ?? null;
  const after = lastEventId === null ? 0 : Number(lastEventId);
  if (!Number.isSafeInteger(after) || after < 0) return single(errorEvent("BAD_REQUEST", `lastEventId: '${lastEventId}' is not an event id of this stream (a sequence number, 0 or more)`));

  const feed = runFeed(context.db, input.runId);
  let cleanup = () => {};
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        let open = true;
        let lastWrite = Date.now();
        const write = (bytes: Uint8Array) => {
          if (!open) return;
          if ((controller.desiredSize ?? 0) < -MAX_BACKLOG) return close();
          controller.enqueue(bytes);
          lastWrite = Date.now();
        };
        const close = () => {
          if (!open) return;
          open = false;
          cleanup();
          try {
            controller.close();
          } catch {
            // already closed by the client
          }
        };
        controller.enqueue(CONNECTED);
        // A ping when nothing else was sent for a while, so proxies and the client's inactivity timer keep it open.
        const ping = setInterval(() => Date.now() - lastWrite >= PING_MS / 2 && write(PING), PING_MS / 2);
        const onAbort = () => close();
        request.signal.addEventListener("abort", onAbort, { once: true });
        const unsubscribe = feed.subscribe(
          {
            frame: (frame: FeedFrame) => write(frame.bytes()),
            end: () => (write(RETURN), close()),
            error: (error) => (write(errorEvent(error instanceof RunNotFoundError ? "NOT_FOUND" : "INTERNAL_SERVER_ERROR", error.message)), close()),
          },
          after,
        );
        cleanup = () => {
          clearInterval(ping);
          request.signal.removeEventListener("abort", onAbort);
          unsubscribe();
        };
      },
      cancel() {
        cleanup();
      },
    },
    { highWaterMark: 1 },
  );
  return new Response(stream, { headers });
}
