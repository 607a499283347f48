/**
 * How fast passwords may be guessed on a team server, without letting anyone lock others out (docs/AUTH.md,
 * "Sign-in limits"). Counted in `rate_limits`, so every process of the server shares the counts, each step one
 * atomic statement:
 * - per account: 5 tries, then each further try waits 1 s, 2 s, 4 s … (at most 15 minutes) after the last failed
 *   one; a success starts the account afresh. The count follows the account, whatever the address, so guesses
 *   spread over many addresses are slowed as much as guesses from one.
 * - per browser that signed in to the account before (a signed cookie it got then): the same rule, counted apart
 *   from the account's, and free of the address's ceiling. Whoever fails on someone's account delays only browsers
 *   that never signed in to it: its owner's own browser is never held by others' failures.
 * - per address: 30 failed tries a minute, across accounts, so one address cannot sweep many accounts; a success
 *   does not count against it.
 * - sign-up: 5 a minute per address.
 * A try that must wait is refused with 429, a Retry-After header and a message saying when, before its password is
 * checked; refusals do not lengthen the wait. The count is kept whether or not the account exists, so the answers
 * say nothing about which accounts do.
 */
import { randomBytes } from "node:crypto";
import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthMiddleware, isAPIError } from "better-auth/api";
import { and, eq, gt, like, lt, or, sql } from "drizzle-orm";
import { type Database, newId, rateLimits } from "../db";
import { CLIENT_IP_HEADER, COOKIE_PREFIX } from "./constants";
import { hashToken } from "./tokens";

export const SIGN_IN_LIMITS = {
  /** Tries of one account (or from one known browser) before each further try waits. */
  freeTries: 5,
  /** The wait after the free tries, doubling with each further failed try. */
  firstWaitMs: 1000,
  maxWaitMs: 15 * 60_000,
  /** Failed tries one address may make in a minute, across every account. */
  addressFailuresPerMinute: 30,
  signUpsPerMinute: 5,
};

/** The cookie of a browser that signed in to an account: `<account>:<browser id>`, signed with the auth secret. */
const DEVICE_COOKIE = `${COOKIE_PREFIX}.sign_in_device`;
const DEVICE_COOKIE_MAX_AGE_S = 365 * 86_400;
/** Counts untouched for this long are forgotten. */
const RETENTION_MS = 86_400_000;
const MINUTE_MS = 60_000;

type Refusal = { retryAfterS: number; message: string };

/** Who is trying: the account's key, the browser's id when it signed in to this account before, and the address. */
type Attempt = { account: string; device: string | null; address: string };

/** The wait before the next try after `count` tries, counted from the last failed one. */
function waitMs(count: number): number {
  const { freeTries, firstWaitMs, maxWaitMs } = SIGN_IN_LIMITS;
  return count < freeTries ? 0 : Math.min(firstWaitMs * 2 ** (count - freeTries), maxWaitMs);
}

const bucketOf = (attempt: Attempt) => (attempt.device ? `sign-in:device:${attempt.device}` : `sign-in:account:${attempt.account}`);
const addressBucket = (address: string) => `sign-in:address:${address}`;

/**
 * Takes one try for `attempt` if it may go ahead now: counts it against the address (unless a known browser makes
 * it) and against the account or browser. Null when it may, else how long to wait.
 */
export async function admitSignIn(db: Database, attempt: Attempt): Promise<Refusal | null> {
  await forgetOldCounts(db);
  if (!attempt.device) {
    const retryAfterS = await takeFromWindow(db, addressBucket(attempt.address), SIGN_IN_LIMITS.addressFailuresPerMinute);
    if (retryAfterS !== null) {
      return {
        retryAfterS,
        message: `Too many failed sign-ins from your address (${SIGN_IN_LIMITS.addressFailuresPerMinute} a minute at most); try again in ${retryAfterS} s.`,
      };
    }
  }
  const key = bucketOf(attempt);
  const now = Date.now();
  const { freeTries, firstWaitMs, maxWaitMs } = SIGN_IN_LIMITS;
  const wait = sql`least(${firstWaitMs}::float8 * power(2, ${rateLimits.count} - ${freeTries}), ${maxWaitMs})`;
  const taken = await db
    .insert(rateLimits)
    .values({ id: newId("rl"), key, count: 1, lastRequest: now })
    .onConflictDoUpdate({
      target: rateLimits.key,
      set: { count: sql`${rateLimits.count} + 1`, lastRequest: now },
      setWhere: or(lt(rateLimits.count, freeTries), sql`${rateLimits.lastRequest} + ${wait} <= ${now}`),
    })
    .returning({ count: rateLimits.count });
  if (taken.length > 0) return null;
  const [row] = await db.select({ count: rateLimits.count, lastRequest: rateLimits.lastRequest }).from(rateLimits).where(eq(rateLimits.key, key));
  const retryAfterS = row ? Math.max(1, Math.ceil((row.lastRequest + waitMs(row.count) - now) / 1000)) : 1;
  return {
    retryAfterS,
    message: `Too many failed sign-ins to this account: each further try waits longer, up to ${maxWaitMs / MINUTE_MS} minutes; try again in ${retryAfterS} s.`,
  };
}

/** A failed try: the wait before the next one counts from now (its answer), not from when it began. */
export async function signInFailed(db: Database, attempt: Attempt): Promise<void> {
  await db
    .update(rateLimits)
    .set({ lastRequest: Date.now() })
    .where(eq(rateLimits.key, bucketOf(attempt)));
}

/** A successful try: the account (or browser) starts afresh, and the try does not count against its address. */
export async function signInSucceeded(db: Database, attempt: Attempt): Promise<void> {
  await db.delete(rateLimits).where(eq(rateLimits.key, bucketOf(attempt)));
  if (!attempt.device) {
    await db
      .update(rateLimits)
      .set({ count: sql`greatest(${rateLimits.count} - 1, 0)` })
      .where(and(eq(rateLimits.key, addressBucket(attempt.address)), gt(rateLimits.lastRequest, Date.now() - MINUTE_MS)));
  }
}

/** Takes one sign-up for `address`; null when it may go ahead, else how long to wait. */
export async function admitSignUp(db: Database, address: string): Promise<Refusal | null> {
  const retryAfterS = await takeFromWindow(db, `sign-up:address:${address}`, SIGN_IN_LIMITS.signUpsPerMinute);
  return retryAfterS === null
    ? null
    : { retryAfterS, message: `Too many sign-ups from your address (${SIGN_IN_LIMITS.signUpsPerMinute} a minute at most); try again in ${retryAfterS} s.` };
}

/**
 * Counts one against `key`'s minute (`lastRequest` is when the minute began) if fewer than `max` were counted in it;
 * null when counted, else the seconds until the minute ends.
 */
async function takeFromWindow(db: Database, key: string, max: number): Promise<number | null> {
  const now = Date.now();
  const over = sql`${rateLimits.lastRequest} <= ${now - MINUTE_MS}`;
  const taken = await db
    .insert(rateLimits)
    .values({ id: newId("rl"), key, count: 1, lastRequest: now })
    .onConflictDoUpdate({
      target: rateLimits.key,
      set: {
        count: sql`case when ${over} then 1 else ${rateLimits.count} + 1 end`,
        lastRequest: sql`case when ${over} then ${now}::bigint else ${rateLimits.lastRequest} end`,
      },
      setWhere: or(over, lt(rateLimits.count, max)),
    })
    .returning({ count: rateLimits.count });
  if (taken.length > 0) return null;
  const [row] = await db.select({ lastRequest: rateLimits.lastRequest }).from(rateLimits).where(eq(rateLimits.key, key));
  return row ? Math.max(1, Math.ceil((row.lastRequest + MINUTE_MS - now) / 1000)) : 1;
}

const holder = globalThis as typeof globalThis & { __tinkerlabSignInCountsForgotten?: number };

/** Deletes counts untouched for a day, at most once every ten minutes per process. */
async function forgetOldCounts(db: Database): Promise<void> {
  const now = Date.now();
  if (now - (holder.__tinkerlabSignInCountsForgotten ?? 0) < 10 * MINUTE_MS) return;
  holder.__tinkerlabSignInCountsForgotten = now;
  await db
    .delete(rateLimits)
    .where(and(or(like(rateLimits.key, "sign-in:%"), like(rateLimits.key, "sign-up:%")), lt(rateLimits.lastRequest, now - RETENTION_MS)));
}

/**
 * The limits as a better-auth plugin: before sign-in and sign-up through the HTTP handler, a try that must wait is
 * refused (429, Retry-After); after sign-in, its outcome is counted, and a browser that signed in gets (or keeps)
 * its cookie for the account. Calls of `auth.api` made by the server itself carry no request and are not limited.
 */
export function signInLimits(db: Database): BetterAuthPlugin {
  return {
    id: "tinkerlab-sign-in-limits",
    hooks: {
      before: [
        {
          matcher: (ctx) => ctx.path === "/sign-in/email" || ctx.path === "/sign-up/email",
          handler: createAuthMiddleware(async (ctx) => {
            if (!ctx.request) return;
            const refusal =
              ctx.path === "/sign-up/email" ? await admitSignUp(db, addressOf(ctx.request)) : await admitSignIn(db, await attemptOf(ctx, ctx.request));
            if (refusal) {
              throw new APIError(
                "TOO_MANY_REQUESTS",
                { message: refusal.message, code: "TOO_MANY_ATTEMPTS", retryAfter: refusal.retryAfterS },
                { "Retry-After": String(refusal.retryAfterS) },
              );
            }
          }),
        },
      ],
      after: [
        {
          matcher: (ctx) => ctx.path === "/sign-in/email",
          handler: createAuthMiddleware(async (ctx) => {
            if (!ctx.request) return;
            const attempt = await attemptOf(ctx, ctx.request);
            if (isAPIError(ctx.context.returned)) {
              await signInFailed(db, attempt);
              return;
            }
            await signInSucceeded(db, attempt);
            const device = `${attempt.account}:${attempt.device ?? randomBytes(16).toString("hex")}`;
            await ctx.setSignedCookie(DEVICE_COOKIE, device, ctx.context.secret, {
              httpOnly: true,
              sameSite: "lax",
              path: "/api/auth",
              maxAge: DEVICE_COOKIE_MAX_AGE_S,
            });
          }),
        },
      ],
    },
  };
}

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];

/** The account a sign-in names (its email's hash: the table need not list who was tried), the known browser, the address. */
async function attemptOf(ctx: HookContext, request: Request): Promise<Attempt> {
  const email = (ctx.body as { email?: unknown } | undefined)?.email;
  const account = hashToken(typeof email === "string" ? email.trim().toLowerCase() : "").slice(0, 32);
  const cookie = await ctx.getSignedCookie(DEVICE_COOKIE, ctx.context.secret);
  const [cookieAccount, device] = typeof cookie === "string" ? cookie.split(":") : [];
  return { account, device: cookieAccount === account && device ? device : null, address: addressOf(request) };
}

/** The client's address as the web server saw it (server/web-server.ts writes the header from the socket). */
function addressOf(request: Request): string {
  return request.headers.get(CLIENT_IP_HEADER) ?? "unknown";
}
