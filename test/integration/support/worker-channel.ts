import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import type { DatabaseHandle } from "@/server/db";
import { claimJob, exchangeSessionCalls, finishJob, heartbeat, recordCheckpoint, registerWorker, setAsideCheckpoint, storeReport } from "@/server/jobs";
import type { WorkerChannel } from "@/server/worker/channel";
import { saveTinyBase } from "../../support/tiny-run";
import { openTestDatabase } from "./database";

/** The worker's side of server/jobs, straight on this database (as a database worker's channel is). */
export function channelOn(database: DatabaseHandle["db"]): WorkerChannel {
  return {
    describe: "test database",
    register: (input) => registerWorker(database, input),
    heartbeat: (workerId) => heartbeat(database, workerId),
    claim: (workerId, jobId) => claimJob(database, workerId, jobId),
    report: (input) => storeReport(database, input),
    checkpoint: (input) => recordCheckpoint(database, input),
    setAside: (input) => setAsideCheckpoint(database, input),
    finish: (input) => finishJob(database, input),
    leave: async () => ({}),
    sessionExchange: (input) => exchangeSessionCalls(database, input),
    close: async () => {},
  };
}

/** Registers a worker with one CPU device of 8 GiB and one compute slot, as the job tests run their jobs on. */
export async function registerTestWorker(channel: WorkerChannel): Promise<string> {
  const { workerId } = await channel.register({
    hostname: "test",
    pid: process.pid,
    backend: "js",
    devices: [{ kind: "cpu", name: "cpu", memoryMb: 8192, computeSlots: 1 }],
  });
  return workerId;
}

/**
 * What a test file that runs jobs needs, made in its hooks: a fresh database, a tiny base in its own
 * TINKERLAB_BASES_DIR, and an artifacts folder (removed afterwards). `handle` is set once `beforeAll` has run.
 */
export function jobTestbed(name: string) {
  const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), `tinkerlab-${name}-bases-`));
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), `tinkerlab-${name}-artifacts-`));
  process.env.TINKERLAB_BASES_DIR = basesDir;
  const bed = { basesDir, artifactsDir, handle: null as unknown as DatabaseHandle };
  let db: Awaited<ReturnType<typeof openTestDatabase>> | undefined;
  beforeAll(async () => {
    await saveTinyBase(basesDir);
    db = await openTestDatabase();
    bed.handle = db.handle;
  }, 60_000);
  afterAll(async () => {
    await db?.close();
    fs.rmSync(artifactsDir, { recursive: true, force: true });
  });
  return bed;
}
