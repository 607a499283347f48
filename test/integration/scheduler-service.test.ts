/**
 * The database-backed scheduler pass, on PGlite and on PostgreSQL: passes never fill one device twice, a job the
 * policy places behind a preempted one waits for that job's checkpoint, a pass skips a job another transaction
 * holds instead of waiting for it, and (on PostgreSQL) listeners hear NOTIFYs for new and placed work.
 */
import { testRunConfig } from "../support/run-config";
import { eq, sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { LOCAL_USER, type DatabaseHandle } from "@/server/db";
import { newId } from "@/server/db/ids";
import { devices, jobs, metricPoints, runs, workers } from "@/server/db/schema";
import { createPackingPolicy } from "@/server/scheduler/policy";
import { claimJob, finishJob, heartbeat, JOBS_CHANNEL, registerWorker, schedulerTick, submitJob } from "@/server/jobs";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let experimentId: string;
let versionId: string;
const policy = createPackingPolicy();

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  const created = await callerFor(handle).experiments.create({ name: "scheduling" });
  experimentId = created.id;
  versionId = created.versionId;
});
afterAll(() => db.close());
beforeEach(async () => {
  // Each test starts with no workers and no jobs.
  await handle.db.delete(jobs);
  await handle.db.delete(devices);
  await handle.db.delete(workers);
});

async function submit(priority = 0, totalSteps = 10) {
  const runId = newId("run");
  await handle.db.insert(runs).values({
    id: runId,
    projectId: DEFAULT_PROJECT,
    experimentId,
    experimentVersionId: versionId,
    createdBy: LOCAL_USER.id,
    name: runId,
    config: testRunConfig(),
    seed: 0,
    totalSteps,
  });
  const jobId = await submitJob(handle.db, {
    runId,
    userId: LOCAL_USER.id,
    priority,
    resources: {
      kind: "rl",
      mode: "full",
      baseModel: "tiny",
      model: { name: "tiny", parameters: 1e6, dModel: 64, nLayers: 2 },
      batchSize: 8,
      contextLength: 48,
      computeSlots: 1,
    },
  });
  return jobId;
}

const oneSlotWorker = () =>
  registerWorker(handle.db, { hostname: "test", pid: 1, backend: "js", devices: [{ kind: "cpu", name: "cpu", memoryMb: 4096, computeSlots: 1 }] });

describe("scheduling passes over the database", () => {
  it("two passes at once place one job on a one-slot device, not two", async () => {
    await oneSlotWorker();
    await submit();
    await submit();
    const [a, b] = await Promise.all([schedulerTick(handle.db, policy), schedulerTick(handle.db, policy)]);
    expect(a.placed.length + b.placed.length).toBe(1);
    const statuses = (await handle.db.select({ status: jobs.status }).from(jobs)).map((j) => j.status).sort();
    expect(statuses).toEqual(["placing", "queued"]);
  });

  it("preempts a lower-priority job and starts the higher one only once the first has checkpointed and left", async () => {
    const { workerId } = await oneSlotWorker();
    const low = await submit(0);
    await schedulerTick(handle.db, policy);
    expect((await heartbeat(handle.db, workerId)).assignments).toEqual([low]);
    await claimJob(handle.db, workerId, low);
    const high = await submit(5);
    const pass = await schedulerTick(handle.db, policy);
    expect(pass).toMatchObject({ preempted: [low], placed: [high] });
    // The urgent job is placed but held back while the preempted one writes its checkpoint.
    expect(await heartbeat(handle.db, workerId)).toEqual({ assignments: [], stops: [{ jobId: low, why: "preempt" }] });
    // A second pass does not pick more victims nor ask again.
    expect(await schedulerTick(handle.db, policy)).toMatchObject({ preempted: [], placed: [] });
    await finishJob(handle.db, { workerId, jobId: low, outcome: "preempted", reason: "preempted at step 3" });
    expect(await heartbeat(handle.db, workerId)).toEqual({ assignments: [high], stops: [] });
    const [lowRow] = await handle.db.select({ status: jobs.status, attempts: jobs.attempts, workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, low));
    expect(lowRow).toEqual({ status: "queued", attempts: 1, workerId: null });
  });

  it("shows each queued job's estimated start: the policy run forward from the running job's measured pace", async () => {
    const { workerId } = await oneSlotWorker();
    const first = await submit(0, 40);
    await schedulerTick(handle.db, policy);
    await claimJob(handle.db, workerId, first);
    // 10 of its 40 steps done, one every 2 s: 30 steps (60 s) to go.
    const [{ runId }] = await handle.db.select({ runId: jobs.runId }).from(jobs).where(eq(jobs.id, first));
    const now = Date.now();
    await handle.db
      .insert(metricPoints)
      .values(Array.from({ length: 10 }, (_, i) => ({ runId: runId!, step: i + 1, name: "reward/mean", value: 0, wallTime: new Date(now - (9 - i) * 2000) })));
    await handle.db.update(runs).set({ step: 10 }).where(eq(runs.id, runId!));
    const second = await submit(0, 20);
    const third = await submit(0, 20);
    const asked = Date.now();
    const { queue } = await callerFor(handle).scheduler.overview();
    const answered = Date.now();
    const byId = new Map(queue.map((job) => [job.id, job]));
    const startsAt = (id: string) => byId.get(id)!.estimatedStartAt!.getTime();
    // The second starts when the first ends, 60 s after the moment the overview was made (however long the test
    // took to ask); the third after the second's 5 s start-up and 20 steps at 2 s.
    expect(startsAt(second)).toBeGreaterThanOrEqual(asked + 60_000);
    expect(startsAt(second)).toBeLessThanOrEqual(answered + 60_000);
    expect((startsAt(third) - startsAt(second)) / 1000).toBeCloseTo(45, 0);
    expect(byId.get(second)!.workLeftSeconds).toBeCloseTo(40, 0);
  });

  it.runIf(process.env.TINKERLAB_TEST_DB === "postgres")("skips a queued job another transaction holds, without waiting for it", async () => {
    await oneSlotWorker();
    const held = await submit();
    const free = await submit();
    const other = new pg.Client({ connectionString: await currentDatabaseUrl() });
    await other.connect();
    try {
      await other.query("begin");
      await other.query("select id from jobs where id = $1 for update", [held]);
      // The lock is released only after the pass: a pass that waited for it would never end.
      const pass = await schedulerTick(handle.db, policy);
      expect(pass.placed).toEqual([free]);
      await other.query("rollback");
    } finally {
      await other.end();
    }
  });

  it.runIf(process.env.TINKERLAB_TEST_DB === "postgres")("NOTIFYs listeners of new work and of jobs placed on their worker", async () => {
    const { workerId } = await oneSlotWorker();
    const listener = new pg.Client({ connectionString: await currentDatabaseUrl() });
    await listener.connect();
    const notices: unknown[] = [];
    listener.on("notification", (message) => notices.push(JSON.parse(message.payload!)));
    await listener.query(`LISTEN ${JOBS_CHANNEL}`);
    try {
      await submit();
      await schedulerTick(handle.db, policy);
      await vi.waitFor(() => expect(notices).toHaveLength(2), { timeout: 30_000, interval: 20 });
      expect(notices).toEqual([{ queued: true }, { placedOn: [workerId] }]);
    } finally {
      await listener.end();
    }
  });
});

describe.runIf(process.env.TINKERLAB_TEST_DB === "postgres")("notices of a large pass", () => {
  it("splits the workers with news into notices under NOTIFY's 8,000-byte limit", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 450; i++) ids.push((await oneSlotWorker()).workerId);
    for (let i = 0; i < 450; i++) await submit();
    const listener = new pg.Client({ connectionString: await currentDatabaseUrl() });
    await listener.connect();
    const notices: { placedOn?: string[] }[] = [];
    listener.on("notification", (message) => notices.push(JSON.parse(message.payload!)));
    await listener.query(`LISTEN ${JOBS_CHANNEL}`);
    try {
      // Only workers heard from in the last seconds take work, and 900 inserts one by one can take longer than that on
      // a busy machine: every worker has sent a heartbeat at the pass's own instant, however long the set-up took.
      const now = new Date();
      await handle.db.update(workers).set({ heartbeatAt: now });
      expect((await schedulerTick(handle.db, policy, now)).placed).toHaveLength(450);
      await vi.waitFor(() => expect(notices).toHaveLength(3), { timeout: 30_000, interval: 20 });
      expect(notices.map((n) => n.placedOn!.length)).toEqual([200, 200, 50]);
      expect(new Set(notices.flatMap((n) => n.placedOn!))).toEqual(new Set(ids));
    } finally {
      await listener.end();
    }
  }, 120_000);
});

async function currentDatabaseUrl() {
  const result = (await handle.db.execute(sql`select current_database() as name`)) as unknown as { rows: { name: string }[] };
  const url = new URL(process.env.TEST_DATABASE_URL!);
  url.pathname = `/${result.rows[0]!.name}`;
  return url.toString();
}
