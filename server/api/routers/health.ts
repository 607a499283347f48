import { pingDatabase } from "../../db";
import { serverEnv } from "../../env";
import { liveWorkers } from "../../jobs";
import { createTRPCRouter, publicProcedure } from "../trpc";
import type { Context } from "../trpc";

/**
 * Whether the server and its database answer. Only a signed-in caller (any caller of a local server) hears the
 * details: the database's kind, location and migrations, and the workers' hostnames; anyone else, that it answers.
 */
export async function checkHealth(ctx: Pick<Context, "db" | "database" | "principal">) {
  const latencyMs = await pingDatabase(ctx.db);
  if (ctx.principal.kind === "anonymous" || ctx.principal.kind === "share") return { status: "ok" as const, database: { latencyMs } };
  return {
    status: "ok" as const,
    database: {
      kind: ctx.database.kind,
      location: ctx.database.location,
      migration: ctx.database.migration,
      latencyMs,
    },
    training: {
      requested: serverEnv().TINKERLAB_BACKEND,
      /** The backends the live workers train with. */
      workers: await liveWorkers(ctx.db),
    },
  };
}

export const healthRouter = createTRPCRouter({
  check: publicProcedure.query(({ ctx }) => checkHealth(ctx)),
});
