/**
 * The token buckets behind the rate limits and how a caller is named (server/api/rate-limits.ts), on a clock the test
 * sets. Over HTTP: test/integration/rate-limits.test.ts.
 */
import { describe, expect, it } from "vitest";
import { addressKey, callerOf, TokenBuckets } from "@/server/api/rate-limits";

const limit = { perMinute: 30, burst: 30 }; // a token every 2 s

describe("token buckets", () => {
  it("let a burst through, then one call per refill, and say how long to wait", () => {
    const buckets = new TokenBuckets();
    for (let i = 0; i < 30; i++) expect(buckets.take("validate ada", limit, 0)).toBe(0);
    expect(buckets.take("validate ada", limit, 0)).toBe(2);
    expect(buckets.take("validate ada", limit, 1_000)).toBe(1);
    expect(buckets.take("validate ada", limit, 2_000)).toBe(0);
    expect(buckets.take("validate ada", limit, 2_000)).toBe(2);
    // Another key has its own bucket; a bucket never holds more than its burst.
    expect(buckets.take("validate bob", limit, 2_000)).toBe(0);
    expect(buckets.take("validate ada", limit, 10 * 60_000, { count: 30 })).toBe(0);
    expect(buckets.take("validate ada", limit, 10 * 60_000)).toBe(2);
  });

  it("peek without taking, and take nothing from a bucket too empty for all of a request's calls", () => {
    const buckets = new TokenBuckets();
    expect(buckets.take("signed out 10.0.0.1", limit, 0, { count: 25 })).toBe(0);
    expect(buckets.take("signed out 10.0.0.1", limit, 0, { count: 10 })).toBe(10); // 5 left: 5 more take 10 s
    expect(buckets.take("signed out 10.0.0.1", limit, 0, { count: 5, peek: true })).toBe(0);
    expect(buckets.take("signed out 10.0.0.1", limit, 0, { count: 5 })).toBe(0);
    expect(buckets.take("signed out 10.0.0.1", limit, 0)).toBe(2);
  });

  it("forget full buckets and hold at most their cap, dropping the longest unused", () => {
    const buckets = new TokenBuckets(3);
    for (let i = 0; i < 5; i++) buckets.take(`caller ${i}`, limit, 0);
    expect(buckets.size).toBeLessThanOrEqual(3);
    // A minute on, every bucket has refilled: one take sweeps them all but its own.
    buckets.take("caller 0", limit, 120_000);
    expect(buckets.size).toBe(1);
  });
});

describe("callers", () => {
  it("are the principal when there is one, else the address; a worker is no signed-out caller", () => {
    const user = { id: "usr_ada", name: "Ada", email: "ada@example.com" };
    expect(callerOf({ kind: "person", user, admin: false }, "10.0.0.1", { worker: false })).toMatchObject({ key: "user usr_ada", signedOut: false });
    const key = { kind: "apikey", user, keyId: "key_1", projectId: "prj_1", role: "editor", admin: false } as const;
    expect(callerOf(key, null, { worker: false })).toMatchObject({ key: "key key_1", signedOut: false });
    expect(callerOf({ kind: "share", linkId: "shl_1", projectId: "prj_1", runIds: [] }, null, { worker: false }).key).toBe("share shl_1");
    expect(callerOf({ kind: "anonymous" }, "10.0.0.1", { worker: false })).toEqual({ key: "address 10.0.0.1", signedOut: true, address: "10.0.0.1" });
    expect(callerOf({ kind: "anonymous" }, "10.0.0.1", { worker: true }).signedOut).toBe(false);
  });

  it("name an IPv6 address by its /64, so rotating within it buys nothing", () => {
    expect(addressKey("::ffff:192.0.2.7")).toBe("192.0.2.7");
    expect(addressKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0db8:0001:0002:ffff:ffff:ffff:fffe")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressKey(null)).toBe("unknown");
  });
});
