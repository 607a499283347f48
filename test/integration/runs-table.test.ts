/**
 * The runs table and what it manages (runs.table, tag, setNotes, rename, archive, delete, clone, rerun): sorting by
 * a metric's summary, conditions on metrics and config fields, groups with their means, tags, unique names,
 * deletion refused while something depends on a run (a run started from its checkpoint, an imported model made
 * from one, a share link), archived and derived runs hidden unless asked, a clone's version holding the run's exact
 * source, and a re-run with a new seed. On PGlite and on PostgreSQL.
 */
import { testRunConfig } from "../support/run-config";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject } from "@/server/auth/projects";
import { createShareLink } from "@/server/auth/share-links";
import { eq } from "drizzle-orm";
import { checkpoints, type DatabaseHandle, LOCAL_USER, metricPoints, newId, runs } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-runs-table-"));
// Deleting a run removes its folder of the artifact store: this one, read by serverEnv at the first test.
process.env.ARTIFACTS_DIR = folder;

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
});
afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** A project with one arithmetic experiment, and a way to add runs to it as a worker would have left them. */
async function project(name: string) {
  const projectId = (await createProject(handle.db, { name, ownerId: LOCAL_USER.id })).id;
  const experiment = await callerFor(handle).experiments.create({
    projectId,
    name: `${name}-exp`,
    config: { name: `${name}-exp`, environment: "arithmetic", agent: { base: "arithmetic-base" } },
  });
  let minute = 0;
  const add = async (run: {
    name: string;
    learningRate?: number;
    seed?: number;
    status?: "completed" | "running" | "failed";
    rewards?: number[];
    tokens?: number[];
    tags?: string[];
    base?: string;
  }) => {
    const id = newId("run");
    await handle.db.insert(runs).values({
      id,
      projectId,
      experimentId: experiment.id,
      experimentVersionId: experiment.versionId,
      createdBy: LOCAL_USER.id,
      name: run.name,
      status: run.status ?? "completed",
      config: testRunConfig({
        seed: run.seed ?? 0,
        algorithm: { learningRate: run.learningRate ?? 0.003 },
        ...(run.base ? { agent: { base: run.base, training: { mode: "full" } } } : {}),
      }),
      seed: run.seed ?? 0,
      step: run.rewards?.length ?? 0,
      totalSteps: 4,
      tags: run.tags ?? [],
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, minute++)),
    });
    const points = [
      ...(run.rewards ?? []).map((value, step) => ({ runId: id, name: "reward/mean", step: step + 1, value })),
      ...(run.tokens ?? []).map((value, step) => ({ runId: id, name: "train/tokens", step: step + 1, value })),
    ];
    if (points.length) await handle.db.insert(metricPoints).values(points);
    return id;
  };
  return { projectId, experiment, add };
}

const names = (result: { rows: { name: string }[] }) => result.rows.map((r) => r.name);

describe("runs.table", () => {
  let fx: Awaited<ReturnType<typeof project>>;
  let lastId = "";
  beforeAll(async () => {
    fx = await project("sweep");
    // Two learning rates, three seeds each; rewards chosen so that last, max and min each order them differently.
    await fx.add({ name: "a", learningRate: 0.01, seed: 1, rewards: [0.1, 0.9, 0.5], tokens: [10, 20, 30], tags: ["baseline"] });
    await fx.add({ name: "b", learningRate: 0.01, seed: 2, rewards: [0.3, 0.4, 0.7], tokens: [5, 5] });
    await fx.add({ name: "c", learningRate: 0.01, seed: 3, rewards: [0.0, 0.2, 0.6], tags: ["baseline", "long"] });
    await fx.add({ name: "d", learningRate: 0.001, seed: 1, rewards: [0.5, 0.55, 0.2] });
    await fx.add({ name: "e", learningRate: 0.001, seed: 2, rewards: [0.05, 0.1, 0.15], status: "failed" });
    lastId = await fx.add({ name: "f", learningRate: 0.001, seed: 3 });
  });

  it("sorts by a metric's last, highest or lowest value, or its value at a step; runs without the metric come last", async () => {
    const caller = callerFor(handle);
    const table = (column: string, order: "asc" | "desc") => caller.runs.table({ projectId: fx.projectId, columns: [column], sort: { column, order } });
    const last = await table("metric:last:reward/mean", "desc");
    expect(names(last)).toEqual(["b", "c", "a", "d", "e", "f"]);
    expect(last.rows.map((r) => r.values["metric:last:reward/mean"])).toEqual([0.7, 0.6, 0.5, 0.2, 0.15, null]);
    expect(names(await table("metric:max:reward/mean", "desc"))).toEqual(["a", "b", "c", "d", "e", "f"]);
    expect(names(await table("metric:min:reward/mean", "asc"))).toEqual(["c", "e", "a", "d", "b", "f"]);
    expect(names(await table("metric:at2:reward/mean", "asc"))).toEqual(["e", "c", "b", "d", "a", "f"]);
    const tokens = await table("tokens", "desc");
    expect(tokens.rows.slice(0, 2).map((r) => [r.name, r.values.tokens])).toEqual([
      ["a", 60],
      ["b", 10],
    ]);
    expect(tokens.columns).toEqual([{ key: "tokens", label: "tokens", type: "number" }]);
  });

  it("filters by conditions on metric summaries and config fields, by status, tag and text", async () => {
    const caller = callerFor(handle);
    const where = (...where: { column: string; op: "<" | ">" | "=" | "!=" | ">=" | "<="; value: string }[]) =>
      caller.runs.table({ projectId: fx.projectId, columns: ["seed"], where, sort: { column: "created", order: "asc" } });
    expect(names(await where({ column: "metric:last:reward/mean", op: ">", value: "0.5" }))).toEqual(["b", "c"]);
    expect(names(await where({ column: "metric:max:reward/mean", op: ">=", value: "0.55" }))).toEqual(["a", "b", "c", "d"]);
    expect(names(await where({ column: "config:algorithm.learningRate", op: "=", value: "1e-3" }))).toEqual(["d", "e", "f"]);
    expect(
      names(await where({ column: "config:algorithm.learningRate", op: "=", value: "0.01" }, { column: "metric:last:reward/mean", op: "<", value: "0.65" })),
    ).toEqual(["a", "c"]);
    expect(names(await where({ column: "config:algorithm.name", op: "!=", value: "grpo" }))).toEqual([]);
    expect(names(await where({ column: "seed", op: "=", value: "2" }))).toEqual(["b", "e"]);
    const base = { projectId: fx.projectId, sort: { column: "name", order: "asc" as const } };
    expect(names(await caller.runs.table({ ...base, status: ["failed"] }))).toEqual(["e"]);
    expect(names(await caller.runs.table({ ...base, tags: ["baseline"] }))).toEqual(["a", "c"]);
    expect(names(await caller.runs.table({ ...base, tags: ["baseline", "long"] }))).toEqual(["c"]);
    expect(names(await caller.runs.table({ ...base, text: "SWEEP-exp" }))).toHaveLength(6);
    expect(names(await caller.runs.table({ ...base, text: lastId.toUpperCase() }))).toEqual(["f"]);
  });

  it("refuses a condition its column cannot answer, and an unknown column, saying what is accepted", async () => {
    const caller = callerFor(handle);
    await expect(caller.runs.table({ projectId: fx.projectId, where: [{ column: "metric:last:reward/mean", op: ">", value: "high" }] })).rejects.toThrow(
      /reward\/mean \(last\) holds numbers; compare it with a number, not 'high'/,
    );
    await expect(caller.runs.table({ projectId: fx.projectId, where: [{ column: "base", op: ">", value: "x" }] })).rejects.toThrow(
      /base holds text; compare it with = or !=/,
    );
    await expect(caller.runs.table({ projectId: fx.projectId, columns: ["reward"] })).rejects.toThrow(
      /columns\[0\]: 'reward' is not a column: use one of name, .*metric:<last\|max\|min\|at<step>>:<metric name>, or config:<dotted.path>/,
    );
    await expect(caller.runs.table({ projectId: fx.projectId, columns: ["metric:best:reward/mean"] })).rejects.toThrow(
      /a metric's summary is last, max, min or at<step>/,
    );
    await expect(caller.runs.table({ projectId: fx.projectId, groupBy: "algorithm..lr" })).rejects.toThrow(/groupBy: 'algorithm..lr' is not a config path/);
  });

  it("groups by a config field with each group's count and means, groups ordered by their best row", async () => {
    const result = await callerFor(handle).runs.table({
      projectId: fx.projectId,
      columns: ["metric:last:reward/mean", "steps", "config:algorithm.learningRate"],
      groupBy: "algorithm.learningRate",
      sort: { column: "metric:last:reward/mean", order: "desc" },
    });
    expect(result.total).toBe(6);
    expect(result.groups).toEqual([
      { value: 0.01, count: 3, means: { "metric:last:reward/mean": expect.closeTo(0.6, 10), steps: 3, "config:algorithm.learningRate": 0.01 } },
      { value: 0.001, count: 3, means: { "metric:last:reward/mean": expect.closeTo(0.175, 10), steps: 2, "config:algorithm.learningRate": 0.001 } },
    ]);
    expect(result.rows.map((r) => [r.group, r.name])).toEqual([
      [0.01, "b"],
      [0.01, "c"],
      [0.01, "a"],
      [0.001, "d"],
      [0.001, "e"],
      [0.001, "f"],
    ]);
  });

  it("pages with limit and offset in one order, with the total", async () => {
    const caller = callerFor(handle);
    const page = (offset: number) =>
      caller.runs.table({ projectId: fx.projectId, sort: { column: "metric:last:reward/mean", order: "desc" }, limit: 4, offset });
    const [first, second, past] = [await page(0), await page(4), await page(8)];
    expect([first.total, second.total, past.total]).toEqual([6, 6, 6]);
    expect([...names(first), ...names(second)]).toEqual(["b", "c", "a", "d", "e", "f"]);
    expect(past.rows).toEqual([]);
    // Grouped, a page's groups carry their counts and means over every page.
    const grouped = await caller.runs.table({
      projectId: fx.projectId,
      columns: ["steps"],
      groupBy: "algorithm.learningRate",
      sort: { column: "metric:last:reward/mean", order: "desc" },
      limit: 2,
      offset: 2,
    });
    expect(names(grouped)).toEqual(["a", "d"]);
    expect(grouped.groups).toEqual([
      { value: 0.01, count: 3, means: { steps: 3 } },
      { value: 0.001, count: 3, means: { steps: 2 } },
    ]);
    expect([grouped.total, grouped.groupCount]).toEqual([6, 2]);
  });

  it("offers the metric names, config fields and tags the project's runs have", async () => {
    const choices = await callerFor(handle).runs.tableChoices({ projectId: fx.projectId });
    expect(choices.metrics).toEqual(["reward/mean", "train/tokens"]);
    expect(choices.configPaths).toEqual(expect.arrayContaining(["algorithm.learningRate", "seed", "agent.base", "environment"]));
    expect(choices.tags).toEqual(["baseline", "long"]);
  });
});

describe("managing runs", () => {
  it("adds and removes tags, each once, and refuses a tag it cannot keep", async () => {
    const fx = await project("tags");
    const id = await fx.add({ name: "tagged" });
    const caller = callerFor(handle);
    expect(await caller.runs.tag({ id, add: ["lr-sweep", "v2", "lr-sweep"] })).toEqual({ tags: ["lr-sweep", "v2"] });
    expect(await caller.runs.tag({ id, add: ["best"], remove: ["v2"] })).toEqual({ tags: ["lr-sweep", "best"] });
    expect(names(await caller.runs.table({ projectId: fx.projectId, tags: ["best"] }))).toEqual(["tagged"]);
    await expect(caller.runs.tag({ id, add: ["two words"] })).rejects.toThrow(/'two words' cannot be a tag: use 1–40 letters, digits/);
  });

  it("keeps notes", async () => {
    const fx = await project("notes");
    const id = await fx.add({ name: "noted" });
    await callerFor(handle).runs.setNotes({ id, notes: "diverged after step 3; lr too high?" });
    const result = await callerFor(handle).runs.table({ projectId: fx.projectId, columns: ["notes"], text: "diverged" });
    expect(result.rows.map((r) => r.values.notes)).toEqual(["diverged after step 3; lr too high?"]);
  });

  it("renames a run, refusing a name another run of the project has", async () => {
    const fx = await project("names");
    const first = await fx.add({ name: "first" });
    await fx.add({ name: "second" });
    const caller = callerFor(handle);
    expect(await caller.runs.rename({ id: first, name: "  baseline lr=0.01 " })).toEqual({ name: "baseline lr=0.01" });
    await expect(caller.runs.rename({ id: first, name: "second" })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/is named 'second' already; run names are unique in a project, pick another/),
    });
    await expect(caller.runs.rename({ id: first, name: " " })).rejects.toThrow(/a run's name cannot be empty/);
    expect(names(await caller.runs.table({ projectId: fx.projectId, sort: { column: "name", order: "asc" } }))).toEqual(["baseline lr=0.01", "second"]);
  });

  it("archives a run out of the table and back", async () => {
    const fx = await project("archive");
    const id = await fx.add({ name: "old" });
    await fx.add({ name: "current" });
    const caller = callerFor(handle);
    await caller.runs.archive({ id, archived: true });
    expect(names(await caller.runs.table({ projectId: fx.projectId }))).toEqual(["current"]);
    const all = await caller.runs.table({ projectId: fx.projectId, includeArchived: true });
    expect(all.rows.map((r) => [r.name, r.archived])).toEqual([
      ["current", false],
      ["old", true],
    ]);
    // The home and experiment pages' list (runs.list) hides it too, unless asked.
    const listed = async (includeArchived?: boolean) =>
      (await caller.runs.list({ experimentId: fx.experiment.id, limit: 50, includeArchived })).items.map((r) => r.name).sort();
    expect(await listed()).toEqual(["current"]);
    expect(await listed(true)).toEqual(["current", "old"]);
    await caller.runs.archive({ id, archived: false });
    expect(names(await caller.runs.table({ projectId: fx.projectId }))).toEqual(["current", "old"]);
    expect(await listed()).toEqual(["current", "old"]);
  });

  it("hides evaluations and exports unless asked for them", async () => {
    const fx = await project("derived");
    const caller = callerFor(handle);
    const { runId } = await caller.runs.launch({ experimentId: fx.experiment.id });
    const checkpointId = await checkpointOf(runId);
    const evaluation = await caller.runs.evaluate({ checkpointId });
    const exported = await caller.runs.export({ checkpointId });
    const shown = await caller.runs.table({ projectId: fx.projectId });
    expect(shown.rows.map((r) => r.id)).toEqual([runId]);
    const all = await caller.runs.table({ projectId: fx.projectId, includeDerived: true, sort: { column: "created", order: "asc" } });
    expect(all.rows.map((r) => [r.id, r.kind])).toEqual([
      [runId, "rl"],
      [evaluation.runId, "eval"],
      [exported.runId, "export"],
    ]);
  });

  it("deletes a finished run with its evaluations, only when its name confirms it and nothing else depends on it, saying what does", async () => {
    const fx = await project("delete");
    const caller = callerFor(handle);
    const source = await fx.add({ name: "source" });
    const checkpointId = await checkpointOf(source);
    const child = await fx.add({ name: "child", base: checkpointId });
    await expect(caller.runs.delete({ id: source, confirmName: "source" })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringContaining(`Run 'source' cannot be deleted: run 'child' (${child}) starts from its checkpoint ${checkpointId}`),
    });

    const shared = await fx.add({ name: "shared" });
    await createShareLink(handle.db, {
      projectId: fx.projectId,
      kind: "run",
      runIds: [shared],
      view: {},
      title: "for the paper",
      createdBy: LOCAL_USER.id,
      expiresAt: null,
    });
    await expect(caller.runs.delete({ id: shared, confirmName: "shared" })).rejects.toThrow(/the share link 'for the paper' \(shr_\w+\) shows it/);

    // An imported model converted from one of a run's checkpoint folders (ARTIFACTS_DIR/bases/<name>/import.json).
    const imported = await fx.add({ name: "imported" });
    const importedCheckpoint = await checkpointOf(imported);
    const [{ path: checkpointDir }] = await handle.db.select({ path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.id, importedCheckpoint));
    const baseDir = path.join(folder, "bases", "from-checkpoint");
    fs.mkdirSync(baseDir, { recursive: true });
    fs.writeFileSync(path.join(baseDir, "manifest.json"), "{}");
    fs.writeFileSync(path.join(baseDir, "import.json"), JSON.stringify({ source: checkpointDir, modelType: "llama", importedAt: new Date().toISOString() }));
    await expect(caller.runs.delete({ id: imported, confirmName: "imported" })).rejects.toThrow(
      /the imported model 'from-checkpoint' was made from one of its checkpoints/,
    );

    const running = await fx.add({ name: "running", status: "running" });
    await expect(caller.runs.delete({ id: running, confirmName: "running" })).rejects.toThrow(/Run 'running' is running; cancel it first/);

    await expect(caller.runs.delete({ id: child, confirmName: "chlid" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining("to delete run 'child', confirm with its name"),
    });
    expect(await caller.runs.delete({ id: child, confirmName: "child" })).toEqual({ id: child, name: "child", withIt: [] });

    // Its evaluations belong to it and go with it, once finished.
    const evaluation = await caller.runs.evaluate({ checkpointId });
    await expect(caller.runs.delete({ id: source, confirmName: "source" })).rejects.toThrow(
      new RegExp(`its evaluation 'source-eval-step4' \\(${evaluation.runId}\\) is queued; cancel it first`),
    );
    await caller.runs.control({ id: evaluation.runId, action: "cancel" });
    // With its dependant gone, the source may go too, its points, checkpoints and evaluation with it.
    expect(await caller.runs.delete({ id: source, confirmName: "source" })).toEqual({
      id: source,
      name: "source",
      withIt: [{ id: evaluation.runId, name: "source-eval-step4", kind: "eval" }],
    });
    const left = await caller.runs.table({ projectId: fx.projectId, sort: { column: "name", order: "asc" }, includeDerived: true });
    expect(names(left)).toEqual(["imported", "running", "shared"]);
    expect(await handle.db.select().from(checkpoints).where(eq(checkpoints.runId, source))).toEqual([]);
    expect(fs.existsSync(path.join(folder, "runs", source))).toBe(false);
  });

  it("clones a run into its experiment's next version, with the run's exact source and config", async () => {
    const fx = await project("clone");
    const caller = callerFor(handle);
    const files = { "environment.ts": "// the environment as the run saw it\n", "notes.md": "v1" };
    await caller.experiments.save({
      id: fx.experiment.id,
      files,
      config: { name: "clone-exp", environment: "arithmetic", agent: { base: "arithmetic-base" }, seed: 7 },
    });
    const { runId } = await caller.runs.launch({ experimentId: fx.experiment.id });
    // The experiment moves on after the launch; the clone goes back to what the run ran.
    await caller.experiments.save({
      id: fx.experiment.id,
      files: { "environment.ts": "// changed since\n" },
      config: { name: "clone-exp", environment: "arithmetic", agent: { base: "arithmetic-base" } },
    });
    const clone = await caller.runs.clone({ id: runId });
    expect(clone).toMatchObject({ experimentId: fx.experiment.id, version: 4 });
    const version = await caller.experiments.version({ id: fx.experiment.id, version: clone.version });
    const run = await caller.runs.byId({ id: runId });
    expect(version.files).toEqual(files);
    expect(version.config).toEqual(run.config);
    expect(version.config.seed).toBe(7);
  });

  it("re-runs a run's version with a new seed, or the seed asked for, and refuses to re-run an evaluation", async () => {
    const fx = await project("rerun");
    const caller = callerFor(handle);
    const { runId } = await caller.runs.launch({ experimentId: fx.experiment.id });
    const original = await caller.runs.byId({ id: runId });
    const again = await caller.runs.rerun({ id: runId });
    const rerun = await caller.runs.byId({ id: again.runId });
    expect(again.seed).toBe(original.seed + 1);
    expect(rerun).toMatchObject({ seed: original.seed + 1, experimentVersionId: original.experimentVersionId, status: "queued" });
    expect(rerun.config).toEqual({ ...original.config, seed: original.seed + 1 });
    expect(rerun.name).toMatch(new RegExp(`^rerun-exp-arithmetic-s${original.seed + 1}-`));
    expect((await caller.runs.rerun({ id: runId })).seed).toBe(original.seed + 2);
    expect((await caller.runs.rerun({ id: runId, seed: 42 })).seed).toBe(42);

    const evaluation = await caller.runs.evaluate({ checkpointId: await checkpointOf(runId) });
    await expect(caller.runs.rerun({ id: evaluation.runId })).rejects.toThrow(/is not a training run \(its job is eval\)/);
  });
});

/** A checkpoint of the run, as a worker would have recorded it (its folder holds the model's config). */
async function checkpointOf(runId: string): Promise<string> {
  const dir = path.join(folder, "runs", runId, "step-000004");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "model_config.json"), JSON.stringify({ vocabSize: 262, contextLength: 24, dModel: 64, nLayers: 2, nHeads: 4 }));
  const id = newId("ckpt");
  await handle.db.insert(checkpoints).values({ id, runId, step: 4, kind: "state", path: dir, sizeBytes: 1000 });
  return id;
}
