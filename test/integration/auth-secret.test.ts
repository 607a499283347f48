/**
 * The secret that signs a team server's session cookies lives outside the database: a copy of the database (its
 * sessions and its settings) signs nobody in, a secret an older server kept there is removed and no longer works, and
 * the file the secret is made in is readable by its owner only.
 */
import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticate } from "@/server/auth";
import { type Accounts, accountsFor } from "@/server/auth/accounts";
import { CLIENT_IP_HEADER, SESSION_COOKIE } from "@/server/auth/constants";
import { serverSettings, sessions } from "@/server/db";
import { openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let auth: Accounts;
const secretFile = path.join(mkdtempSync(path.join(os.tmpdir(), "tinkerlab-secret-")), "data", "auth-secret");
const ORIGIN = "http://127.0.0.1:3000";
/** What a server before this change kept in `server_settings`: its cookies were signed with it. */
const OLDER_SERVERS_SECRET = "an older server's secret, kept in its database";

beforeAll(async () => {
  db = await openTestDatabase();
  await db.handle.db.insert(serverSettings).values({ key: "auth_secret", value: OLDER_SERVERS_SECRET });
  auth = await accountsFor(db.handle.db, { secret: undefined, secretFile, host: "127.0.0.1", port: 3000 });
});
afterAll(() => db.close());

async function post(route: string, body: unknown) {
  const response = await auth.handler(
    new Request(`${ORIGIN}/api/auth${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ORIGIN, [CLIENT_IP_HEADER]: "10.0.0.1" },
      body: JSON.stringify(body),
    }),
  );
  return { status: response.status, cookie: response.headers.getSetCookie()[0]?.split(";")[0] ?? null };
}

/** The cookie better-auth would set for a session token, signed with `secret` (HMAC-SHA256, as better-call signs). */
const cookieFor = (token: string, secret: string) =>
  `${SESSION_COOKIE}=${encodeURIComponent(`${token}.${createHmac("sha256", secret).update(token).digest("base64")}`)}`;

const who = async (cookie: string) => (await authenticate(db.handle.db, new Headers({ cookie }), "team")).kind;

describe("the cookie-signing secret", () => {
  it("is made in a file only its owner reads, and one an older server kept in the database is removed", async () => {
    expect(statSync(secretFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(secretFile, "utf8").trim().length).toBeGreaterThanOrEqual(32);
    const settings = await db.handle.db.select({ key: serverSettings.key }).from(serverSettings);
    expect(settings.map((row) => row.key)).not.toContain("auth_secret");
  });

  it("cannot be had from a copy of the database: the tokens stored there, signed with anything found there, sign nobody in", async () => {
    const signedUp = await post("/sign-up/email", { name: "Ada", email: "ada@example.com", password: "correct horse battery staple" });
    expect(signedUp.status).toBe(200);
    const signedIn = await post("/sign-in/email", { email: "ada@example.com", password: "correct horse battery staple" });
    expect(signedIn.status).toBe(200);
    expect(await who(signedIn.cookie!)).toBe("person");

    // Everything a copy of the database holds that could be a secret, and the older server's secret besides.
    const tokens = (await db.handle.db.select({ token: sessions.token }).from(sessions)).map((row) => row.token);
    const candidates = [...(await db.handle.db.select({ value: serverSettings.value }).from(serverSettings)).map((row) => row.value), OLDER_SERVERS_SECRET];
    expect(tokens.length).toBe(2);
    for (const token of tokens) {
      for (const candidate of candidates) expect(await who(cookieFor(token, candidate))).toBe("anonymous");
      // The recipe is right: with the secret from its file, the same token makes a working cookie.
      expect(await who(cookieFor(token, readFileSync(secretFile, "utf8").trim()))).toBe("person");
    }
  });
});
