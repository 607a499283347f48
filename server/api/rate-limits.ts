/**
 * Per-caller rate limits (docs/RUNTIME.md, "Rate limits"): the costly procedures and routes, per caller, signed in or
 * not; and every call of a signed-out caller, per address. Each (limit, caller) pair has a token bucket in this
 * process's memory that holds `burst` calls and refills at `perMinute`; a call takes one token, and a call that finds
 * none is refused with 429 (TOO_MANY_REQUESTS), "retry in S s" and a Retry-After header. So a burst passes (twenty
 * validations at once), and only a rate sustained above the limit is refused.
 *
 * A caller is whom the request's credentials name (a person, an API key, a share link), else the address it comes
 * from (the web server writes it into CLIENT_IP_HEADER from the socket). Calls made in-process (server components
 * rendering a page ask through `createTRPCContext` and count; tests' `createCaller` does not) have no caller when
 * their context was made without one.
 */
import { TRPCError } from "@trpc/server";
import type { Principal } from "../auth";
import { CLIENT_IP_HEADER } from "../auth/constants";

export type RateLimit = {
  /** How many calls a minute a caller may make, sustained. */
  perMinute: number;
  /** How many it may make at once, after a quiet spell. */
  burst: number;
};

/**
 * The costly procedures' limits, per caller. Each starts work that takes a process, a job or disk: a validation runs
 * the environment in a sandbox (with a type-check, seconds of CPU); a launch, a re-run, an evaluation, an export and a
 * session queue a job; create, save and a run's clone store a version of up to 2 MiB; an upload stores up to 16 MiB.
 * The `bases.*` names are the base routes (app/api/bases/…): a file upload (a model folder has a few to a few dozen
 * files) and the import, which converts a whole model.
 */
export const RATE_LIMITS = {
  // The editor validates 800 ms after each pause in typing; 30 a minute keeps a fast typist's pace.
  "experiments.validate": { perMinute: 30, burst: 30 },
  "experiments.create": { perMinute: 60, burst: 60 },
  "experiments.save": { perMinute: 60, burst: 60 },
  "runs.launch": { perMinute: 30, burst: 30 },
  // A re-run queues a job as a launch does; a clone stores a version as a save does.
  "runs.rerun": { perMinute: 30, burst: 30 },
  "runs.clone": { perMinute: 60, burst: 60 },
  "runs.evaluate": { perMinute: 30, burst: 30 },
  "runs.export": { perMinute: 10, burst: 10 },
  "datasets.upload": { perMinute: 20, burst: 20 },
  "sessions.create": { perMinute: 20, burst: 20 },
  "bases.upload": { perMinute: 120, burst: 120 },
  "bases.import": { perMinute: 6, burst: 6 },
} as const satisfies Record<string, RateLimit>;

export type RateLimitedName = keyof typeof RATE_LIMITS;

/**
 * Every call a signed-out caller makes, whatever the procedure, per address: enough for the pages a visitor opens
 * before signing in (an invitation, the health check), not for a storm that would keep the server from others.
 */
export const SIGNED_OUT_LIMIT: RateLimit = { perMinute: 120, burst: 120 };

/** Who a request's calls count against: `key` names the caller; `signedOut` callers also count against SIGNED_OUT_LIMIT. */
export type Caller = { key: string; signedOut: boolean; address: string };

/**
 * The caller of a request by its principal; a request with no principal is its address's, unless it carries the
 * server's worker token (a worker process: not signed out, and held to no limit here).
 */
export function callerOf(principal: Principal, address: string | null, options: { worker: boolean }): Caller {
  const from = addressKey(address);
  switch (principal.kind) {
    case "local":
    case "person":
      return { key: `user ${principal.user.id}`, signedOut: false, address: from };
    case "apikey":
      return { key: `key ${principal.keyId}`, signedOut: false, address: from };
    case "share":
      return { key: `share ${principal.linkId}`, signedOut: false, address: from };
    case "anonymous":
      return options.worker ? { key: "worker", signedOut: false, address: from } : { key: `address ${from}`, signedOut: true, address: from };
  }
}

/**
 * The part of an address one client holds: an IPv4 address as it is (also when written IPv4-mapped,
 * `::ffff:10.0.0.1`), an IPv6 address's /64 (the block one host or home is usually given, so rotating through it buys
 * nothing).
 */
export function addressKey(address: string | null | undefined): string {
  if (!address) return "unknown";
  const plain = address.replace(/%.*$/, "").toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(plain);
  if (mapped) return mapped[1]!;
  if (!plain.includes(":")) return plain;
  const [head = "", tail] = plain.split("::");
  const groups = head === "" ? [] : head.split(":");
  if (tail !== undefined) {
    const after = tail === "" ? [] : tail.split(":");
    groups.push(...Array<string>(Math.max(0, 8 - groups.length - after.length)).fill("0"), ...after);
  }
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}

type Bucket = { tokens: number; at: number; fullAt: number };

/** Token buckets by key. `now` is in milliseconds of a clock that only goes forward. */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly maxBuckets = 100_000) {}

  /**
   * Takes `count` tokens from the bucket `key` and answers 0, or, when it holds fewer, takes none and answers the
   * seconds until it will hold them (at least 1). `peek` only asks.
   */
  take(key: string, limit: RateLimit, now: number, options: { count?: number; peek?: boolean } = {}): number {
    const count = options.count ?? 1;
    const perMs = limit.perMinute / 60_000;
    const bucket = this.buckets.get(key);
    const tokens = bucket ? Math.min(limit.burst, bucket.tokens + (now - bucket.at) * perMs) : limit.burst;
    if (tokens < count) return Math.max(1, Math.ceil((count - tokens) / perMs / 1000));
    if (options.peek) return 0;
    const left = tokens - count;
    // Deleted first, so the map's order is the order of last use and an overflow drops the longest unused.
    this.buckets.delete(key);
    this.buckets.set(key, { tokens: left, at: now, fullAt: now + (limit.burst - left) / perMs });
    if (now - this.sweptAt > 60_000 || this.buckets.size > this.maxBuckets) this.sweep(now);
    return 0;
  }

  /** How many buckets are held: a full bucket is dropped (it is the same as none). */
  get size(): number {
    return this.buckets.size;
  }

  private sweep(now: number) {
    this.sweptAt = now;
    for (const [key, bucket] of this.buckets) if (bucket.fullAt <= now) this.buckets.delete(key);
    // Past the cap (callers from very many addresses at once), the longest unused go: each gets a full bucket back.
    for (const key of this.buckets.keys()) {
      if (this.buckets.size <= this.maxBuckets) break;
      this.buckets.delete(key);
    }
  }
}

/** The process's buckets: one for the web server's gate and Next.js's bundles, which load this module apart. */
const holder = globalThis as typeof globalThis & { __tinkerlabRateBuckets?: TokenBuckets };
const buckets = () => (holder.__tinkerlabRateBuckets ??= new TokenBuckets());

/** A call refused for its rate: TOO_MANY_REQUESTS, with the seconds to wait for a Retry-After header. */
export class RateLimitError extends TRPCError {
  constructor(
    message: string,
    readonly retryAfterS: number,
  ) {
    super({ code: "TOO_MANY_REQUESTS", message });
  }
}

/** The bucket of a signed-out address's calls. */
const signedOutKey = (address: string) => `signed out ${address}`;

const signedOutMessage = (caller: Pick<Caller, "address">, retryAfterS: number) =>
  `too many calls without signing in from ${caller.address}: ${SIGNED_OUT_LIMIT.perMinute} a minute allowed; retry in ${retryAfterS} s, or sign in`;

/** Counts one call of `procedure` (a tRPC path or a route's name) against its caller's limits; throws RateLimitError over one. */
export function chargeCall(caller: Caller, procedure: string): void {
  const now = performance.now();
  if (caller.signedOut) {
    const wait = buckets().take(signedOutKey(caller.address), SIGNED_OUT_LIMIT, now);
    if (wait > 0) throw new RateLimitError(signedOutMessage(caller, wait), wait);
  }
  const limit = Object.hasOwn(RATE_LIMITS, procedure) ? RATE_LIMITS[procedure as RateLimitedName] : undefined;
  if (limit) {
    const wait = buckets().take(`${procedure} ${caller.key}`, limit, now);
    if (wait > 0) throw new RateLimitError(`too many ${procedure} calls: ${limit.perMinute} a minute allowed; retry in ${wait} s`, wait);
  }
}

/**
 * Whether a signed-out caller at `address` has `calls` calls left, asked without taking them: the web server's gate
 * refuses a request with no credentials here, before Next.js or tRPC see it, once its address has used its limit
 * (the calls are taken, one by one, where tRPC knows the caller).
 */
export function signedOutRefusal(address: string | null, calls: number): RateLimitError | null {
  const caller = { address: addressKey(address) };
  const wait = buckets().take(signedOutKey(caller.address), SIGNED_OUT_LIMIT, performance.now(), { count: calls, peek: true });
  return wait > 0 ? new RateLimitError(signedOutMessage(caller, wait), wait) : null;
}

/** The seconds an error says to wait before retrying (a RateLimitError, or anything else carrying `retryAfterS`), or null. */
export function retryAfterOf(error: TRPCError): number | null {
  const wait = (error as { retryAfterS?: unknown }).retryAfterS ?? (error.cause as { retryAfterS?: unknown } | undefined)?.retryAfterS;
  return typeof wait === "number" ? wait : null;
}

/** tRPC handlers' `responseMeta`: a Retry-After header when a call was refused for its rate (the longest wait of a batch). */
export function retryAfterHeaders({ errors }: { errors: TRPCError[] }): { headers?: Headers } {
  const waits = errors.map(retryAfterOf).filter((wait) => wait !== null);
  return waits.length > 0 ? { headers: new Headers({ "retry-after": String(Math.max(...waits)) }) } : {};
}

/**
 * For a route outside tRPC (the base uploads): counts one call of `name` against the caller of `principal` and
 * answers null, or the 429 to send, `{ error }` with a Retry-After header. One line at the top of a handler:
 * `const limited = rateLimitResponse("bases.import", principal, request.headers); if (limited) return limited;`.
 */
export function rateLimitResponse(name: RateLimitedName, principal: Principal, headers: Headers): Response | null {
  try {
    chargeCall(callerOf(principal, headers.get(CLIENT_IP_HEADER), { worker: false }), name);
    return null;
  } catch (error) {
    if (!(error instanceof RateLimitError)) throw error;
    return Response.json({ error: error.message }, { status: 429, headers: { "retry-after": String(error.retryAfterS) } });
  }
}
