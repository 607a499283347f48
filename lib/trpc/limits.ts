/**
 * The most calls one request to the tRPC endpoint may carry (`/api/trpc/a,b,…?batch=1`). The server refuses a longer
 * batch with 400 before it parses or authenticates anything of it (server/api/limits.ts); our own clients (the
 * browser's httpBatchLink, workers) split what they send at this size, so only a hand-made request meets the refusal.
 */
export const MAX_BATCH_CALLS = 50;

/**
 * The largest evaluation `runs.evaluate` accepts (its episodes and sampling temperature); the run page's Evaluate
 * form offers the same range.
 */
export const EVALUATION_LIMITS = { episodes: 10_000, temperature: 5 } as const;
