/**
 * The compare view's reads: every series of a set of panels for several runs in one call (with a running total of
 * tokens for a tokens axis), the source files of each run's experiment version, and who may read them: a share
 * link's holder reads exactly the runs its link names, and one run it does not name refuses the whole call.
 */
import { testRunConfig } from "../support/run-config";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { User } from "@/server/auth/access";
import { SHARE_HEADER } from "@/server/auth/constants";
import { createProject } from "@/server/auth/projects";
import { authenticate } from "@/server/auth/request";
import { createShareLink } from "@/server/auth/share-links";
import { type DatabaseHandle, metricPoints, newId, runs, users } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const ada: User = { id: "usr_ada", name: "Ada", email: "ada@lab.test" };
const fx = { project: "", experiment: "", runs: [] as string[] };

const ENV_V1 = "export const target = 10;\nexport function reward(x: number) {\n  return -Math.abs(x - target);\n}\n";
const ENV_V2 = "export const target = 12;\nexport function reward(x: number) {\n  return -Math.abs(x - target);\n}\n";

async function insertRun(versionId: string, name: string, seed: number) {
  const id = newId("run");
  await handle.db.insert(runs).values({
    id,
    projectId: fx.project,
    experimentId: fx.experiment,
    experimentVersionId: versionId,
    createdBy: ada.id,
    name,
    status: "completed",
    config: testRunConfig({ seed }),
    seed,
    totalSteps: 3000,
  });
  return id;
}

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  await handle.db.insert(users).values(ada);
  fx.project = (await createProject(handle.db, { name: "Lab", ownerId: ada.id })).id;
  const caller = callerFor(handle, ada);
  const config = { name: "target", environment: "custom", agent: { base: "generalist-base" } } as const;
  const created = await caller.experiments.create({ name: "target", projectId: fx.project, files: { "environment.ts": ENV_V1, "notes.md": "same" }, config });
  fx.experiment = created.id;
  const second = await caller.experiments.save({ id: created.id, files: { "environment.ts": ENV_V2, "notes.md": "same" }, config, message: "target 12" });
  fx.runs.push(await insertRun(created.versionId, "v1-s0", 0), await insertRun(created.versionId, "v1-s1", 1), await insertRun(second.versionId, "v2-s0", 0));

  const start = Date.UTC(2026, 0, 1);
  const points = fx.runs.flatMap((runId, r) =>
    Array.from({ length: 3000 }, (_, step) => [
      { runId, name: "reward/mean", step, value: r + step / 3000 + (step === 1234 ? 50 : 0), wallTime: new Date(start + r * 60_000 + step * 500) },
      { runId, name: "train/tokens", step, value: 10 + r, wallTime: new Date(start + r * 60_000 + step * 500) },
    ]).flat(),
  );
  for (let i = 0; i < points.length; i += 2000) await handle.db.insert(metricPoints).values(points.slice(i, i + 2000));
  await handle.db.insert(metricPoints).values({ runId: fx.runs[2]!, name: "loss/policy", step: 7, value: 0.25, wallTime: new Date(start + 3 * 60_000) });
});
afterAll(() => db.close());

describe("compare.series", () => {
  it("reads every run's series of a panel set in one call, downsampled past maxPoints with the spikes kept", async () => {
    const { runs: read } = await callerFor(handle, ada).compare.series({
      runIds: fx.runs,
      metrics: ["reward/mean", "loss/policy"],
      time: true,
      maxPoints: 200,
    });
    expect(read.map((r) => r.runId)).toEqual(fx.runs);
    for (const [r, run] of read.entries()) {
      const reward = run.series["reward/mean"]!;
      expect(reward.count).toBe(3000);
      expect(reward.steps.length).toBeLessThanOrEqual(201);
      expect(reward.steps.at(-1)).toBe(2999);
      // Values come to seven significant digits (a float32's; the charts show four).
      expect(reward.values[reward.steps.indexOf(1234)]).toBeCloseTo(r + 1234 / 3000 + 50, 4);
      // Seconds count from the run's own first point, 0.5 s a step.
      expect(reward.seconds![reward.steps.indexOf(2999)]).toBeCloseTo(1499.5, 6);
      expect(run.names).toEqual(r === 2 ? ["loss/policy", "reward/mean", "train/tokens"] : ["reward/mean", "train/tokens"]);
      expect(run.tokens).toBeNull();
    }
    expect(read[2]!.series["loss/policy"]).toEqual({ steps: [7], values: [0.25], seconds: [60], count: 1 });
    expect(read[0]!.series["loss/policy"]).toBeUndefined();
  });

  it("sends seconds only for the series a wall-time axis draws when told which", async () => {
    const { runs: read } = await callerFor(handle, ada).compare.series({
      runIds: fx.runs,
      metrics: ["reward/mean", "train/tokens"],
      time: ["train/tokens"],
      maxPoints: 100,
    });
    for (const [r, run] of read.entries()) {
      expect(run.series["reward/mean"]!.seconds).toBeUndefined();
      const tokens = run.series["train/tokens"]!;
      expect(tokens.seconds).toHaveLength(tokens.steps.length);
      // From the run's own first point, 0.5 s a step, to the millisecond.
      expect(tokens.seconds!.at(-1)).toBe(1499.5);
      expect(tokens.values.at(-1)).toBe(10 + r);
    }
  });

  it("gives each run's running total of train/tokens for a tokens axis, summed before the downsample", async () => {
    const { runs: read } = await callerFor(handle, ada).compare.series({ runIds: fx.runs, metrics: ["reward/mean"], tokens: true, maxPoints: 100 });
    for (const [r, run] of read.entries()) {
      const tokens = run.tokens!;
      expect(tokens.steps.at(-1)).toBe(2999);
      expect(tokens.values.at(-1)).toBe(3000 * (10 + r));
      expect(tokens.values[tokens.steps.indexOf(0)]).toBe(10 + r);
      expect(tokens.steps.length).toBeLessThanOrEqual(101);
      // Without `time`, no seconds are sent.
      expect(run.series["reward/mean"]!.seconds).toBeUndefined();
    }
  });

  it("refuses a bad request with what it accepts", async () => {
    const caller = callerFor(handle, ada);
    await expect(caller.compare.series({ runIds: [], metrics: ["reward/mean"] })).rejects.toThrow(/runIds: expected a list of 1 to 12 ids of runs/);
    await expect(caller.compare.series({ runIds: [fx.runs[0]!, fx.runs[0]!], metrics: [] })).rejects.toThrow(/each run may be named once/);
    await expect(caller.compare.series({ runIds: [fx.runs[0]!, "run_missing"], metrics: [] })).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: "No run with id 'run_missing'",
    });
  });
});

describe("compare.sources", () => {
  it("gives each run's version once, with its files, so a changed environment.ts can be diffed", async () => {
    const sources = await callerFor(handle, ada).compare.sources({ runIds: fx.runs });
    const [a, b, c] = sources.runs;
    expect(a!.versionId).toBe(b!.versionId);
    expect(c!.versionId).not.toBe(a!.versionId);
    expect(Object.keys(sources.versions)).toHaveLength(2);
    expect(sources.versions[a!.versionId!]).toMatchObject({ experimentName: "target", version: 1, files: { "environment.ts": ENV_V1, "notes.md": "same" } });
    expect(sources.versions[c!.versionId!]).toMatchObject({ version: 2, files: { "environment.ts": ENV_V2 } });
  });
});

describe("a share link's holder", () => {
  async function linkHolder(runIds: string[]) {
    const { token } = await createShareLink(handle.db, {
      projectId: fx.project,
      kind: "compare",
      runIds,
      view: {},
      title: "shared",
      createdBy: ada.id,
      expiresAt: null,
    });
    return callerFor(handle, await authenticate(handle.db, new Headers({ [SHARE_HEADER]: token }), "team"));
  }

  it("reads the runs its link names, and no call that adds one it does not", async () => {
    const holder = await linkHolder(fx.runs.slice(0, 2));
    const { runs: read } = await holder.compare.series({ runIds: fx.runs.slice(0, 2), metrics: ["reward/mean"] });
    expect(read).toHaveLength(2);
    await expect(holder.compare.sources({ runIds: fx.runs })).rejects.toMatchObject({ code: "NOT_FOUND", message: `No run with id '${fx.runs[2]}'` });
    await expect(holder.compare.series({ runIds: fx.runs, metrics: ["reward/mean"] })).rejects.toMatchObject({ code: "NOT_FOUND" });
  });
});
