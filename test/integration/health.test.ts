import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverEnv } from "@/server/env";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db.close());

describe("health", () => {
  it("reports the database kind, the applied migrations and the training backend to a signed-in caller", async () => {
    const health = await callerFor(db.handle).health.check();
    expect(health.status).toBe("ok");
    const { database, training } = health;
    expect(database.kind).toBe(serverEnv().TINKERLAB_TEST_DB);
    expect(database.migration!.applied).toBeGreaterThanOrEqual(1);
    expect(database.migration!.latest).toMatch(/^\d{4}_/);
    expect(database.latencyMs).toBeGreaterThanOrEqual(0);
    expect(training!.requested).toBe("auto");
    expect(training!.workers).toEqual([]);
  });

  it("tells an anonymous caller only that it answers, and how fast", async () => {
    const health = await callerFor(db.handle, null).health.check();
    expect(health).toEqual({ status: "ok", database: { latencyMs: expect.any(Number) } });
  });
});
