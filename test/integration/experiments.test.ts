import { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import type { DatabaseHandle } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
});
afterAll(() => db.close());

describe("experiments", () => {
  it("creates an experiment with a first source snapshot, and lists it", async () => {
    const caller = callerFor(handle);
    const created = await caller.experiments.create({
      name: "  arithmetic-grpo ",
      description: "two-digit addition",
      files: { "environment.ts": "export default 1;" },
      config: { steps: 10 },
    });
    expect(created.version).toBe(1);
    const list = await caller.experiments.list();
    const found = list.find((e) => e.id === created.id);
    // Without a projectId it goes to the first project the caller may edit: the default project for the local user.
    expect(found).toMatchObject({
      name: "arithmetic-grpo",
      description: "two-digit addition",
      runCount: 0,
      latestVersion: 1,
      projectId: DEFAULT_PROJECT,
      projectName: "Default",
    });
    const detail = await caller.experiments.byId({ id: created.id });
    expect(detail.role).toBe("owner");
    expect(detail.latest).toMatchObject({ version: 1, files: { "environment.ts": "export default 1;" }, config: { steps: 10 } });
  });

  it("keeps every saved version unchanged when the source is saved again", async () => {
    const caller = callerFor(handle);
    const { id } = await caller.experiments.create({ name: "versions", files: { "a.ts": "v1" } });
    const second = await caller.experiments.save({ id, files: { "a.ts": "v2" }, config: { lr: 0.1 }, message: "tweak" });
    const third = await caller.experiments.save({ id, files: { "a.ts": "v3" }, config: {} });
    expect([second.version, third.version]).toEqual([2, 3]);
    const versions = await caller.experiments.versions({ id });
    expect(versions.map((v) => v.version)).toEqual([3, 2, 1]);
    const detail = await caller.experiments.byId({ id });
    expect(detail.latest?.files).toEqual({ "a.ts": "v3" });
    const [v1] = await handle.db.query.experimentVersions.findMany({ where: (v, { and, eq }) => and(eq(v.experimentId, id), eq(v.version, 1)) });
    expect(v1?.files).toEqual({ "a.ts": "v1" });
  });

  it("saves versions of one experiment concurrently without losing or duplicating a number", async () => {
    const caller = callerFor(handle);
    const { id } = await caller.experiments.create({ name: "concurrent" });
    const saved = await Promise.all(Array.from({ length: 6 }, (_, i) => caller.experiments.save({ id, files: { "a.ts": `${i}` }, config: {} })));
    expect(saved.map((s) => s.version).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7]);
  });

  it("rejects a missing name with a message naming the field", async () => {
    const caller = callerFor(handle);
    const error = await caller.experiments.create({ name: "   " }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TRPCError);
    expect((error as TRPCError).code).toBe("BAD_REQUEST");
    expect((error as TRPCError).message).toContain("give the experiment a name");
  });

  it("rejects a file path that could escape the snapshot", async () => {
    const caller = callerFor(handle);
    await expect(caller.experiments.create({ name: "bad", files: { "../etc/passwd": "x" } })).rejects.toThrow(/file paths use letters/);
  });

  it("names the id it cannot find", async () => {
    const caller = callerFor(handle);
    await expect(caller.experiments.byId({ id: "exp_nope" })).rejects.toThrow("No experiment with id 'exp_nope'");
    await expect(caller.experiments.save({ id: "exp_nope", files: {}, config: {} })).rejects.toThrow("No experiment with id 'exp_nope'");
  });

  it("refuses anonymous callers", async () => {
    const anonymous = callerFor(handle, null);
    await expect(anonymous.experiments.list()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });
});
