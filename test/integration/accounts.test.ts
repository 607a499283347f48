/**
 * Accounts on a team server (TINKERLAB_AUTH=team), through better-auth's own handler on a real database: the first
 * account becomes the admin and sign-up then closes, passwords are stored only hashed, a session cookie signs
 * requests in, sign-in is rate-limited per client address, and a cross-site request with the cookie is refused.
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticate } from "@/server/api/trpc";
import { type Accounts, accountsFor } from "@/server/auth/accounts";
import { CLIENT_IP_HEADER } from "@/server/auth/constants";
import { accounts, LOCAL_USER, users, type DatabaseHandle } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let auth: Accounts;
const ORIGIN = "http://127.0.0.1:3000";

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  auth = await accountsFor(handle.db, { secret: undefined, host: "127.0.0.1", port: 3000 });
});
afterAll(() => db.close());

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await auth.handler(
    new Request(`${ORIGIN}/api/auth${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ORIGIN, [CLIENT_IP_HEADER]: "10.0.0.1", ...headers },
      body: JSON.stringify(body),
    }),
  );
  const text = await response.text();
  return { status: response.status, cookie: response.headers.getSetCookie()[0]?.split(";")[0] ?? null, body: text ? JSON.parse(text) : null };
}

describe("accounts on a team server", () => {
  it("makes the first account the admin, stores its password hashed, then closes sign-up", async () => {
    const password = "correct horse battery staple";
    const first = await post("/sign-up/email", { name: "Ada", email: "ada@example.com", password }, { [CLIENT_IP_HEADER]: "10.0.0.2" });
    expect(first.status).toBe(200);
    expect(first.cookie).toMatch(/^tinkerlab\.session_token=/);
    const [ada] = await handle.db.select().from(users).where(eq(users.email, "ada@example.com"));
    expect(ada).toMatchObject({ name: "Ada", role: "admin" });
    expect(ada!.id).toMatch(/^usr_/);
    const [credential] = await handle.db.select({ password: accounts.password }).from(accounts).where(eq(accounts.userId, ada!.id));
    expect(credential!.password).not.toContain(password);
    expect(credential!.password!.length).toBeGreaterThan(64);

    const second = await post(
      "/sign-up/email",
      { name: "Bob", email: "bob@example.com", password: "another long password" },
      { [CLIENT_IP_HEADER]: "10.0.0.3" },
    );
    expect(second.status).toBe(403);
    expect(second.body.message).toMatch(/already has its first account: ask its admin for an invitation/);
    expect(await handle.db.select().from(users).where(eq(users.email, "bob@example.com"))).toEqual([]);
  });

  it("signs requests in with the session cookie, and only with it", async () => {
    const signedIn = await post("/sign-in/email", { email: "ada@example.com", password: "correct horse battery staple" }, { [CLIENT_IP_HEADER]: "10.0.0.4" });
    expect(signedIn.status).toBe(200);
    const withCookie = await authenticate(handle.db, new Headers({ cookie: signedIn.cookie! }), "team");
    expect(withCookie.user).toMatchObject({ name: "Ada", email: "ada@example.com" });
    expect((await authenticate(handle.db, new Headers(), "team")).user).toBeNull();
    expect((await authenticate(handle.db, new Headers({ cookie: "tinkerlab.session_token=forged.value" }), "team")).user).toBeNull();
    // Without a user, every procedure refuses, naming the way in.
    await expect(callerFor(handle, null).experiments.list({})).rejects.toThrow(/Sign in required/);
    // The local mode needs no account at all.
    expect((await authenticate(handle.db, new Headers(), "local")).user).toMatchObject({ id: LOCAL_USER.id });

    // A request from another site carrying the cookie is refused; signing out ends the session.
    const crossSite = await post("/sign-out", {}, { origin: "http://evil.example", cookie: signedIn.cookie! });
    expect(crossSite.status).toBe(403);
    expect((await post("/sign-out", {}, { cookie: signedIn.cookie!, [CLIENT_IP_HEADER]: "10.0.0.4" })).status).toBe(200);
    expect((await authenticate(handle.db, new Headers({ cookie: signedIn.cookie! }), "team")).user).toBeNull();
  });

  it("rate-limits sign-in per client address: the sixth try in a minute is refused, another address is not", async () => {
    const attempt = (ip: string) => post("/sign-in/email", { email: "ada@example.com", password: "wrong password here" }, { [CLIENT_IP_HEADER]: ip });
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await attempt("10.9.9.9")).status);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses[5]).toBe(429);
    expect((await attempt("10.9.9.10")).status).toBe(401);
  });
});
