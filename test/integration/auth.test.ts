/**
 * API keys: a key acts for the person who made it, in the key's one project, with the weaker of the key's role and
 * its maker's role there now. A request whose key is unknown, revoked or expired is refused (UNAUTHORIZED).
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCaller } from "@/server/api/root";
import { createContextInner } from "@/server/api/trpc";
import { authenticate } from "@/server/auth";
import { createApiKey } from "@/server/auth/api-keys";
import { createProject, DEFAULT_PROJECT, setMember } from "@/server/auth/projects";
import { apiKeys, experiments, users } from "@/server/db/schema";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
const ADA = { id: "usr_ada", name: "Ada", email: "ada@example.com" };
let adasProject: string;
let localExperiment: string;

beforeAll(async () => {
  db = await openTestDatabase();
  await db.handle.db.insert(users).values(ADA);
  // Ada edits the default project and owns a project of her own.
  await setMember(db.handle.db, DEFAULT_PROJECT, ADA.id, "editor");
  adasProject = (await createProject(db.handle.db, { name: "Ada's", ownerId: ADA.id })).id;
  localExperiment = (await callerFor(db.handle).experiments.create({ name: "the local user's" })).id;
});
afterAll(() => db.close());

async function callerWithHeaders(headers: Record<string, string>, mode: "local" | "apikey") {
  const principal = await authenticate(db.handle.db, new Headers(headers), mode);
  return createCaller(createContextInner({ database: db.handle, principal }));
}

const keyCaller = (key: string, mode: "local" | "apikey" = "apikey") => callerWithHeaders({ authorization: `Bearer ${key}` }, mode);

describe("API keys", () => {
  it("lets a request with a valid key act as the key's user in the key's project, even in local mode", async () => {
    const { key, id: keyId } = await createApiKey(db.handle.db, { userId: ADA.id, name: "laptop", projectId: DEFAULT_PROJECT, role: "editor" });
    const principal = await authenticate(db.handle.db, new Headers({ authorization: `Bearer ${key}` }), "local");
    expect(principal).toMatchObject({ kind: "apikey", user: { id: ADA.id }, keyId, projectId: DEFAULT_PROJECT, role: "editor" });

    const caller = await keyCaller(key, "local");
    const { id } = await caller.experiments.create({ name: "ada's" });
    const [row] = await db.handle.db.select().from(experiments).where(eq(experiments.id, id));
    expect(row).toMatchObject({ ownerId: ADA.id, projectId: DEFAULT_PROJECT });
    // Its use is recorded, to the minute: a stream of requests writes it once, not once each.
    const lastUsed = async () => (await db.handle.db.select({ at: apiKeys.lastUsedAt }).from(apiKeys).where(eq(apiKeys.id, keyId)))[0]!.at;
    const first = await lastUsed();
    expect(first).toBeInstanceOf(Date);
    await authenticate(db.handle.db, new Headers({ authorization: `Bearer ${key}` }), "local");
    expect(await lastUsed()).toEqual(first);
  });

  it("sees only the key's project, even where its maker is a member of more", async () => {
    const { key } = await createApiKey(db.handle.db, { userId: ADA.id, name: "own project", projectId: adasProject, role: "owner" });
    const caller = await keyCaller(key);
    const { id } = await caller.experiments.create({ name: "in Ada's project" });
    const [row] = await db.handle.db.select().from(experiments).where(eq(experiments.id, id));
    expect(row!.projectId).toBe(adasProject);

    const listed = await caller.experiments.list();
    expect(listed.map((e) => e.projectId)).toEqual([adasProject]);
    expect((await caller.projects.list()).map((p) => p.id)).toEqual([adasProject]);
    // The default project's objects are not there for this key, worded as for objects that do not exist.
    await expect(caller.experiments.byId({ id: localExperiment })).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(caller.experiments.create({ name: "elsewhere", projectId: DEFAULT_PROJECT })).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("acts with the weaker of the key's role and its maker's role", async () => {
    // An owner key of an editor acts as an editor: it edits, but does not manage the project.
    const { key: ownerKey } = await createApiKey(db.handle.db, { userId: ADA.id, name: "owner key", projectId: DEFAULT_PROJECT, role: "owner" });
    const asOwnerKey = await keyCaller(ownerKey);
    expect((await asOwnerKey.projects.byId({ id: DEFAULT_PROJECT })).role).toBe("editor");
    await asOwnerKey.experiments.rename({ id: localExperiment, name: "renamed through a key" });
    await expect(asOwnerKey.projects.rename({ id: DEFAULT_PROJECT, name: "Taken over" })).rejects.toMatchObject({
      code: "FORBIDDEN",
      message: expect.stringMatching(/editor \(through this API key\)/),
    });

    // A viewer key of an owner only views.
    const { key: viewerKey } = await createApiKey(db.handle.db, { userId: ADA.id, name: "viewer key", projectId: adasProject, role: "viewer" });
    const asViewerKey = await keyCaller(viewerKey);
    expect((await asViewerKey.projects.byId({ id: adasProject })).role).toBe("viewer");
    await expect(asViewerKey.experiments.create({ name: "not allowed" })).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(asViewerKey.experiments.create({ name: "not allowed", projectId: adasProject })).rejects.toMatchObject({ code: "FORBIDDEN" });
    await expect(asViewerKey.projects.rename({ id: adasProject, name: "Renamed" })).rejects.toMatchObject({ code: "FORBIDDEN" });

    // The maker's role now counts, not the one it had when the key was made.
    const { key: editorKey } = await createApiKey(db.handle.db, { userId: ADA.id, name: "editor key", projectId: DEFAULT_PROJECT, role: "editor" });
    await setMember(db.handle.db, DEFAULT_PROJECT, ADA.id, "viewer");
    try {
      const asEditorKey = await keyCaller(editorKey);
      expect((await asEditorKey.experiments.byId({ id: localExperiment })).role).toBe("viewer");
      await expect(asEditorKey.experiments.rename({ id: localExperiment, name: "not any more" })).rejects.toMatchObject({ code: "FORBIDDEN" });
    } finally {
      await setMember(db.handle.db, DEFAULT_PROJECT, ADA.id, "editor");
    }
  });

  it("refuses a request without a key when keys are required", async () => {
    const caller = await callerWithHeaders({}, "apikey");
    await expect(caller.experiments.list()).rejects.toMatchObject({ code: "UNAUTHORIZED", message: expect.stringMatching(/Sign in required/) });
  });

  it("refuses a revoked key and says so, even in local mode", async () => {
    const { id, key } = await createApiKey(db.handle.db, { userId: ADA.id, name: "old", projectId: DEFAULT_PROJECT, role: "editor" });
    expect((await (await keyCaller(key, "local")).experiments.list()).length).toBeGreaterThan(0);
    await db.handle.db.update(apiKeys).set({ revokedAt: new Date() }).where(eq(apiKeys.id, id));
    expect(await authenticate(db.handle.db, new Headers({ authorization: `Bearer ${key}` }), "local")).toEqual({ kind: "anonymous", rejected: "apikey" });
    const caller = await keyCaller(key, "local");
    await expect(caller.experiments.list()).rejects.toMatchObject({ code: "UNAUTHORIZED", message: expect.stringMatching(/unknown, revoked or expired/) });
  });

  it("refuses an expired key, and accepts one until it expires", async () => {
    const { key: expired } = await createApiKey(db.handle.db, {
      userId: ADA.id,
      name: "expired",
      projectId: DEFAULT_PROJECT,
      role: "editor",
      expiresAt: new Date(Date.now() - 1000),
    });
    await expect((await keyCaller(expired)).experiments.list()).rejects.toMatchObject({
      code: "UNAUTHORIZED",
      message: expect.stringMatching(/unknown, revoked or expired/),
    });
    const { key: current } = await createApiKey(db.handle.db, {
      userId: ADA.id,
      name: "current",
      projectId: DEFAULT_PROJECT,
      role: "editor",
      expiresAt: new Date(Date.now() + 3_600_000),
    });
    expect((await (await keyCaller(current)).experiments.list()).length).toBeGreaterThan(0);
  });

  it("refuses an unknown key", async () => {
    await expect((await keyCaller("tl_not_a_real_key_at_all")).experiments.list()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });
});
