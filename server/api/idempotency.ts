/**
 * Idempotent writes, as Stripe's Idempotency-Key: a create, launch, evaluate, export, upload or import sent with a
 * key is done once, and a retry with the same key (a lost answer, a double click, a client's retry) gets the first
 * answer back, the same ids, instead of a second object. Keys are scoped by caller and procedure and kept 24 hours
 * in `idempotency_keys`; the same key with another input is refused (422).
 *
 * A procedure's work and its stored answer commit in one transaction (`idempotently`): the request claims the key
 * by inserting its row, does the work on the transaction, and stores the answer there, so a crash at any point
 * leaves either both or neither, and a retry after a crash does the work once. A request that finds the key held
 * by another still at work waits for it (a transaction-scoped advisory lock tells it, without blocking on the
 * row), and answers 409 when it has waited WAIT_MS. Work that writes files rather than rows (a base's import,
 * `answerOnce`) holds the key with a lease it renews while it works; a key whose lease lapsed without an answer
 * was left by a request that died, and the next request with it takes the work over, first asking the work
 * whether the dead one finished (`recovered`), so that nothing is done twice.
 */
import { createHash } from "node:crypto";
import { TRPCError } from "@trpc/server";
import { and, eq, gt, isNull, lt, sql } from "drizzle-orm";
import superjson from "superjson";
import { z } from "zod";
import { Access, type Principal } from "../auth";
import { type Database, idempotencyKeys } from "../db";
import type { Context } from "./trpc";

/** How long a key is kept: a retry within it gets the first answer. */
const KEPT_HOURS = 24;
/** How long a request waits for another with its key to finish before answering 409. */
const WAIT_MS = 30_000;
/** A lease of `answerOnce`'s work, renewed every third of it while the work goes on. */
const LEASE_MS = 30_000;

/** The header the HTTP routes (a base's import) read the key from; tRPC procedures take `idempotencyKey` in their input. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";

const KEY_RULE = "8 to 200 characters of letters, digits, '_', '-', ':' and '.' (a UUID will do)";
const keySchema = z
  .string()
  .min(8, `an idempotency key is ${KEY_RULE}`)
  .max(200, `an idempotency key is ${KEY_RULE}`)
  .regex(/^[A-Za-z0-9_\-:.]+$/, `an idempotency key is ${KEY_RULE}`);

/**
 * The optional input field of an idempotent procedure: one key per logical request (a user's action, a CLI
 * command), the same key for its retries.
 */
export const idempotencyKeyField = keySchema
  .optional()
  .describe("one key per logical request, reused by its retries: a retry with the same key gets the first answer instead of a second object");

/** The key a route's request carries in its Idempotency-Key header: none, one, or what is wrong with it. */
export function idempotencyKeyOf(headers: Headers): { key: string | null } | { error: string } {
  const value = headers.get(IDEMPOTENCY_KEY_HEADER);
  if (value === null) return { key: null };
  const parsed = keySchema.safeParse(value);
  return parsed.success ? { key: parsed.data } : { error: `${IDEMPOTENCY_KEY_HEADER}: ${parsed.error.issues[0]!.message}; got ${JSON.stringify(value)}` };
}

/** A refusal of a keyed request, with the HTTP status a route answers it with. */
export class IdempotencyError extends Error {
  constructor(
    message: string,
    readonly code: "CONFLICT" | "UNPROCESSABLE_CONTENT",
  ) {
    super(message);
  }

  get status(): 409 | 422 {
    return this.code === "CONFLICT" ? 409 : 422;
  }
}

const inProgress = () => new IdempotencyError("a request with this idempotency key is still in progress; retry in a moment", "CONFLICT");
const otherInput = (procedure: string) =>
  new IdempotencyError(
    `this idempotency key was used with different input for ${procedure} in the last ${KEPT_HOURS} hours; send a new key for a new request, and the same key only to retry the same one`,
    "UNPROCESSABLE_CONTENT",
  );

/** Whose keys these are: a person's (or the local user's), or an API key's own (a key never reads another's answers). */
function scopeOf(principal: Principal): string {
  if (principal.kind === "apikey") return `key:${principal.keyId}`;
  if (principal.kind === "person" || principal.kind === "local") return `user:${principal.user.id}`;
  // Unreachable through the API: every idempotent write needs a signed-in caller first.
  throw new TRPCError({ code: "UNAUTHORIZED", message: "an idempotency key needs a signed-in caller (a session or an API key)" });
}

/** SHA-256 of the input as JSON with every object's keys sorted, so that the same input always hashes the same. */
function hashInput(input: unknown): string {
  const sorted = JSON.stringify(input, (_key, value: unknown) =>
    value !== null && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value,
  );
  return createHash("sha256")
    .update(sorted ?? "null")
    .digest("base64url");
}

type Claim = { caller: string; procedure: string; key: string; inputHash: string };

const sameKey = (claim: Claim) =>
  and(eq(idempotencyKeys.caller, claim.caller), eq(idempotencyKeys.procedure, claim.procedure), eq(idempotencyKeys.key, claim.key));
const expiry = () => sql`now() - make_interval(hours => ${KEPT_HOURS})`;

/** The key's live row: its input's hash, its answer (null while worked on), and its lease (answerOnce's work). */
async function storedKey(db: Database, claim: Claim) {
  const [row] = await db
    .select({
      inputHash: idempotencyKeys.inputHash,
      answer: idempotencyKeys.answer,
      heldUntil: idempotencyKeys.heldUntil,
      createdAt: idempotencyKeys.createdAt,
    })
    .from(idempotencyKeys)
    .where(and(sameKey(claim), gt(idempotencyKeys.createdAt, expiry())));
  return row ?? null;
}

/** A stored row's answer for this request: the first answer, a refusal (another input), or null (still worked on). */
function answerOf<T>(row: { inputHash: string; answer: string | null }, claim: Claim): { answer: T } | null {
  if (row.inputHash !== claim.inputHash) throw otherInput(claim.procedure);
  return row.answer === null ? null : { answer: superjson.parse<T>(row.answer) };
}

let lastSweep = 0;
/** Deletes expired keys, at most once a minute per process: whenever a keyed request comes. */
async function forgetExpired(db: Database): Promise<void> {
  if (Date.now() - lastSweep < 60_000) return;
  lastSweep = Date.now();
  await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, expiry()));
}

/** Waits a little longer each time, up to half a second: long enough to let the first finish, short enough to answer soon after. */
const pause = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.min(500, 20 * 2 ** attempt)));

/**
 * Runs a procedure's work once per idempotency key: without a key, as it is; with one, in a transaction that claims
 * the key, does the work on the transaction (`ctx.db` and `ctx.access` are the transaction's) and stores its
 * answer. A request whose key has an answer gets that answer (superjson's round trip: dates stay dates); one whose
 * key another request is working on waits for it, up to WAIT_MS (then 409). Work that fails stores nothing: the
 * error goes to its caller and the key is free for a retry. On PGlite, one connection, the transaction holds the
 * database while the work runs, so the work must reach it only through the `ctx` it is given.
 */
export async function idempotently<C extends Context, T>(
  ctx: C,
  procedure: string,
  input: { idempotencyKey?: string },
  work: (ctx: C) => Promise<T>,
): Promise<T> {
  const { idempotencyKey: key, ...rest } = input;
  if (key === undefined) return work(ctx);
  const claim: Claim = { caller: scopeOf(ctx.principal), procedure, key, inputHash: hashInput(rest) };
  await forgetExpired(ctx.db);
  try {
    const deadline = Date.now() + WAIT_MS;
    for (let attempt = 0; ; attempt++) {
      const row = await storedKey(ctx.db, claim);
      const stored = row && answerOf<T>(row, claim);
      if (stored) return stored.answer;
      if (!row) {
        const done = await claimAndWork(ctx, claim, work);
        if (done) return done.answer;
      }
      if (Date.now() > deadline) throw inProgress();
      await pause(attempt);
    }
  } catch (error) {
    if (error instanceof IdempotencyError) throw new TRPCError({ code: error.code, message: error.message });
    throw error;
  }
}

/**
 * One try at a key: null when another request holds it (its transaction is open: the advisory lock says so without
 * waiting on its row) or has just stored its answer; else the work's answer, committed with the key.
 */
async function claimAndWork<C extends Context, T>(ctx: C, claim: Claim, work: (ctx: C) => Promise<T>): Promise<{ answer: T } | null> {
  return ctx.db.transaction(async (tx) => {
    const db = tx as unknown as Database;
    const lock = (await db.execute(
      sql`select pg_try_advisory_xact_lock(hashtextextended(${`${claim.caller} ${claim.procedure} ${claim.key}`}, 0)) as locked`,
    )) as unknown as { rows: { locked: boolean }[] };
    if (!lock.rows[0]?.locked) return null;
    // An expired row of this key, not yet swept, would stand in the way of the new claim.
    await db.delete(idempotencyKeys).where(and(sameKey(claim), lt(idempotencyKeys.createdAt, expiry())));
    const claimed = await db.insert(idempotencyKeys).values(claim).onConflictDoNothing().returning({ key: idempotencyKeys.key });
    if (claimed.length === 0) return null;
    const answer = await work({ ...ctx, db, access: new Access(db, ctx.principal) });
    await db
      .update(idempotencyKeys)
      .set({ answer: superjson.stringify(answer) })
      .where(sameKey(claim));
    return { answer };
  });
}

/**
 * `idempotently` for work that writes files rather than rows (a base's import), which no transaction can hold:
 * the key is claimed with a lease, renewed while the work goes on, and the answer stored after it. Should the
 * request die before storing it, the key's lease lapses, and the next request with the key takes the work over:
 * `recovered(since)` first says whether the work was done since then (its answer), else the work runs. Refusals
 * are IdempotencyErrors (409, 422), for the route to answer with their status.
 */
export async function answerOnce<T>(
  db: Database,
  principal: Principal,
  request: { procedure: string; key: string; input: unknown },
  work: () => Promise<T>,
  recovered: (since: Date) => T | null,
): Promise<T> {
  const claim: Claim = { caller: scopeOf(principal), procedure: request.procedure, key: request.key, inputHash: hashInput(request.input) };
  await forgetExpired(db);
  const deadline = Date.now() + WAIT_MS;
  for (let attempt = 0; ; attempt++) {
    const row = await storedKey(db, claim);
    const stored = row && answerOf<T>(row, claim);
    if (stored) return stored.answer;
    const held = await holdKey(db, claim, row);
    if (held) {
      const answer = (held.since && recovered(held.since)) || (await workHolding(db, claim, work));
      await db
        .update(idempotencyKeys)
        .set({ answer: superjson.stringify(answer), heldUntil: null })
        .where(and(sameKey(claim), isNull(idempotencyKeys.answer)));
      return answer;
    }
    if (Date.now() > deadline) throw inProgress();
    await pause(attempt);
  }
}

/**
 * Takes the key for this request: a new row, or (`since`: when it was first claimed) one whose holder's lease
 * lapsed. Null when another request holds it.
 */
async function holdKey(db: Database, claim: Claim, row: { heldUntil: Date | null; createdAt: Date } | null): Promise<{ since: Date | null } | null> {
  const until = sql`now() + make_interval(secs => ${LEASE_MS / 1000})`;
  if (!row) {
    await db.delete(idempotencyKeys).where(and(sameKey(claim), lt(idempotencyKeys.createdAt, expiry())));
    const claimed = await db
      .insert(idempotencyKeys)
      .values({ ...claim, heldUntil: until })
      .onConflictDoNothing()
      .returning({ key: idempotencyKeys.key });
    return claimed.length > 0 ? { since: null } : null;
  }
  const taken = await db
    .update(idempotencyKeys)
    .set({ heldUntil: until })
    .where(and(sameKey(claim), isNull(idempotencyKeys.answer), lt(idempotencyKeys.heldUntil, sql`now()`)))
    .returning({ key: idempotencyKeys.key });
  return taken.length > 0 ? { since: row.createdAt } : null;
}

/** Runs the work while renewing the key's lease; work that fails frees the key for a retry. */
async function workHolding<T>(db: Database, claim: Claim, work: () => Promise<T>): Promise<T> {
  const renew = setInterval(() => {
    db.update(idempotencyKeys)
      .set({ heldUntil: sql`now() + make_interval(secs => ${LEASE_MS / 1000})` })
      .where(and(sameKey(claim), isNull(idempotencyKeys.answer)))
      .catch((error: unknown) => console.error(`renewing the idempotency key of ${claim.procedure} failed:`, error));
  }, LEASE_MS / 3);
  try {
    return await work();
  } catch (error) {
    await db.delete(idempotencyKeys).where(and(sameKey(claim), isNull(idempotencyKeys.answer)));
    throw error;
  } finally {
    clearInterval(renew);
  }
}
