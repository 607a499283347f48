/**
 * A worker's report (server/jobs/reports.ts storeReport), as the worker API and database workers store it: one
 * statement that checks the job is the worker's and writes points, rollouts, log lines and the run's step. On PGlite
 * and on PostgreSQL.
 */
import { testRunConfig } from "../support/run-config";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { LOCAL_USER, type DatabaseHandle } from "@/server/db";
import { newId } from "@/server/db/ids";
import { jobs, metricPoints, rollouts, runLogs, runs } from "@/server/db/schema";
import { registerWorker, storeReport, WorkerConflictError, type RolloutInput } from "@/server/jobs";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let experimentId: string;
let versionId: string;
let workerId: string;

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  const created = await callerFor(handle).experiments.create({ name: "reports" });
  experimentId = created.id;
  versionId = created.versionId;
  ({ workerId } = await registerWorker(handle.db, {
    hostname: "test",
    pid: 1,
    backend: "test",
    devices: [{ kind: "cpu", name: "cpu", memoryMb: 1024, computeSlots: 1 }],
  }));
});
afterAll(() => db.close());

/** A running run and its job, held by `owner`. */
async function runningJob(owner = workerId) {
  const runId = newId("run");
  await handle.db.insert(runs).values({
    id: runId,
    projectId: DEFAULT_PROJECT,
    experimentId,
    experimentVersionId: versionId,
    createdBy: LOCAL_USER.id,
    name: runId,
    status: "running",
    config: testRunConfig(),
    seed: 1,
    totalSteps: 100,
  });
  const jobId = newId("job");
  await handle.db.insert(jobs).values({
    id: jobId,
    kind: "rl",
    runId,
    userId: LOCAL_USER.id,
    status: "running",
    footprint: { sharedBase: null, baseMemoryMb: 0, ownMemoryMb: 100, computeSlots: 1, breakdown: {} },
    workerId: owner,
  });
  return { runId, jobId };
}

const rollout = (step: number, i: number, extra: Partial<RolloutInput> = {}): RolloutInput => ({
  step,
  split: "train",
  groupIndex: i >> 1,
  sampleIndex: i & 1,
  prompt: "Add.",
  turns: [{ observation: `${i}+1=`, action: String(i + 1), reward: 1, advantage: 0.5, info: { correct: true } }],
  rewards: { env: 1 },
  totalReward: 1,
  advantage: 0.5,
  tokens: [49 + i, 10],
  tokenLogprobs: [-0.25, -1.5],
  ...extra,
});

const pointsOf = (runId: string) =>
  handle.db
    .select({ name: metricPoints.name, step: metricPoints.step, value: metricPoints.value, wallTime: metricPoints.wallTime })
    .from(metricPoints)
    .where(eq(metricPoints.runId, runId))
    .orderBy(asc(metricPoints.seq));
const rolloutsOf = (runId: string) => handle.db.select().from(rollouts).where(eq(rollouts.runId, runId)).orderBy(asc(rollouts.seq));

describe("storeReport", () => {
  it("adds a run's health warnings in order, keeps its step when a report has none, and shows them on the run", async () => {
    const { runId, jobId } = await runningJob();
    await storeReport(handle.db, { workerId, jobId, step: 4 });
    await storeReport(handle.db, { workerId, jobId, warnings: [{ code: "no-turns", step: 1, message: "every episode ended before its first turn" }] });
    await storeReport(handle.db, { workerId, jobId, step: 6, warnings: [{ code: "no-signal", step: 5, message: "rewards were the same" }] });
    // A job resumed from a checkpoint checks afresh and raises a kind again: the run keeps the first.
    await storeReport(handle.db, { workerId, jobId, step: 9, warnings: [{ code: "no-signal", step: 8, message: "rewards were the same" }] });
    const run = await callerFor(handle).runs.byId({ id: runId });
    expect(run.step).toBe(9);
    expect(run.warnings.map((w) => `${w.code}@${w.step}`)).toEqual(["no-turns@1", "no-signal@5"]);
    const listed = await callerFor(handle).runs.list({ experimentId });
    expect(listed.items.find((r) => r.id === runId)!.warnings).toHaveLength(2);
  });

  it("stores a step's points, rollouts, log lines and step from one report, as sent", async () => {
    const { runId, jobId } = await runningJob();
    const wallTime = new Date("2026-03-04T05:06:07.089Z");
    const stored = await storeReport(handle.db, {
      workerId,
      jobId,
      step: 3,
      metrics: [
        { step: 3, name: "reward/mean", value: 0.125, wallTime },
        { step: 3, name: "loss", value: -2.5e-7, wallTime },
      ],
      rollouts: [
        rollout(3, 0),
        rollout(3, 1, { advantage: null, tokens: null, tokenLogprobs: null, split: "eval", turns: [{ observation: "o", action: "a", render: "▣\n□" }] }),
      ],
      logs: [{ level: "warn", message: "slow step" }],
    });
    expect(stored).toBe(runId);
    expect(await pointsOf(runId)).toEqual([
      { name: "reward/mean", step: 3, value: 0.125, wallTime },
      { name: "loss", step: 3, value: -2.5e-7, wallTime },
    ]);
    const rows = await rolloutsOf(runId);
    expect(
      rows.map(({ step, split, groupIndex, sampleIndex, prompt, turns, rewards, totalReward, advantage, tokens, tokenLogprobs }) => ({
        step,
        split,
        groupIndex,
        sampleIndex,
        prompt,
        turns,
        rewards,
        totalReward,
        advantage,
        tokens,
        tokenLogprobs,
      })),
    ).toEqual([
      {
        step: 3,
        split: "train",
        groupIndex: 0,
        sampleIndex: 0,
        prompt: "Add.",
        turns: rollout(3, 0).turns,
        rewards: { env: 1 },
        totalReward: 1,
        advantage: 0.5,
        tokens: [49, 10],
        tokenLogprobs: [-0.25, -1.5],
      },
      // Absent values are SQL nulls, not JSON nulls.
      {
        step: 3,
        split: "eval",
        groupIndex: 0,
        sampleIndex: 1,
        prompt: "Add.",
        turns: [{ observation: "o", action: "a", render: "▣\n□" }],
        rewards: { env: 1 },
        totalReward: 1,
        advantage: null,
        tokens: null,
        tokenLogprobs: null,
      },
    ]);
    const logs = await handle.db.select({ level: runLogs.level, message: runLogs.message }).from(runLogs).where(eq(runLogs.runId, runId));
    expect(logs).toEqual([{ level: "warn", message: "slow step" }]);
    const [run] = await handle.db.select({ step: runs.step }).from(runs).where(eq(runs.id, runId));
    expect(run!.step).toBe(3);
  });

  it("stores a point or rollout sent twice once, keeps points in the order sent, and leaves the step alone when none is given", async () => {
    const { runId, jobId } = await runningJob();
    const names = Array.from({ length: 40 }, (_, i) => `m/${String(39 - i).padStart(2, "0")}`); // sent in reverse name order
    const report = {
      workerId,
      jobId,
      step: 7,
      metrics: names.map((name, i) => ({ step: 7, name, value: i })),
      rollouts: [0, 1, 2, 3].map((i) => rollout(7, i)),
    };
    await storeReport(handle.db, report);
    await storeReport(handle.db, report); // a retry after a lost answer
    await storeReport(handle.db, { workerId, jobId, metrics: [{ step: 8, name: "m/00", value: 1 }] });
    const points = await pointsOf(runId);
    expect(points.map((p) => `${p.name}@${p.step}`)).toEqual([...names.map((name) => `${name}@7`), "m/00@8"]);
    expect(points.map((p) => p.value).slice(0, 40)).toEqual(names.map((_, i) => i));
    expect((await rolloutsOf(runId)).map((r) => r.sampleIndex + 2 * r.groupIndex)).toEqual([0, 1, 2, 3]);
    const [run] = await handle.db.select({ step: runs.step }).from(runs).where(eq(runs.id, runId));
    expect(run!.step).toBe(7);
  });

  it("stores text the database cannot hold (NUL, lone surrogates) as U+FFFD, and infinite or NaN values as such", async () => {
    const { runId, jobId } = await runningJob();
    await storeReport(handle.db, {
      workerId,
      jobId,
      metrics: [
        { step: 1, name: "up", value: Infinity },
        { step: 1, name: "down", value: -Infinity },
        { step: 1, name: "nan", value: NaN },
        { step: 1, name: "odd\u0000name", value: 1 },
      ],
      rollouts: [
        rollout(1, 0, { prompt: "a\u0000b", turns: [{ observation: "x\ud800y", action: "\udc00z", info: { "k\u0000": "v\u0000" } }], totalReward: -Infinity }),
      ],
    });
    const points = await pointsOf(runId);
    expect(points.map((p) => [p.name, p.value])).toEqual([
      ["up", Infinity],
      ["down", -Infinity],
      ["nan", NaN],
      ["odd\uFFFDname", 1],
    ]);
    const [row] = await rolloutsOf(runId);
    expect(row!.prompt).toBe("a\uFFFDb");
    expect(row!.turns).toEqual([{ observation: "x\uFFFDy", action: "\uFFFDz", info: { "k\uFFFD": "v\uFFFD" } }]);
    expect(row!.totalReward).toBe(-Infinity);
  });

  it("refuses a report for a job that is not the worker's, or no job, and stores nothing", async () => {
    const { workerId: other } = await registerWorker(handle.db, {
      hostname: "other",
      pid: 2,
      backend: "test",
      devices: [{ kind: "cpu", name: "cpu", memoryMb: 1024, computeSlots: 1 }],
    });
    const { runId, jobId } = await runningJob(other);
    const report = {
      workerId,
      jobId,
      step: 5,
      metrics: [{ step: 5, name: "loss", value: 1 }],
      rollouts: [rollout(5, 0)],
      logs: [{ level: "info" as const, message: "x" }],
    };
    const moved = await storeReport(handle.db, report).catch((error) => error);
    expect(moved).toBeInstanceOf(WorkerConflictError);
    expect(moved).toMatchObject({ code: "CONFLICT", message: expect.stringContaining("no longer assigned") });
    const missing = await storeReport(handle.db, { ...report, jobId: "job_missing" }).catch((error) => error);
    expect(missing).toMatchObject({ code: "NOT_FOUND", message: "No job with id 'job_missing'" });
    expect(await pointsOf(runId)).toEqual([]);
    expect(await rolloutsOf(runId)).toEqual([]);
    expect(await handle.db.select().from(runLogs).where(eq(runLogs.runId, runId))).toEqual([]);
    const [run] = await handle.db.select({ step: runs.step }).from(runs).where(eq(runs.id, runId));
    expect(run!.step).toBe(0);
  });
});
