/**
 * The tRPC setup: the request context, the error formatter and the base procedures. Routers live in ./routers,
 * one per domain, and are merged in ./root.ts.
 */
import { initTRPC, TRPCError } from "@trpc/server";
import superjson from "superjson";
import { z, ZodError } from "zod";
import { userForApiKey, type User } from "../auth/api-keys";
import { getDatabase, LOCAL_USER, type Database, type DatabaseHandle } from "../db";
import { serverEnv } from "../env";

export type AuthMode = "local" | "apikey";

type ContextInner = {
  database: Pick<DatabaseHandle, "db" | "kind" | "location" | "migration">;
  /** The signed-in user; null when the request carries no (valid) credentials. */
  user: User | null;
  /** Set when the request carried an API key that matched no user, so the error can say so. */
  rejectedApiKey?: boolean;
  /** The worker token a worker process sent, if any (checked by the worker router). */
  workerToken?: string;
};

/** The context without Next.js: tests call this directly with their own database. */
export function createContextInner(opts: ContextInner) {
  return { ...opts, db: opts.database.db as Database };
}

export type Context = ReturnType<typeof createContextInner>;

/** The context of an HTTP request: the process's database and the user its headers name. */
export async function createTRPCContext(opts: { headers: Headers }): Promise<Context> {
  const database = await getDatabase();
  const workerToken = opts.headers.get("x-tinkerlab-worker-token") ?? undefined;
  return createContextInner({ database, workerToken, ...(await authenticate(database.db, opts.headers, serverEnv().TINKERLAB_AUTH)) });
}

export async function authenticate(db: Database, headers: Headers, mode: AuthMode): Promise<{ user: User | null; rejectedApiKey?: boolean }> {
  const header = headers.get("authorization");
  const key = header?.match(/^Bearer\s+(\S+)$/i)?.[1];
  if (key) {
    const user = await userForApiKey(db, key);
    return user ? { user } : { user: null, rejectedApiKey: true };
  }
  return { user: mode === "local" ? { ...LOCAL_USER } : null };
}

const t = initTRPC.context<Context>().create({
  transformer: superjson,
  // Live streams send a ping every 5 s so proxies keep them open; a client hearing nothing for 15 s reconnects.
  sse: { ping: { enabled: true, intervalMs: 5000 }, client: { reconnectAfterInactivityMs: 15_000 } },
  errorFormatter({ shape, error }) {
    return {
      ...shape,
      data: {
        ...shape.data,
        zodError: error.cause instanceof ZodError ? z.flattenError(error.cause) : null,
      },
    };
  },
});

export const createCallerFactory = t.createCallerFactory;
export const createTRPCRouter = t.router;

export const publicProcedure = t.procedure;

/** A procedure that needs a signed-in user; `ctx.user` is non-null inside. */
export const protectedProcedure = t.procedure.use(({ ctx, next }) => {
  if (!ctx.user) {
    throw new TRPCError({
      code: "UNAUTHORIZED",
      message: ctx.rejectedApiKey
        ? "The API key in the Authorization header is unknown or revoked. Create a new key and send it as 'Authorization: Bearer tl_…'."
        : "Sign in required: send an API key as 'Authorization: Bearer tl_…'.",
    });
  }
  return next({ ctx: { ...ctx, user: ctx.user } });
});
