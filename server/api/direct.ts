/**
 * The tRPC procedures the web server answers itself, before Next.js: a remote session's calls (`sessions.invoke`,
 * `sessions.invokeMany`) and every call of a worker (its heartbeat above all: a busy Next.js must not cost a lease). A session's request crosses
 * the server twice on its critical path (the client's request, the worker's exchange), and a worker's report lands
 * while the server should answer them; Next.js's routing of a request cost 6-25 ms of a 2-core machine each time.
 * Here each is the procedure itself, through tRPC's Node adapter: the same context (credentials read by
 * `createTRPCContext`), middleware (access rule, storable text, the worker token check), input schema, errors and
 * wire format as through the Next.js route (app/api/trpc/[trpc]/route.ts), which still answers them when Next.js
 * runs on its own, or sent in a batch with other procedures. The gate has refused what it refuses (a batch over
 * the cap among them) and held request bodies to their limits before this (limits.ts).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { nodeHTTPRequestHandler } from "@trpc/server/adapters/node-http";
import { trpcCallOf } from "./limits";
import { retryAfterHeaders } from "./rate-limits";
import { sessionsRouter } from "./routers/sessions";
import { workerRouter } from "./routers/worker";
import { createTRPCContext, createTRPCRouter, internalErrorId } from "./trpc";

/** The procedures answered here; a request naming any other goes to Next.js. */
const DIRECT_PROCEDURES = new Set([
  "sessions.invoke",
  "sessions.invokeMany",
  "worker.register",
  "worker.heartbeat",
  "worker.claim",
  "worker.report",
  "worker.checkpoint",
  "worker.setAside",
  "worker.finish",
  "worker.leave",
  "worker.sessionExchange",
]);

/** Only the routers of those procedures: paths resolve as in the app's router (server/api/root.ts). */
const directRouter = createTRPCRouter({ sessions: sessionsRouter, worker: workerRouter });

const DIRECT_ROUTE_HEADER = "x-tinkerlab-route";

/** The procedures of a request the web server answers itself (a POST naming only those), or null. */
export function directProcedures(method: string | undefined, url: string | undefined): string | null {
  if (method !== "POST") return null;
  const call = trpcCallOf(url);
  if (!call || call.procedures.length === 0 || !call.procedures.every((procedure) => DIRECT_PROCEDURES.has(procedure))) return null;
  return call.procedures.join(",");
}

/** Answers a request `directProcedures` named (`path`: its procedures, comma-separated). */
export function serveDirect(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  // Says which route answered, for the tests and for whoever reads a trace.
  res.setHeader(DIRECT_ROUTE_HEADER, "direct");
  return nodeHTTPRequestHandler({
    router: directRouter,
    req,
    res,
    path,
    createContext: () => createTRPCContext({ headers: headersOf(req) }),
    responseMeta: retryAfterHeaders,
    onError({ path, error }) {
      // Logged once, with the id the client was given in place of the details (server/api/trpc.ts's errorFormatter).
      if (error.code === "INTERNAL_SERVER_ERROR") internalErrorId(error, path);
    },
  });
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
