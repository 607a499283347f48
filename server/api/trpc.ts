/**
 * The tRPC setup: the request context, the error formatter and the base procedures. Routers live in ./routers,
 * one per domain, and are merged in ./root.ts.
 */
import { randomBytes } from "node:crypto";
import { initTRPC, TRPCError } from "@trpc/server";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import superjson from "superjson";
import { z, ZodError } from "zod";
import { accountsFor } from "../auth/accounts";
import { userForApiKey, type User } from "../auth/api-keys";
import { getDatabase, LOCAL_USER, type Database, type DatabaseHandle } from "../db";
import { serverEnv } from "../env";

export type AuthMode = "local" | "apikey" | "team";

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
  if (mode === "local") return { user: { ...LOCAL_USER } };
  if (mode === "team") return { user: await sessionUser(db, headers) };
  return { user: null };
}

/** The signed-in person of a team server's request (its session cookie), or null. */
async function sessionUser(db: Database, headers: Headers): Promise<User | null> {
  const env = serverEnv();
  const accounts = await accountsFor(db, { secret: env.TINKERLAB_AUTH_SECRET, host: env.HOST, port: env.PORT });
  // disableRefresh: a server-side call cannot renew the cookie; the browser's own get-session call does both.
  const session = await accounts.api.getSession({ headers, query: { disableRefresh: true } });
  return session ? { id: session.user.id, name: session.user.name, email: session.user.email } : null;
}

/** A short id for a failure, which the client sees in place of its details and the server's log shows with them. */
export function newErrorId(): string {
  return `err_${randomBytes(4).toString("hex")}`;
}

const internalErrorIds = new WeakMap<TRPCError, string>();

/**
 * The id of an internal error, logged once with the procedure and the whole error (its cause, SQL, stack) the first
 * time it is asked for: the error formatter and the route's onError both ask, and both get the same id.
 */
export function internalErrorId(error: TRPCError, path: string | undefined): string {
  let id = internalErrorIds.get(error);
  if (id === undefined) {
    id = newErrorId();
    internalErrorIds.set(error, id);
    console.error(`tRPC ${path ?? "?"} failed (${id}):`, error);
  }
  return id;
}

const t = initTRPC.context<Context>().create({
  transformer: superjson,
  // Live streams send a ping every 5 s so proxies keep them open; a client hearing nothing for 15 s reconnects.
  sse: { ping: { enabled: true, intervalMs: 5000 }, client: { reconnectAfterInactivityMs: 15_000 } },
  /**
   * What a client hears of an error: never a stack; for an internal error (anything the code did not throw as a
   * TRPCError of another code: a failed SQL statement, a bug) a generic message with an id to find it in the log,
   * since its own message may hold SQL with its parameters, paths or other users' data. Other codes say what the
   * caller can fix, and pass as they are.
   */
  errorFormatter({ shape, error, path }) {
    const { stack: _stack, ...data } = shape.data;
    if (error.code === "INTERNAL_SERVER_ERROR") {
      const errorId = internalErrorId(error, path);
      return {
        ...shape,
        message: `The server failed to answer this request (error ${errorId}); its log has the details under that id. Try again, and report the id if it keeps failing.`,
        data: { ...data, zodError: null, errorId },
      };
    }
    return { ...shape, data: { ...data, zodError: error.cause instanceof ZodError ? z.flattenError(error.cause) : null, errorId: null } };
  },
});

export const createCallerFactory = t.createCallerFactory;
export const createTRPCRouter = t.router;

/** Procedures whose text inputs are made storable rather than refused (see `storableInput`). */
const REPLACED = /^worker\./;

/**
 * PostgreSQL stores no NUL character (U+0000) in text or jsonb, nor a lone UTF-16 surrogate in jsonb, so either in
 * an input would fail its statement. Every procedure refuses them up front, naming the field (BAD_REQUEST), except
 * the worker API's: a worker reports what an environment wrote (observations, actions, renders, error messages),
 * where such characters may legitimately occur and must not fail the run, so there each becomes U+FFFD (the
 * replacement character), as server/jobs/reports.ts does for database workers' reports.
 */
const storableInput = t.middleware(async ({ path, getRawInput, next }) => {
  const input = await getRawInput();
  if (REPLACED.test(path)) makeStorable(input);
  else {
    const found = findUnstorable(input);
    if (found) throw new TRPCError({ code: "BAD_REQUEST", message: `${found.path}: ${found.problem}; remove them.` });
  }
  return next();
});

type UnicodeString = string & { isWellFormed(): boolean; toWellFormed(): string };

/** What PostgreSQL would refuse in `text`, or null. */
function problemOf(text: string): string | null {
  if (text.includes("\0")) return "NUL characters (\\u0000) are not accepted";
  if (!(text as UnicodeString).isWellFormed()) return "lone UTF-16 surrogates (text that is not valid Unicode) are not accepted";
  return null;
}

const storable = (text: string) => (text.replaceAll("\0", "\uFFFD") as UnicodeString).toWellFormed();

/** Where a value sits in an input: its parent and the key or index that leads to it. */
type Frame = { value: unknown; parent: Frame | null; step: string | number | null; isKey?: boolean };

/**
 * The first string or object key PostgreSQL would refuse, in document order, and where it is: `files["environment.ts"]`,
 * `config.agent.name`, `rollouts[3].prompt`, `config["a\\u0000b"] (a key)`; null when there is none. Walks arrays,
 * plain objects, Maps and Sets without recursion, since an input may nest deeply.
 */
export function findUnstorable(input: unknown): { path: string; problem: string } | null {
  const stack: Frame[] = [{ value: input, parent: null, step: null }];
  const found = (frame: Frame, problem: string) => ({ path: pathOf(frame), problem });
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const { value } = frame;
    if (typeof value === "string") {
      const problem = problemOf(value);
      if (problem) return found(frame, problem);
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    const children: Frame[] = [];
    if (Array.isArray(value) || value instanceof Set) {
      let i = 0;
      for (const item of value) children.push({ value: item, parent: frame, step: i++ });
    } else if (value instanceof Map) {
      for (const [key, item] of value) {
        const problem = typeof key === "string" ? problemOf(key) : null;
        if (problem) return found({ value: key, parent: frame, step: key, isKey: true }, problem);
        children.push({ value: key, parent: frame, step: String(key) }, { value: item, parent: frame, step: String(key) });
      }
    } else if (isPlainObject(value)) {
      for (const [key, item] of Object.entries(value)) {
        const problem = problemOf(key);
        if (problem) return found({ value: key, parent: frame, step: key, isKey: true }, problem);
        children.push({ value: item, parent: frame, step: key });
      }
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return null;
}

function pathOf(frame: Frame): string {
  const steps: (string | number)[] = [];
  for (let at: Frame | null = frame; at !== null && at.step !== null; at = at.parent) steps.push(at.step);
  const path = steps
    .reverse()
    .map((step, i) => (typeof step === "number" ? `[${step}]` : /^[A-Za-z_$][\w$]*$/.test(step) ? `${i === 0 ? "" : "."}${step}` : `[${JSON.stringify(step)}]`))
    .join("");
  return `${path || "input"}${frame.isKey ? " (a key)" : ""}`;
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Replaces each NUL and lone surrogate in the strings and keys of a parsed input's arrays and plain objects (what is
 * stored as text and JSON) with U+FFFD, in place; returns how many strings and keys it changed.
 */
export function makeStorable(input: unknown): number {
  let changed = 0;
  const stack: unknown[] = [input];
  while (stack.length > 0) {
    const value = stack.pop();
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        if (typeof item === "string") {
          if (problemOf(item)) (value[i] = storable(item)), changed++;
        } else if (item !== null && typeof item === "object") stack.push(item);
      }
    } else if (value !== null && typeof value === "object" && isPlainObject(value)) {
      for (let key of Object.keys(value)) {
        const item = value[key];
        if (problemOf(key)) {
          delete value[key];
          key = storable(key);
          value[key] = item;
          changed++;
        }
        if (typeof item === "string") {
          if (problemOf(item)) (value[key] = storable(item)), changed++;
        } else if (item !== null && typeof item === "object") stack.push(item);
      }
    }
  }
  return changed;
}

/**
 * An error thrown with a `code` naming a tRPC error is a refusal meant for the caller as it is (server/jobs'
 * WorkerConflictError and RunStateError: "no longer assigned to this worker", which a worker acts on): it answers
 * with that code and its message, not as an internal error, even where no router converted it.
 */
const refusalsKeepTheirCode = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok && result.error.code === "INTERNAL_SERVER_ERROR") {
    const cause = result.error.cause as (Error & { code?: unknown }) | undefined;
    const code = cause?.code;
    if (typeof code === "string" && code !== "INTERNAL_SERVER_ERROR" && Object.hasOwn(TRPC_ERROR_CODES_BY_KEY, code)) {
      throw new TRPCError({ code: code as TRPC_ERROR_CODE_KEY, message: cause!.message, cause });
    }
  }
  return result;
});

/**
 * Every procedure: text PostgreSQL cannot store is refused (or, from workers, replaced) before anything reads it,
 * and refusals keep their code.
 */
export const publicProcedure = t.procedure.use(refusalsKeepTheirCode).use(storableInput);

/** A procedure that needs a signed-in user; `ctx.user` is non-null inside. */
export const protectedProcedure = publicProcedure.use(({ ctx, next }) => {
  if (!ctx.user) {
    throw new TRPCError({
      code: "UNAUTHORIZED",
      message: ctx.rejectedApiKey
        ? "The API key in the Authorization header is unknown or revoked. Create a new key and send it as 'Authorization: Bearer tl_…'."
        : serverEnv().TINKERLAB_AUTH === "team"
          ? "Sign in required: sign in at /sign-in, or send an API key as 'Authorization: Bearer tl_…'."
          : "Sign in required: send an API key as 'Authorization: Bearer tl_…'.",
    });
  }
  return next({ ctx: { ...ctx, user: ctx.user } });
});
