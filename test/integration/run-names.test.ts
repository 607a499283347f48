/**
 * Run names are unique in their project: two launches in the same second (the name's stamp is to the second) get
 * different names, `-2`, `-3`, … after the first, as do evaluations and exports of one checkpoint made twice. A
 * comparison's legend and tooltip tell runs apart by name.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { checkpoints, newId, type DatabaseHandle } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-run-names-"));

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** Every launch below happens at this one instant. */
const SECOND = new Date("2026-12-07T02:12:34.250Z");

async function arithmeticExperiment(name: string) {
  const { id } = await callerFor(handle).experiments.create({ name, config: { name, environment: "arithmetic", agent: { base: "arithmetic-base" } } });
  return id;
}

describe("run names", () => {
  it("differ for two launches in the same second, one after the other or at once", async () => {
    const caller = callerFor(handle);
    const experimentId = await arithmeticExperiment("same-second");
    vi.useFakeTimers({ toFake: ["Date"], now: SECOND });
    const first = await caller.runs.launch({ experimentId });
    const second = await caller.runs.launch({ experimentId });
    const together = await Promise.all([caller.runs.launch({ experimentId }), caller.runs.launch({ experimentId })]);
    const names = await Promise.all([first, second, ...together].map(async ({ runId }) => (await caller.runs.byId({ id: runId })).name));
    expect(names.slice(0, 2)).toEqual(["same-second-arithmetic-s0-20261207-021234", "same-second-arithmetic-s0-20261207-021234-2"]);
    expect(names.slice(2).sort()).toEqual(["same-second-arithmetic-s0-20261207-021234-3", "same-second-arithmetic-s0-20261207-021234-4"]);
  });

  it("differ for two evaluations or exports of one checkpoint", async () => {
    const caller = callerFor(handle);
    const { runId } = await caller.runs.launch({ experimentId: await arithmeticExperiment("evaluated") });
    const source = (await caller.runs.byId({ id: runId })).name;
    const dir = path.join(folder, runId, "step-000008");
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "model_config.json"), JSON.stringify({ vocabSize: 262, contextLength: 24, dModel: 64, nLayers: 2, nHeads: 4 }));
    const checkpointId = newId("ckpt");
    await handle.db.insert(checkpoints).values({ id: checkpointId, runId, step: 8, kind: "state", path: dir, sizeBytes: 1000 });

    const nameOf = async (made: Promise<{ runId: string }>) => (await caller.runs.byId({ id: (await made).runId })).name;
    expect(await nameOf(caller.runs.evaluate({ checkpointId }))).toBe(`${source}-eval-step8`);
    expect(await nameOf(caller.runs.evaluate({ checkpointId, episodes: 4 }))).toBe(`${source}-eval-step8-2`);
    expect(await nameOf(caller.runs.export({ checkpointId }))).toBe(`${source}-export-step8`);
    expect(await nameOf(caller.runs.export({ checkpointId }))).toBe(`${source}-export-step8-2`);
  });
});
