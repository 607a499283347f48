/**
 * `tinkerlab worker` processes started with only DATABASE_URL, against a real PostgreSQL server and no web server:
 * they run the scheduling passes themselves (FOR UPDATE SKIP LOCKED, woken by LISTEN/NOTIFY), write metrics and
 * checkpoints straight to the database, and keep the lease rules: jobs spread across them, none is claimed twice,
 * a SIGKILLed worker's job resumes from its checkpoint on another, and a higher-priority job preempts a
 * lower-priority one through a checkpoint.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type DatabaseHandle } from "@/server/db";
import { jobs } from "@/server/db/schema";
import { startDatabaseWorker, waitForRegistration, type DatabaseWorker } from "../support/database-worker";
import { createScratchDatabase } from "../support/postgres";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callerFor } from "./support/database";

const onPostgres = process.env.TINKERLAB_TEST_DB === "postgres" && !!process.env.TEST_DATABASE_URL;
const tempDir = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), `tinkerlab-${prefix}-`));
// The launch reads the base's shape from here: set before anything reads the environment.
const basesDir = tempDir("bases");
process.env.TINKERLAB_BASES_DIR = basesDir;

const workers: DatabaseWorker[] = [];
const databases: { handle: DatabaseHandle; drop(): Promise<void> }[] = [];

beforeAll(async () => {
  if (!onPostgres) return;
  await saveTinyBase(basesDir);
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  for (const { handle, drop } of databases) {
    await handle.close();
    await drop();
  }
});

async function freshDatabase() {
  const { url, drop } = await createScratchDatabase(process.env.TEST_DATABASE_URL!, "tinkerlab_workers");
  const handle = await openDatabase({ databaseUrl: url });
  databases.push({ handle, drop });
  return { url, handle };
}

function startWorker(databaseUrl: string, artifacts: string): DatabaseWorker {
  // One slot each: the test is about how jobs spread across workers.
  const worker = startDatabaseWorker(databaseUrl, { ARTIFACTS_DIR: artifacts, TINKERLAB_BASES_DIR: basesDir, TINKERLAB_WORKER_SLOTS: "1" });
  workers.push(worker);
  return worker;
}

async function launch(handle: DatabaseHandle, steps: number, name: string, priority = 0) {
  const caller = callerFor(handle);
  const { id } = await caller.experiments.create(tinyExperiment(name, steps));
  return (await caller.runs.launch({ experimentId: id, priority })).runId;
}

type Run = { status: string; step: number; reason: string | null };

async function waitForRun(handle: DatabaseHandle, runId: string, done: (run: Run) => boolean, seconds: number, logs: () => string): Promise<Run> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const run = (await callerFor(handle).runs.byId({ id: runId })) as Run;
    if (done(run)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} still ${run.status} at step ${run.step} after ${seconds} s:\n${logs().slice(-4000)}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

const ended = (run: Run) => ["completed", "failed", "cancelled"].includes(run.status);

async function metricSteps(handle: DatabaseHandle, runId: string, name: string) {
  const { points } = await callerFor(handle).runs.metrics({ runId });
  return points.filter((p) => p.name === name).map((p) => p.step);
}

async function runLog(handle: DatabaseHandle, runId: string) {
  return (await callerFor(handle).runs.logs({ runId })).map((l: { message: string }) => l.message).join("\n");
}

/** Which worker process started each job, from the workers' own logs: `[worker PID] job JOB (run RUN) started`. */
function starts(all: DatabaseWorker[]) {
  return all.flatMap((w) =>
    [...w.output().matchAll(/\[worker (\d+)\] job (job_\w+) \(run (run_\w+)\) started( from step \d+)?/g)].map((m) => ({
      pid: Number(m[1]),
      jobId: m[2]!,
      runId: m[3]!,
      resumed: !!m[4],
    })),
  );
}

describe.runIf(onPostgres)("database workers (tinkerlab worker with only DATABASE_URL)", () => {
  it("spread jobs across themselves, claim each once, and resume a SIGKILLed worker's job from its checkpoint", async () => {
    const { url, handle } = await freshDatabase();
    const artifacts = tempDir("artifacts");
    const pool = [startWorker(url, artifacts), startWorker(url, artifacts), startWorker(url, artifacts)];
    const logs = () => pool.map((w) => w.output()).join("\n---\n");
    await waitForRegistration(pool);

    // Three short runs and one long one: four jobs, three one-slot workers.
    const short = [await launch(handle, 15, "a"), await launch(handle, 15, "b"), await launch(handle, 15, "c")];
    const long = await launch(handle, 120, "long");
    await waitForRun(handle, long, (r) => r.step >= 12, 240, logs);
    const holder = starts(pool).find((s) => s.runId === long)!;
    expect(holder).toBeDefined();
    process.kill(holder.pid, "SIGKILL");

    for (const runId of short) expect(await waitForRun(handle, runId, ended, 240, logs)).toMatchObject({ status: "completed", step: 15 });
    const run = await waitForRun(handle, long, ended, 300, logs);
    expect(run).toMatchObject({ status: "completed", step: 120 });

    const all = starts(pool);
    // Spread: every one of the three workers started at least one job.
    expect(new Set(all.map((s) => s.pid)).size).toBe(3);
    // Claimed once: each short job started exactly once; the long one twice (fresh, then resumed elsewhere).
    for (const runId of short) expect(all.filter((s) => s.runId === runId)).toHaveLength(1);
    const longStarts = all.filter((s) => s.runId === long);
    expect(longStarts).toHaveLength(2);
    expect(longStarts.find((s) => !s.resumed)!.pid).toBe(holder.pid);
    expect(longStarts.find((s) => s.resumed)!.pid).not.toBe(holder.pid);
    // The database agrees: one "Started." per short run.
    for (const runId of short) expect((await runLog(handle, runId)).match(/^Started\.$/gm)).toHaveLength(1);
    expect(await runLog(handle, long)).toMatch(
      /Worker lost: worker wrk_\w+ stopped answering: no heartbeat for 20 s [^\n]*Job job_\w+ requeued[\s\S]*Resuming from the checkpoint of step [1-9]\d* \(attempt 2\)/,
    );
    // Every metric point written before the kill is there, none twice.
    const rewardSteps = await metricSteps(handle, long, "reward/mean");
    expect(rewardSteps).toHaveLength(120);
    expect(new Set(rewardSteps).size).toBe(120);
    const [job] = await handle.db.select({ attempts: jobs.attempts, status: jobs.status }).from(jobs).where(eq(jobs.runId, long));
    expect(job).toEqual({ attempts: 1, status: "completed" });
  }, 600_000);

  it("preempt a lower-priority run through a checkpoint for a higher-priority one, then resume it", async () => {
    const { url, handle } = await freshDatabase();
    const worker = startWorker(url, tempDir("artifacts"));
    await waitForRegistration([worker]);
    const low = await launch(handle, 80, "low", 0);
    await waitForRun(handle, low, (r) => r.step >= 6, 240, worker.output);
    const high = await launch(handle, 10, "urgent", 10);

    expect(await waitForRun(handle, high, ended, 240, worker.output)).toMatchObject({ status: "completed", step: 10 });
    const lowRun = await waitForRun(handle, low, ended, 300, worker.output);
    expect(lowRun).toMatchObject({ status: "completed", step: 80 });

    const log = await runLog(handle, low);
    const preemptedAt = Number(/Preempted: preempted at step (\d+)/.exec(log)?.[1]);
    expect(preemptedAt).toBeGreaterThanOrEqual(6);
    expect(log).toContain(`Resuming from the checkpoint of step ${preemptedAt}`);
    // The urgent run started only once the low one had stopped, and finished before the low one resumed.
    const jobOf = async (runId: string) => (await handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.runId, runId)))[0]!.id;
    const [lowJob, highJob] = [await jobOf(low), await jobOf(high)];
    const events = [...worker.output().matchAll(/\] job (job_\w+) (?:\(run run_\w+\) )?(started|preempted|completed)/g)].map((m) => `${m[1]} ${m[2]}`);
    expect(events).toEqual([
      `${lowJob} started`,
      `${lowJob} preempted`,
      `${highJob} started`,
      `${highJob} completed`,
      `${lowJob} started`,
      `${lowJob} completed`,
    ]);
    const rewardSteps = await metricSteps(handle, low, "reward/mean");
    expect(rewardSteps).toHaveLength(80);
    expect(new Set(rewardSteps).size).toBe(80);
  }, 600_000);

  it("keep taking work after their LISTEN connection is cut, and reconnect", async () => {
    const { url, handle } = await freshDatabase();
    const worker = startWorker(url, tempDir("artifacts"));
    await waitForRegistration([worker]);
    /** The pids of the worker's LISTEN connections, once one is open (it may start just after registering). */
    const listening = async (what: string) => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const open = await handle.db.execute(sql`select pid from pg_stat_activity where datname = current_database() and query like 'LISTEN%'`);
        const rows = (open as unknown as { rows: { pid: number }[] }).rows;
        if (rows.length === 1) return rows;
        if (Date.now() > deadline) throw new Error(`no LISTEN connection ${what} after 10 s:\n${worker.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    const [first] = await listening("at start");
    await handle.db.execute(sql`select pg_terminate_backend(${first!.pid})`);
    const runId = await launch(handle, 10, "after-cut");
    expect(await waitForRun(handle, runId, ended, 240, worker.output)).toMatchObject({ status: "completed", step: 10 });
    expect(worker.output()).toMatch(/lost the LISTEN connection/);
    // Reconnected: a fresh LISTEN connection is open again.
    const [second] = await listening("after the cut");
    expect(second!.pid).not.toBe(first!.pid);
  }, 300_000);
});
