import { eq, sql } from "drizzle-orm";
import { workers } from "../../db";
import { serverEnv } from "../../env";
import { createTRPCRouter, publicProcedure } from "../trpc";
import type { Context } from "../trpc";

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
    training: {
      requested: serverEnv().TINKERLAB_BACKEND,
      /** The backends the live workers train with. */
      workers: await ctx.db.select({ id: workers.id, hostname: workers.hostname, backend: workers.backend }).from(workers).where(eq(workers.status, "alive")),
    },
  };
}

export const healthRouter = createTRPCRouter({
  check: publicProcedure.query(({ ctx }) => checkHealth(ctx)),
});
