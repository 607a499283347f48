/**
 * Serving trained policies through OpenAI-compatible endpoints (docs/SERVING.md): the web server's routes for
 * `/v1/…` and the serving jobs' exchange (`./http.ts`), the hub of live jobs and waiting requests (`./hub.ts`), the
 * model names (`./models.ts`), the request bodies (`./requests.ts`) and constrained output (`./constraints.ts`).
 * `./protocol` is the second entry, for the worker's inference job: what the two sides say, without either.
 */
export { createServingRoutes, isServingRequest, SERVING_STATUS_PATH } from "./http";
export { type LiveServer, ServingHub } from "./hub";
export { ConstraintError, requestConstraint, schemaPattern } from "./constraints";
export { MAX_CHOICES, SERVING_EXCHANGE_PATH } from "./protocol";
