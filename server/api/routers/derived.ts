/** A run's derived runs: the evaluations and exports of its checkpoints, listed on its page; and a derived run's source. */
import { z } from "zod";
import { derivedRunsOf, sourceOfDerivedRun } from "../../runs";
import { createTRPCRouter, sharedRunProcedure } from "../trpc";

export const derivedRouter = createTRPCRouter({
  /**
   * The evaluations and exports started from `runId`'s checkpoints, newest first, with an evaluation's score and an
   * export's files; a share link's holder sees only those the link names.
   */
  ofRun: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1).max(200) }))
    .query(async ({ ctx, input }) => {
      const rows = await derivedRunsOf(ctx.db, input.runId);
      const readable = await Promise.all(rows.map((row) => ctx.access.mayReadRun(row.id)));
      return rows.filter((_, i) => readable[i]);
    }),

  /** The run an evaluation or export comes from (its checkpoint's run and step), or null: any other run, or one the caller may not read. */
  sourceOf: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1).max(200) }))
    .query(async ({ ctx, input }) => {
      const source = await sourceOfDerivedRun(ctx.db, input.runId);
      return source && (await ctx.access.mayReadRun(source.runId)) ? source : null;
    }),
});
