/**
 * What a job may ask for at launch. An evaluation's episodes and temperature are bounded here, and the API
 * (server/api/routers/runs.ts) and the benchmarks read the same numbers.
 */

/** The largest evaluation `runs.evaluate` accepts. */
export const EVALUATION_LIMITS = { episodes: 10_000, temperature: 5 } as const;
