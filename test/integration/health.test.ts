import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverEnv } from "@/server/env";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db.close());

describe("health", () => {
  it("reports the database kind, the applied migrations and the training backend", async () => {
    const health = await callerFor(db.handle, null).health.check();
    expect(health.status).toBe("ok");
    expect(health.database.kind).toBe(serverEnv().TINKERLAB_TEST_DB);
    expect(health.database.migration.applied).toBeGreaterThanOrEqual(1);
    expect(health.database.migration.latest).toMatch(/^\d{4}_/);
    expect(health.training.requested).toBe("auto");
  });
});
