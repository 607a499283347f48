import { z } from "zod";
import { schedulerOverview } from "../../jobs";
import { createTRPCRouter, protectedProcedure } from "../trpc";

export const schedulerRouter = createTRPCRouter({
  /**
   * Devices and what runs on each, the queue in the order the scheduler considers it with each job's estimated
   * start (the policy run forward in the simulator, see server/jobs/forecast.ts), and recent utilisation.
   */
  overview: protectedProcedure
    .input(
      z
        .object({
          windowMinutes: z
            .number()
            .int()
            .min(5)
            .max(24 * 60)
            .default(60),
        })
        .default({ windowMinutes: 60 }),
    )
    .query(async ({ ctx, input }) => schedulerOverview(ctx.db, { windowMinutes: input.windowMinutes, visibleProjects: await ctx.access.visibleProjects() })),
});
