/**
 * Serving runs (server/jobs/serving.ts): one run per project and base, left alone while its job is on its way,
 * queued again after it paused (idle), and not launched again at once after it failed, so that requests for a
 * base whose job cannot run do not each launch a run that fails the same way.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { DEFAULT_PROJECT } from "@/server/auth";
import { jobs, LOCAL_USER } from "@/server/db";
import { ensureServing, schedulerTick } from "@/server/jobs";
import { createPackingPolicy } from "@/server/scheduler";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("serving-jobs");
const need = () => ({
  projectId: DEFAULT_PROJECT,
  userId: LOCAL_USER.id,
  base: "tiny-base",
  shape: { parameters: 20_000, dModel: 32, nLayers: 1, contextLength: 48 },
  idleSeconds: 30,
  rows: 8,
});

let worker: { channel: ReturnType<typeof channelOn>; workerId: string } | null = null;

/** Places the serving job on the test worker and has it claim the job; returns what a worker's finish needs. */
async function claimed(jobId: string) {
  if (!worker) {
    const channel = channelOn(bed.handle.db);
    worker = { channel, workerId: await registerTestWorker(channel) };
  }
  await worker.channel.heartbeat(worker.workerId);
  await schedulerTick(bed.handle.db, createPackingPolicy());
  await worker.channel.claim(worker.workerId, jobId);
  return worker;
}

describe("serving runs", () => {
  it("reuses a project's serving run of a base: already on its way, queued again after a pause, held back after a failure", async () => {
    const db = bed.handle.db;
    const first = await ensureServing(db, need());
    expect(first).toMatchObject({ status: "queued", started: "launched" });
    const run = await callerFor(bed.handle).runs.byId({ id: first.runId });
    expect(run).toMatchObject({ experimentName: "Serving", status: "queued" });
    const [job] = await db.select({ kind: jobs.kind, mode: jobs.mode }).from(jobs).where(eq(jobs.id, first.jobId));
    expect(job).toEqual({ kind: "inference", mode: "full" });

    expect(await ensureServing(db, need())).toMatchObject({ runId: first.runId, jobId: first.jobId, started: "already" });

    const { channel, workerId } = await claimed(first.jobId);
    await channel.finish({ workerId, jobId: first.jobId, outcome: "paused", reason: "idle for 30 s; the next request starts it again" });
    expect(await ensureServing(db, need())).toMatchObject({ runId: first.runId, jobId: first.jobId, status: "queued", started: "resumed" });

    const again = await claimed(first.jobId);
    await again.channel.finish({ workerId: again.workerId, jobId: first.jobId, outcome: "failed", reason: "its worker cannot serve" });
    expect(await ensureServing(db, need())).toMatchObject({ runId: first.runId, started: "failed", reason: "its worker cannot serve" });
    // Another base of the project is its own run.
    expect(await ensureServing(db, { ...need(), base: "other-base" })).toMatchObject({ started: "launched" });
  }, 60_000);
});
