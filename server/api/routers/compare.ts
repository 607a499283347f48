/** The compare view's reads of several runs at once (server/runs/compare.ts). */
import { z } from "zod";
import { compareSeries, sourcesOfRuns } from "../../runs";
import { createTRPCRouter, sharedRunsProcedure } from "../trpc";

/** As many runs as the compare view draws. */
export const MAX_COMPARED_RUNS = 12;

const runIds = z
  .array(z.string().min(1).max(200))
  .min(1)
  .max(MAX_COMPARED_RUNS)
  .refine((ids) => new Set(ids).size === ids.length, { message: "each run may be named once" });

export const compareRouter = createTRPCRouter({
  /**
   * The series a set of panels draws, for every run at once: each named metric (with `time`, each point's seconds
   * since the run's start; with `tokens`, each run's tokens trained so far), each at most `maxPoints` points (a
   * min/max downsample beyond), with every metric name each run has.
   */
  series: sharedRunsProcedure("runIds", MAX_COMPARED_RUNS)
    .input(
      z.object({
        runIds,
        metrics: z.array(z.string().min(1).max(200)).max(32, "at most 32 metrics at once"),
        time: z
          .union([z.boolean(), z.array(z.string().min(1).max(200)).max(32)])
          .default(false)
          .describe("each point's seconds since its run's first metric point, for a wall-time axis: true for every metric, or the metrics that need them"),
        tokens: z.boolean().default(false).describe("each run's running total of train/tokens, for a tokens axis"),
        maxPoints: z.number().int().min(2).max(10_000).default(1_000),
      }),
    )
    .query(({ ctx, input }) => compareSeries(ctx.db, input)),

  /** The source files of each run's experiment version, each version once, for the source diff. */
  sources: sharedRunsProcedure("runIds", MAX_COMPARED_RUNS)
    .input(z.object({ runIds }))
    .query(({ ctx, input }) => sourcesOfRuns(ctx.db, input.runIds)),
});
