import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCaller } from "@/server/api/root";
import { authenticate, createContextInner } from "@/server/api/trpc";
import { createApiKey } from "@/server/auth/api-keys";
import { apiKeys, users } from "@/server/db/schema";
import { openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
  await db.handle.db.insert(users).values({ id: "usr_ada", name: "Ada", email: "ada@example.com" });
});
afterAll(() => db.close());

async function callerWithHeaders(headers: Record<string, string>, mode: "local" | "apikey") {
  const auth = await authenticate(db.handle.db, new Headers(headers), mode);
  return createCaller(createContextInner({ database: db.handle, ...auth }));
}

describe("API keys", () => {
  it("lets a request with a valid key act as the key's user, even in local mode", async () => {
    const { key } = await createApiKey(db.handle.db, "usr_ada", "laptop");
    const caller = await callerWithHeaders({ authorization: `Bearer ${key}` }, "apikey");
    const { id } = await caller.experiments.create({ name: "ada's" });
    const [row] = await db.handle.db.query.experiments.findMany({ where: (e, { eq }) => eq(e.id, id) });
    expect(row?.ownerId).toBe("usr_ada");
  });

  it("refuses a request without a key when keys are required", async () => {
    const caller = await callerWithHeaders({}, "apikey");
    await expect(caller.experiments.list()).rejects.toThrow(/Sign in required/);
  });

  it("refuses a revoked key and says so", async () => {
    const { id, key } = await createApiKey(db.handle.db, "usr_ada", "old");
    await db.handle.db.update(apiKeys).set({ revokedAt: new Date() }).where(eq(apiKeys.id, id));
    const caller = await callerWithHeaders({ authorization: `Bearer ${key}` }, "local");
    await expect(caller.experiments.list()).rejects.toThrow(/unknown or revoked/);
  });
});
