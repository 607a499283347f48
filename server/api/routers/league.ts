/** A league run's table: its members' Elo with intervals, records, and the learner's score against each over training. */
import { z } from "zod";
import { leagueOfRun } from "../../runs";
import { createTRPCRouter, sharedRunProcedure } from "../trpc";

export const leagueRouter = createTRPCRouter({
  /** As of the run's newest checkpoint that saved its league; null when none did (not a league run, or none yet). */
  ofRun: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1).max(200) }))
    .query(({ ctx, input }) => leagueOfRun(ctx.db, input.runId)),
});
