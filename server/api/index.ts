/**
 * The tRPC API (docs/ARCHITECTURE.md): the router of every procedure, the request context, request limits, and the
 * direct route the web server takes past Next.js for workers and remote sessions. Server components use the
 * second entry, `./rsc`; the browser imports only the `AppRouter` type.
 */
export { appRouter, type AppRouter, createCaller } from "./root";
export { type Context, createContextInner, createTRPCContext, internalErrorId } from "./trpc";
export { admitRequest, holdToRequestLimit, REQUEST_LIMITS } from "./limits";
export { RATE_LIMITS, rateLimitResponse, retryAfterHeaders, SIGNED_OUT_LIMIT } from "./rate-limits";
export { directProcedures, serveDirect } from "./direct";
export { answerOnce, IdempotencyError, IDEMPOTENCY_KEY_HEADER, idempotencyKeyOf } from "./idempotency";
export { setWorkerToken } from "./routers/worker";
export { checkHealth } from "./routers/health";
