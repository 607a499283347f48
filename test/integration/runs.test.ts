import { testRunConfig } from "../support/run-config";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { newId } from "@/server/db/ids";
import { LOCAL_USER, type DatabaseHandle } from "@/server/db";
import { metricPoints, runs } from "@/server/db/schema";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let experimentId: string;
let versionId: string;
const runIds: string[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  const created = await callerFor(handle).experiments.create({ name: "tic-tac-toe" });
  experimentId = created.id;
  versionId = created.versionId;
  const statuses = ["completed", "running", "failed", "queued", "completed"] as const;
  for (const [i, status] of statuses.entries()) {
    const id = newId("run");
    runIds.push(id);
    await handle.db.insert(runs).values({
      id,
      projectId: DEFAULT_PROJECT,
      experimentId,
      experimentVersionId: versionId,
      createdBy: LOCAL_USER.id,
      name: `ttt-seed${i}`,
      status,
      config: testRunConfig({ seed: i }),
      seed: i,
      totalSteps: 100,
      step: i * 10,
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, i)),
    });
  }
});
afterAll(() => db.close());

describe("runs", () => {
  it("lists runs newest first with their experiment's name", async () => {
    const { items } = await callerFor(handle).runs.list();
    expect(items.map((r) => r.name)).toEqual(["ttt-seed4", "ttt-seed3", "ttt-seed2", "ttt-seed1", "ttt-seed0"]);
    expect(items[0]).toMatchObject({ experimentName: "tic-tac-toe", status: "completed", step: 40, totalSteps: 100 });
  });

  it("filters by status and by search text, and pages with a cursor", async () => {
    const caller = callerFor(handle);
    const completed = await caller.runs.list({ status: ["completed"] });
    expect(completed.items.map((r) => r.name)).toEqual(["ttt-seed4", "ttt-seed0"]);
    const searched = await caller.runs.list({ search: "SEED2" });
    expect(searched.items.map((r) => r.name)).toEqual(["ttt-seed2"]);
    const byExperimentName = await caller.runs.list({ search: "tac" });
    expect(byExperimentName.items).toHaveLength(5);
    const first = await caller.runs.list({ limit: 2 });
    expect(first.items.map((r) => r.name)).toEqual(["ttt-seed4", "ttt-seed3"]);
    const second = await caller.runs.list({ limit: 2, cursor: first.nextCursor! });
    expect(second.items.map((r) => r.name)).toEqual(["ttt-seed2", "ttt-seed1"]);
    const last = await caller.runs.list({ limit: 2, cursor: (await caller.runs.list({ limit: 4 })).nextCursor! });
    expect(last.items.map((r) => r.name)).toEqual(["ttt-seed0"]);
    expect(last.nextCursor).toBeNull();
  });

  it("treats % and _ in a search as plain characters", async () => {
    const { items } = await callerFor(handle).runs.list({ search: "%" });
    expect(items).toHaveLength(0);
  });

  it("returns one run with its config, and names an unknown id", async () => {
    const caller = callerFor(handle);
    const run = await caller.runs.byId({ id: runIds[2]! });
    expect(run).toMatchObject({ name: "ttt-seed2", status: "failed", config: { seed: 2 } });
    await expect(caller.runs.byId({ id: "run_missing" })).rejects.toThrow("No run with id 'run_missing'");
  });

  it("stores a metric point once even when a restarted worker sends it again", async () => {
    const runId = runIds[1]!;
    const point = { runId, name: "reward/mean", step: 3, value: 0.5 };
    await handle.db.insert(metricPoints).values(point).onConflictDoNothing();
    await handle.db
      .insert(metricPoints)
      .values({ ...point, value: 0.7 })
      .onConflictDoNothing();
    const rows = await handle.db.query.metricPoints.findMany({ where: (m, { eq }) => eq(m.runId, runId) });
    expect(rows).toHaveLength(1);
    expect(rows[0]!.value).toBe(0.5);
  });

  it("gives a zoomed range of one series at full resolution, and a min/max downsample of a wider one", async () => {
    const runId = runIds[4]!;
    const values = Array.from({ length: 5000 }, (_, step) => ({ runId, name: "loss/policy", step, value: Math.sin(step / 50) + (step === 2345 ? 10 : 0) }));
    for (let i = 0; i < values.length; i += 1000) await handle.db.insert(metricPoints).values(values.slice(i, i + 1000));
    await handle.db.insert(metricPoints).values({ runId, name: "reward/mean", step: 100, value: 1 });
    const caller = callerFor(handle);

    const zoomed = await caller.runs.metricRange({ runId, name: "loss/policy", fromStep: 2300, toStep: 2399 });
    expect(zoomed.count).toBe(100);
    expect(zoomed.points.map((p) => p.step)).toEqual(Array.from({ length: 100 }, (_, i) => 2300 + i));
    expect(zoomed.points[45]!.value).toBeCloseTo(10 + Math.sin(2345 / 50), 12);

    const wide = await caller.runs.metricRange({ runId, name: "loss/policy", fromStep: 0, toStep: 10_000, maxPoints: 200 });
    expect(wide.count).toBe(5000);
    expect(wide.points.length).toBeLessThanOrEqual(201);
    expect(wide.points.some((p) => p.step === 2345)).toBe(true); // the spike survives the downsample
    expect(wide.points.at(-1)!.step).toBe(4999);

    await expect(caller.runs.metricRange({ runId, name: "loss/policy", fromStep: 50, toStep: 10 })).rejects.toThrow(/fromStep must not be after toStep/);
    await expect(caller.runs.metricRange({ runId: "run_missing", name: "loss/policy", fromStep: 0, toStep: 1 })).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: "No run with id 'run_missing'",
    });
  });
});
