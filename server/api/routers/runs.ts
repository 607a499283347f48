import { TRPCError } from "@trpc/server";
import { and, desc, eq, ilike, inArray, lt, or, type SQL } from "drizzle-orm";
import { z } from "zod";
import { experiments, runs, runStatus } from "../../db/schema";
import { createTRPCRouter, protectedProcedure } from "../trpc";

const runColumns = {
  id: runs.id,
  name: runs.name,
  status: runs.status,
  reason: runs.reason,
  experimentId: runs.experimentId,
  experimentName: experiments.name,
  experimentVersionId: runs.experimentVersionId,
  seed: runs.seed,
  step: runs.step,
  totalSteps: runs.totalSteps,
  createdAt: runs.createdAt,
  startedAt: runs.startedAt,
  finishedAt: runs.finishedAt,
};

export const runsRouter = createTRPCRouter({
  /** Runs, newest first, with optional filters; `cursor` is the createdAt of the last run of the previous page. */
  list: protectedProcedure
    .input(
      z
        .object({
          experimentId: z.string().optional(),
          status: z.array(z.enum(runStatus.enumValues)).optional(),
          search: z.string().trim().max(200).optional(),
          limit: z.number().int().min(1).max(200).default(50),
          cursor: z.date().optional(),
        })
        .default({ limit: 50 }),
    )
    .query(async ({ ctx, input }) => {
      const filters: SQL[] = [];
      if (input.experimentId) filters.push(eq(runs.experimentId, input.experimentId));
      if (input.status?.length) filters.push(inArray(runs.status, input.status));
      if (input.search) {
        const pattern = `%${input.search.replace(/[%_\\]/g, (c) => `\\${c}`)}%`;
        filters.push(or(ilike(runs.name, pattern), ilike(experiments.name, pattern), ilike(runs.id, pattern))!);
      }
      if (input.cursor) filters.push(lt(runs.createdAt, input.cursor));
      const items = await ctx.db
        .select(runColumns)
        .from(runs)
        .innerJoin(experiments, eq(experiments.id, runs.experimentId))
        .where(filters.length ? and(...filters) : undefined)
        .orderBy(desc(runs.createdAt))
        .limit(input.limit + 1);
      const nextCursor = items.length > input.limit ? items[input.limit - 1]!.createdAt : null;
      return { items: items.slice(0, input.limit), nextCursor };
    }),

  byId: protectedProcedure.input(z.object({ id: z.string().min(1) })).query(async ({ ctx, input }) => {
    const [run] = await ctx.db
      .select({ ...runColumns, config: runs.config })
      .from(runs)
      .innerJoin(experiments, eq(experiments.id, runs.experimentId))
      .where(eq(runs.id, input.id))
      .limit(1);
    if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${input.id}'` });
    return run;
  }),
});
