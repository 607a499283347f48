import { sql } from "drizzle-orm";
import { createTRPCRouter, publicProcedure } from "../trpc";
import type { Context } from "../trpc";
import { trainingBackendStatus } from "../../runtime/backend-status";

export async function checkHealth(ctx: Pick<Context, "db" | "database">) {
  const started = performance.now();
  await ctx.db.execute(sql`select 1`);
  return {
    status: "ok" as const,
    database: {
      kind: ctx.database.kind,
      location: ctx.database.location,
      migration: ctx.database.migration,
      latencyMs: Math.round((performance.now() - started) * 100) / 100,
    },
    training: trainingBackendStatus(),
  };
}

export const healthRouter = createTRPCRouter({
  check: publicProcedure.query(({ ctx }) => checkHealth(ctx)),
});
