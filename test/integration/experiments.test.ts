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

const custom = { name: "mine", environment: "custom", agent: { base: "generalist-base" } };

describe("experiments", () => {
  it("creates an experiment with a first source snapshot, and lists it", async () => {
    const caller = callerFor(handle);
    const created = await caller.experiments.create({
      name: "  arithmetic-grpo ",
      description: "two-digit addition",
      files: { "environment.ts": "export default 1;" },
      config: { name: "arithmetic-grpo", environment: "arithmetic", agent: { base: "arithmetic-base" }, algorithm: { steps: 10 } },
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
    expect(detail.latest).toMatchObject({ version: 1, files: { "environment.ts": "export default 1;" }, config: { algorithm: { steps: 10 } } });
  });

  it("keeps every saved version unchanged when the source is saved again", async () => {
    const caller = callerFor(handle);
    const { id } = await caller.experiments.create({ name: "versions", files: { "a.ts": "v1" } });
    const second = await caller.experiments.save({ id, files: { "a.ts": "v2" }, config: { ...custom, algorithm: { learningRate: 0.1 } }, message: "tweak" });
    const third = await caller.experiments.save({ id, files: { "a.ts": "v3" }, config: custom });
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
    const saved = await Promise.all(Array.from({ length: 6 }, (_, i) => caller.experiments.save({ id, files: { "a.ts": `${i}` }, config: custom })));
    expect(saved.map((s) => s.version).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7]);
  });

  it("stores a config parsed, refuses a wrong field by its whole path, and saves nothing then", async () => {
    const caller = callerFor(handle);
    const { id } = await caller.experiments.create({ name: "typed" });
    // Without a config or template: the experiment's own environment.ts on the generalist base, every default filled in.
    const first = await caller.experiments.version({ id, version: 1 });
    expect(first.config).toMatchObject({ name: "typed", environment: "custom", agent: { base: "generalist-base" }, algorithm: { name: "grpo", steps: 100 } });
    const saved = await caller.experiments.save({ id, files: {}, config: { ...custom, algorithm: { name: "ppo" } } });
    const stored = await caller.experiments.version({ id, version: saved.version });
    expect(stored.config.agent.valueHead).toBe(true); // what PPO implies, written down
    expect(stored.config.evaluation.episodes).toBe(64);
    const wrong = { ...custom, algorithm: { steps: 0 } };
    const error = await caller.experiments.save({ id, files: {}, config: wrong }).catch((e: unknown) => e);
    expect((error as TRPCError).code).toBe("BAD_REQUEST");
    expect((error as TRPCError).message).toMatch(/^config\.algorithm\.steps: must be a whole number from 1 to 1000000 \(got 0\)$/m);
    const missing = await caller.experiments.save({ id, files: {}, config: { name: "x" } as typeof custom }).catch((e: unknown) => e);
    expect((missing as TRPCError).message).toMatch(/^config\.environment: /m);
    expect((missing as TRPCError).message).toMatch(/^config\.agent: /m);
    expect((await caller.experiments.byId({ id })).latestVersion).toBe(saved.version);
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
    await expect(caller.experiments.save({ id: "exp_nope", files: {}, config: custom })).rejects.toThrow("No experiment with id 'exp_nope'");
  });

  it("refuses anonymous callers", async () => {
    const anonymous = callerFor(handle, null);
    await expect(anonymous.experiments.list()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });
});
