/**
 * A key never does more than its role, whoever made it: the admin's viewer key cannot upload or import a base (it
 * hears which role that takes), a key the admin made with the admin role can, and stops when its maker is no longer
 * the admin. Only the admin makes admin keys, and the key list shows their role.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUT as uploadFile } from "@/app/api/bases/[name]/files/[file]/route";
import { POST as importBase } from "@/app/api/bases/[name]/import/route";
import type { User } from "@/server/auth/access";
import { createApiKey } from "@/server/auth/api-keys";
import { createProject } from "@/server/auth/projects";
import { type DatabaseHandle, setDatabase, users } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

const artifacts = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-key-scopes-"));
// Routes read the mode and the artifacts folder from the environment: keys are the only credential here.
process.env.TINKERLAB_AUTH = "apikey";
process.env.ARTIFACTS_DIR = artifacts;

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const admin: User = { id: "usr_admin", name: "Ada", email: "ada@lab.test" };
const member: User = { id: "usr_member", name: "Max", email: "max@lab.test" };
let adminProject = "";
let memberProject = "";

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
  await handle.db.insert(users).values([
    { ...admin, role: "admin" },
    { ...member, role: "member" },
  ]);
  adminProject = (await createProject(handle.db, { name: "Ada's", ownerId: admin.id })).id;
  memberProject = (await createProject(handle.db, { name: "Max's", ownerId: member.id })).id;
});
afterAll(async () => {
  await db.close();
  fs.rmSync(artifacts, { recursive: true, force: true });
});

const asAdmin = () => callerFor(handle, { kind: "person", user: admin, admin: true });
const asMember = () => callerFor(handle, { kind: "person", user: member, admin: false });

const upload = (key: string, name: string) =>
  uploadFile(
    new Request(`http://127.0.0.1:3000/api/bases/${name}/files/config.json`, {
      method: "PUT",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/octet-stream" },
      body: JSON.stringify({ model_type: "llama" }),
    }),
    { params: Promise.resolve({ name, file: "config.json" }) },
  );

// Options the import refuses before it converts anything: an answer other than 403 means the gate let the key by.
const importWithBadOptions = (key: string, name: string) =>
  importBase(
    new Request(`http://127.0.0.1:3000/api/bases/${name}/import`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ contextLength: "long" }),
    }),
    { params: Promise.resolve({ name }) },
  );

describe("a key's role bounds what its maker may do through it", () => {
  it("refuses the admin's viewer key a base upload and import, naming the admin role they take", async () => {
    const { key } = await createApiKey(handle.db, { userId: admin.id, name: "read-only laptop", projectId: adminProject, role: "viewer" });
    const uploaded = await upload(key, "tiny-llama");
    expect(uploaded.status).toBe(403);
    expect((await uploaded.json()).error).toMatch(/API key that the admin made with the admin role; this key has no admin role/);
    const imported = await importWithBadOptions(key, "tiny-llama");
    expect(imported.status).toBe(403);
    expect((await imported.json()).error).toMatch(/admin role/);
    expect(fs.existsSync(path.join(artifacts, "uploads", "tiny-llama"))).toBe(false);
  });

  it("lets a key the admin made with the admin role upload and import, until its maker is no longer the admin", async () => {
    const made = await asAdmin().apiKeys.create({ name: "model uploads", projectId: adminProject, role: "admin" });
    const uploaded = await upload(made.key, "tiny-llama");
    expect(uploaded.status).toBe(200);
    expect(await uploaded.json()).toMatchObject({ file: "config.json" });
    expect(fs.existsSync(path.join(artifacts, "uploads", "tiny-llama", "config.json"))).toBe(true);
    const imported = await importWithBadOptions(made.key, "tiny-llama");
    expect(imported.status).toBe(400);
    expect((await imported.json()).error).toMatch(/invalid import options/);
    // The key list says what it is.
    expect((await asAdmin().apiKeys.list()).find((k) => k.id === made.id)).toMatchObject({ role: "admin" });

    await handle.db.update(users).set({ role: "member" }).where(eq(users.id, admin.id));
    try {
      expect((await upload(made.key, "tiny-llama")).status).toBe(403);
    } finally {
      await handle.db.update(users).set({ role: "admin" }).where(eq(users.id, admin.id));
    }
  });

  it("lets only the admin make an admin key", async () => {
    await expect(asMember().apiKeys.create({ name: "sneaky", projectId: memberProject, role: "admin" })).rejects.toMatchObject({
      code: "FORBIDDEN",
      message: expect.stringMatching(/only the server's admin may make such a key; choose viewer, editor or owner/),
    });
    expect(await asMember().apiKeys.list()).toEqual([]);
  });
});
