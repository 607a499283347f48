/**
 * The tRPC setup: the request context, the error formatter and the base procedures. Routers live in ./routers,
 * one per domain, and are merged in ./root.ts.
 */
import { initTRPC, TRPCError } from "@trpc/server";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import superjson from "superjson";
import { z, ZodError } from "zod";
import { describeConfigError } from "@/lib/sdk/config-errors";
import { Access, authenticate, CLIENT_IP_HEADER, type ObjectKind, type Principal, signInMessage } from "../auth";
import { getDatabase, type Database, type DatabaseHandle, type ProjectRole } from "../db";
import { newErrorId } from "../error-ids";
import { WORKER_TOKEN_HEADER } from "../worker-protocol";
import { serverEnv } from "../env";
import { isWorkerToken } from "./limits";
import { type Caller, callerOf, chargeCall, retryAfterOf } from "./rate-limits";

type ContextInner = {
  database: Pick<DatabaseHandle, "db" | "kind" | "location" | "migration">;
  /** Who is asking (see server/auth/access.ts). */
  principal: Principal;
  /** The worker token a worker process sent, if any (checked by the worker router). */
  workerToken?: string;
  /** Whom the calls count against for rate limits (./rate-limits.ts); none: not limited (in-process callers, tests). */
  caller?: Caller;
};

/** The context without Next.js: tests call this directly with their own database. */
export function createContextInner(opts: ContextInner) {
  const db = opts.database.db as Database;
  const access = new Access(db, opts.principal);
  return { ...opts, db, access, user: access.user };
}

export type Context = ReturnType<typeof createContextInner>;

/**
 * The context of an HTTP request: the process's database, who its headers name and whom its calls count against. A
 * share link's token may come as a header or, for a live stream (an EventSource cannot set headers), in tRPC's
 * `connectionParams`. tRPC makes one context per request, so a batch's calls are authenticated once, together.
 */
export async function createTRPCContext(opts: { headers: Headers; connectionParams?: Record<string, string> | null }): Promise<Context> {
  const database = await getDatabase();
  const workerToken = opts.headers.get(WORKER_TOKEN_HEADER) ?? undefined;
  const principal = await authenticate(database.db, opts.headers, serverEnv().TINKERLAB_AUTH, opts.connectionParams?.share);
  const caller = callerOf(principal, opts.headers.get(CLIENT_IP_HEADER), { worker: isWorkerToken(workerToken) });
  return createContextInner({ database, workerToken, principal, caller });
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

/** How deep a call's input may nest arrays and objects (`[[…]]`: 2 levels); docs/RUNTIME.md, "Request limits". */
export const MAX_INPUT_DEPTH = 200;

/**
 * Reads a call's input as a client sent it: superjson's `{"json": …, "meta"?: …}`. Whatever else a request holds is
 * refused in words that say what is accepted, before superjson's walk of it, which recurses once per level (a
 * 10,000-deep input overflowed the stack) and reports a wrong shape in its own internals' words.
 */
function deserializeInput(payload: unknown): unknown {
  const shape = `the input must be an object, {"json": <input>} as superjson (tRPC's transformer here) sends it`;
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
    const got = payload === null ? "null" : Array.isArray(payload) ? "an array" : `a ${typeof payload}`;
    throw new TRPCError({ code: "BAD_REQUEST", message: `${shape}; got ${got}` });
  }
  const stray = Object.keys(payload).filter((key) => key !== "json" && key !== "meta");
  if (stray.length > 0) {
    const named = stray.slice(0, 5).map((key) => JSON.stringify(key));
    throw new TRPCError({ code: "BAD_REQUEST", message: `${shape}; got one with ${named.join(", ")}${stray.length > 5 ? ", …" : ""}` });
  }
  if (nestedDeeperThan(payload, MAX_INPUT_DEPTH + 1)) {
    throw new TRPCError({ code: "BAD_REQUEST", message: `JSON nested deeper than ${MAX_INPUT_DEPTH} levels is not accepted` });
  }
  try {
    return superjson.deserialize(payload as Parameters<typeof superjson.deserialize>[0]);
  } catch (cause) {
    throw new TRPCError({
      code: "BAD_REQUEST",
      message: `the input's "meta" does not fit its "json": send what superjson.serialize makes of the input (plain JSON, Dates, Maps, Sets, BigInts, undefined)`,
      cause,
    });
  }
}

/** Whether `value` nests arrays and objects more than `limit` levels deep; found without recursion. */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [0];
  for (let n = 1; n > 0; ) {
    n--;
    const at = values[n];
    const depth = depths[n]! + 1;
    if (at === null || typeof at !== "object") continue;
    if (depth > limit) return true;
    const items = Array.isArray(at) ? at : Object.values(at);
    for (let i = 0; i < items.length; i++) {
      const item: unknown = items[i];
      if (item !== null && typeof item === "object") (values[n] = item), (depths[n] = depth), n++;
    }
  }
  return false;
}

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    // superjson both ways; what a client sends is checked first (`deserializeInput`).
    transformer: { input: { serialize: superjson.serialize, deserialize: deserializeInput }, output: superjson },
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
          data: { ...data, zodError: null, errorId, retryAfterS: null },
        };
      }
      // Input that is not JSON at all: tRPC passes on JSON.parse's words, which name neither the input nor the format.
      const message =
        error.code === "BAD_REQUEST" && error.cause instanceof SyntaxError
          ? `the input is not valid JSON (${error.cause.message}): send {"json": <input>} as superjson serializes it, as the body of a POST or in ?input= of a GET`
          : shape.message;
      return {
        ...shape,
        message,
        data: { ...data, zodError: error.cause instanceof ZodError ? z.flattenError(error.cause) : null, errorId: null, retryAfterS: retryAfterOf(error) },
      };
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
const refusalsKeepTheirCode = t.middleware(async ({ next, getRawInput }) => {
  const result = await next();
  // An input its schema refused: one line per wrong field, by its whole path ("config.algorithm.steps: …").
  if (!result.ok && result.error.code === "BAD_REQUEST" && result.error.cause instanceof ZodError) {
    throw new TRPCError({ code: "BAD_REQUEST", message: describeConfigError(result.error.cause, await getRawInput()), cause: result.error.cause });
  }
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
 * Who may call a procedure. Every procedure states one (a procedure without one refuses everyone, and the
 * authorization table test fails on it):
 * - `anyone`: no credentials needed (the health check, opening a share link or an invitation);
 * - `worker`: worker processes, with the worker token (checked by the worker router);
 * - `signedIn`: any signed-in caller; `person` excludes API keys (managing keys and memberships). Lists answer
 *   only what the caller's projects hold;
 * - a role on one object: the input field `input` holds the id of an object of kind `on`, and the caller needs at
 *   least `role` in its project. `shared` lets a share link's holder read the runs its link names. With `many`, the
 *   field holds a list of 1 to `many` such ids (several runs read at once), and the caller needs the role on each.
 */
type AccessRule =
  | { anyone: true }
  | { worker: true }
  | { signedIn: true; person?: boolean }
  | { role: ProjectRole; on: ObjectKind; input: string; shared?: boolean; many?: number };

type Meta = { access?: AccessRule };

/** The one check of who may call what, before the procedure runs (its input is read raw: only the id field). */
const authorize = t.middleware(async ({ meta, ctx, path, getRawInput, next }) => {
  const rule = meta?.access;
  if (!rule) {
    console.error(`tRPC ${path} states no access rule; refusing it`);
    throw new TRPCError({ code: "FORBIDDEN", message: `${path} is not open to anyone yet.` });
  }
  if ("anyone" in rule || "worker" in rule) return next();
  const { principal } = ctx.access;
  if (principal.kind === "anonymous") throw new TRPCError({ code: "UNAUTHORIZED", message: signInMessage(principal) });
  if ("signedIn" in rule) {
    if (principal.kind === "share") throw new TRPCError({ code: "FORBIDDEN", message: "A share link opens only the view it names; sign in to do more." });
    if (rule.person && principal.kind === "apikey") throw new TRPCError({ code: "FORBIDDEN", message: `${path} is for people signed in, not API keys.` });
    return next();
  }
  const raw = (await getRawInput()) as Record<string, unknown> | undefined;
  const field = raw?.[rule.input];
  const ids: unknown[] = rule.many ? (Array.isArray(field) ? field : []) : [field];
  if (ids.length === 0 || ids.length > (rule.many ?? 1) || ids.some((id) => typeof id !== "string" || id.length === 0 || id.length > 200)) {
    const expected = rule.many ? `a list of 1 to ${rule.many} ids of ${rule.on}s (strings)` : `the id of a ${rule.on} (a string)`;
    throw new TRPCError({ code: "BAD_REQUEST", message: `${rule.input}: expected ${expected}` });
  }
  for (const id of new Set(ids as string[])) await ctx.access.require(rule.role, { kind: rule.on, id }, { shared: rule.shared });
  return next();
});

/**
 * Rate limits per caller (./rate-limits.ts), before the input is read or any access is checked: each call of a batch
 * counts, against its procedure's limit and, for a signed-out caller, against its address's limit on all calls.
 */
const rateLimited = t.middleware(({ ctx, path, next }) => {
  if (ctx.caller) chargeCall(ctx.caller, path);
  return next();
});

/**
 * Every procedure: its caller's rate limits hold, text PostgreSQL cannot store is refused (or, from workers,
 * replaced), refusals keep their code, and its access rule holds.
 */
const base = t.procedure.use(refusalsKeepTheirCode).use(rateLimited).use(storableInput).use(authorize);

/** Needs no credentials (the health check; share links and invitations, whose token is the credential). */
export const publicProcedure = base.meta({ access: { anyone: true } });

/** For worker processes; the worker router checks their token. */
export const workerBaseProcedure = base.meta({ access: { worker: true } });

const withUser = base.use(({ ctx, next }) => next({ ctx: { ...ctx, user: ctx.user! } }));

/** Any signed-in caller (`ctx.user` is set); lists filter by `ctx.access.visibleProjects()`. */
export const protectedProcedure = withUser.meta({ access: { signedIn: true } });

/** A signed-in person, not an API key (managing one's keys and memberships). */
export const personProcedure = withUser.meta({ access: { signedIn: true, person: true } });

/** Needs `role` in the project of the object whose id is in the input field `input` (`ctx.user` is set). */
export function projectProcedure(role: ProjectRole, on: ObjectKind, input: string) {
  return withUser.meta({ access: { role, on, input } });
}

/** Reads several runs at once (a list of at most `many` ids in `input`): open to whoever may read each of them. */
export function sharedRunsProcedure(input: string, many: number) {
  return base.meta({ access: { role: "viewer", on: "run", input, shared: true, many } });
}

/** Reads one run (its id in `input`): open to the run's project members and to holders of a link sharing it. */
export function sharedRunProcedure(input = "runId") {
  return base.meta({ access: { role: "viewer", on: "run", input, shared: true } });
}
