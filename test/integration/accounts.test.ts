/**
 * Accounts on a team server (TINKERLAB_AUTH=team), through better-auth's own handler on a real database: the first
 * account becomes the admin (and an owner of the default project) and sign-up then needs an invitation link, passwords
 * are stored only hashed, a session cookie signs requests in, and a cross-site request with the cookie is refused.
 * Sign-in limits: sign-in-limits.test.ts; the cookie-signing secret: auth-secret.test.ts.
 */
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticate } from "@/server/auth";
import { type Accounts, accountsFor } from "@/server/auth/accounts";
import { CLIENT_IP_HEADER } from "@/server/auth/constants";
import { createInvitation, createProject, DEFAULT_PROJECT } from "@/server/auth/projects";
import { accounts, LOCAL_USER, projectMembers, users, type DatabaseHandle } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let auth: Accounts;
const ORIGIN = "http://127.0.0.1:3000";

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  const secretFile = path.join(mkdtempSync(path.join(os.tmpdir(), "tinkerlab-secret-")), "auth-secret");
  auth = await accountsFor(handle.db, { secret: undefined, secretFile, host: "127.0.0.1", port: 3000 });
});
afterAll(() => db.close());

async function roleOf(projectId: string, userId: string) {
  const [row] = await handle.db
    .select({ role: projectMembers.role })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)));
  return row?.role ?? null;
}

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
  it("makes the first account the admin, stores its password hashed, then closes sign-up to all but invitation holders", async () => {
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
    expect(second.body.message).toMatch(/Sign-up on this server needs an invitation link: ask a project owner for one/);
    expect(await handle.db.select().from(users).where(eq(users.email, "bob@example.com"))).toEqual([]);
    // The first account owns the default project (the examples and what the server made before it had accounts).
    expect(await roleOf(DEFAULT_PROJECT, ada!.id)).toBe("owner");
    // The local user stands for "no accounts": on a team server it is no member of anything.
    expect(await roleOf(DEFAULT_PROJECT, LOCAL_USER.id)).toBeNull();
  });

  it("lets whoever holds a working invitation link sign up, joining its project with its role", async () => {
    const [ada] = await handle.db.select().from(users).where(eq(users.email, "ada@example.com"));
    const { id: projectId } = await createProject(handle.db, { name: "Ada's team", ownerId: ada!.id });
    const { token } = await createInvitation(handle.db, { projectId, role: "editor", createdBy: ada!.id, expiresAt: new Date(Date.now() + 3_600_000) });
    const body = { name: "Bob", email: "bob@example.com", password: "another long password" };
    const forged = await post("/sign-up/email?invite=tli_forged", body, { [CLIENT_IP_HEADER]: "10.0.0.5" });
    expect(forged.status).toBe(403);
    const invited = await post(`/sign-up/email?invite=${token}`, body, { [CLIENT_IP_HEADER]: "10.0.0.5" });
    expect(invited.status).toBe(200);
    const [bob] = await handle.db.select().from(users).where(eq(users.email, "bob@example.com"));
    expect(bob!.role).not.toBe("admin");
    expect(await roleOf(projectId, bob!.id)).toBe("editor");
    expect(await roleOf(DEFAULT_PROJECT, bob!.id)).toBeNull();
  });

  it("signs requests in with the session cookie, and only with it", async () => {
    const signedIn = await post("/sign-in/email", { email: "ada@example.com", password: "correct horse battery staple" }, { [CLIENT_IP_HEADER]: "10.0.0.4" });
    expect(signedIn.status).toBe(200);
    const withCookie = await authenticate(handle.db, new Headers({ cookie: signedIn.cookie! }), "team");
    expect(withCookie).toMatchObject({ kind: "person", admin: true, user: { name: "Ada", email: "ada@example.com" } });
    expect(await authenticate(handle.db, new Headers(), "team")).toEqual({ kind: "anonymous" });
    expect(await authenticate(handle.db, new Headers({ cookie: "tinkerlab.session_token=forged.value" }), "team")).toEqual({ kind: "anonymous" });
    // Without a user, every procedure refuses, naming the way in.
    await expect(callerFor(handle, null).experiments.list({})).rejects.toThrow(/Sign in required/);
    // The local mode needs no account at all.
    expect(await authenticate(handle.db, new Headers(), "local")).toMatchObject({ kind: "local", user: { id: LOCAL_USER.id } });

    // A request from another site carrying the cookie is refused; signing out ends the session.
    const crossSite = await post("/sign-out", {}, { origin: "http://evil.example", cookie: signedIn.cookie! });
    expect(crossSite.status).toBe(403);
    expect((await post("/sign-out", {}, { cookie: signedIn.cookie!, [CLIENT_IP_HEADER]: "10.0.0.4" })).status).toBe(200);
    expect(await authenticate(handle.db, new Headers({ cookie: signedIn.cookie! }), "team")).toEqual({ kind: "anonymous" });
  });
});
