/**
 * Sign-in limits on a team server, through better-auth's own handler on a real database: failures slow down the
 * account they were made on (whatever the address) and the address they came from (whatever the account), never
 * another account behind the same address, never the account's owner in a browser that signed in to it before; a
 * refused try says when to try again.
 */
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq, like, or, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Accounts, accountsFor } from "@/server/auth/accounts";
import { CLIENT_IP_HEADER } from "@/server/auth/constants";
import { SIGN_IN_LIMITS } from "@/server/auth/sign-in-limits";
import { createInvitation, DEFAULT_PROJECT } from "@/server/auth/projects";
import { rateLimits, users } from "@/server/db";
import { openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let auth: Accounts;
const ORIGIN = "http://127.0.0.1:3000";
const ADA = { name: "Ada", email: "ada@example.com", password: "correct horse battery staple" };
const BOB = { name: "Bob", email: "bob@example.com", password: "another long password" };

// A first wait of a minute, and time passed by moving the counts' clocks back (`letTimePass`): on a loaded machine a
// sign-in's password hash alone can take longer than the shipped 1 s wait.
const shipped = { ...SIGN_IN_LIMITS };
beforeAll(async () => {
  SIGN_IN_LIMITS.firstWaitMs = 60_000;
  db = await openTestDatabase();
  const secretFile = path.join(mkdtempSync(path.join(os.tmpdir(), "tinkerlab-secret-")), "auth-secret");
  auth = await accountsFor(db.handle.db, { secret: undefined, secretFile, host: "127.0.0.1", port: 3000 });
  expect((await post("/sign-up/email", ADA, "10.1.0.1")).status).toBe(200);
  const [ada] = await db.handle.db.select({ id: users.id }).from(users).where(eq(users.email, ADA.email));
  const { token } = await createInvitation(db.handle.db, {
    projectId: DEFAULT_PROJECT,
    role: "viewer",
    createdBy: ada!.id,
    expiresAt: new Date(Date.now() + 3_600_000),
  });
  expect((await post(`/sign-up/email?invite=${token}`, BOB, "10.1.0.2")).status).toBe(200);
});
afterAll(async () => {
  Object.assign(SIGN_IN_LIMITS, shipped);
  await db.close();
});

/** As if `ms` had passed since every account's and browser's last try. */
async function letTimePass(ms: number) {
  await db.handle.db
    .update(rateLimits)
    .set({ lastRequest: sql`${rateLimits.lastRequest} - ${ms}` })
    .where(or(like(rateLimits.key, "sign-in:account:%"), like(rateLimits.key, "sign-in:device:%")));
}

async function post(route: string, body: unknown, address: string, cookie?: string) {
  const response = await auth.handler(
    new Request(`${ORIGIN}/api/auth${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ORIGIN, [CLIENT_IP_HEADER]: address, ...(cookie ? { cookie } : {}) },
      body: JSON.stringify(body),
    }),
  );
  const text = await response.text();
  const cookies = response.headers.getSetCookie().map((c) => c.split(";")[0]!);
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    message: (text ? JSON.parse(text) : null)?.message as string | undefined,
    device: cookies.find((c) => c.startsWith("tinkerlab.sign_in_device=")),
  };
}

const signIn = (who: { email: string; password: string }, address: string, cookie?: string) =>
  post("/sign-in/email", { email: who.email, password: who.password }, address, cookie);
const wrong = (who: { email: string }) => ({ email: who.email, password: "not the password at all" });

describe("sign-in limits", () => {
  it("slows down the account that failed, not another account behind the same address, and says when to retry", async () => {
    for (let i = 0; i < 5; i++) expect((await signIn(wrong(ADA), "10.2.0.1")).status).toBe(401);
    // Someone else behind the same address signs in.
    expect((await signIn(BOB, "10.2.0.1")).status).toBe(200);

    // Ada's account now waits, whatever the address and even for the right password, and says how long.
    for (const address of ["10.2.0.1", "10.2.0.99"]) {
      const refused = await signIn(ADA, address);
      expect(refused.status).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(refused.message).toMatch(/^Too many failed sign-ins to this account: .*try again in \d+ s\.$/);
    }

    // Once the wait is over, the right password signs in, and the account starts afresh.
    await letTimePass(60_000);
    expect((await signIn(ADA, "10.2.0.99")).status).toBe(200);
    expect((await signIn(wrong(ADA), "10.2.0.1")).status).toBe(401);
  });

  it("doubles the wait with each further failure, counted from the failure", async () => {
    for (let i = 0; i < 5; i++) expect((await signIn(wrong(BOB), "10.3.0.1")).status).toBe(401);
    await letTimePass(60_000);
    expect((await signIn(wrong(BOB), "10.3.0.1")).status).toBe(401);
    const refused = await signIn(BOB, "10.3.0.2");
    expect(refused.status).toBe(429);
    // Twice the first wait, counted from the failure.
    expect(Number(refused.retryAfter)).toBeGreaterThan(60);
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(120);
    await letTimePass(60_000);
    expect((await signIn(BOB, "10.3.0.2")).status).toBe(429);
    await letTimePass(60_000);
    expect((await signIn(BOB, "10.3.0.2")).status).toBe(200);
  });

  it("never holds the owner's own browser back for others' failures on the account or at the address", async () => {
    const earlier = await signIn(ADA, "10.4.0.1");
    expect(earlier.status).toBe(200);
    expect(earlier.device).toBeDefined();
    // Someone sweeps accounts from the address Ada is at until it is refused, and fails on Ada's account elsewhere.
    for (let i = 0; i < 30; i++) expect((await signIn({ email: `nobody${i}@example.com`, password: "x".repeat(12) }, "10.4.0.66")).status).toBe(401);
    const swept = await signIn(BOB, "10.4.0.66");
    expect(swept.status).toBe(429);
    expect(swept.message).toMatch(/^Too many failed sign-ins from your address \(30 a minute at most\); try again in \d+ s\.$/);
    for (let i = 0; i < 5; i++) expect((await signIn(wrong(ADA), "10.4.0.77")).status).toBe(401);
    expect((await signIn(ADA, "10.4.0.77")).status).toBe(429);
    // Ada's browser, which signed in before, still signs her in at that address; a forged cookie does not pass for it.
    expect((await signIn(ADA, "10.4.0.66", earlier.device)).status).toBe(200);
    const [name, value] = earlier.device!.split("=");
    const unsigned = decodeURIComponent(value!).slice(0, decodeURIComponent(value!).lastIndexOf("."));
    const forged = `${name}=${encodeURIComponent(`${unsigned}.${"A".repeat(43)}=`)}`;
    expect((await signIn(ADA, "10.4.0.78", forged)).status).toBe(429);
    // The cookie is Ada's account's only: on Bob's account it is a stranger's browser, held at the swept address.
    expect((await signIn(BOB, "10.4.0.66", earlier.device)).status).toBe(429);
  });
});
