/**
 * A worker on "another machine" joins a workbench on PostgreSQL with nothing but the database URL: the server has
 * no workers of its own, the run launched in the browser's API runs on the database worker, its device shows on
 * the scheduler page, and the metrics it writes straight to the database reach the run.
 */
import { afterAll, describe, expect, it } from "vitest";
import { startDatabaseWorker, waitForRegistration, type DatabaseWorker } from "../support/database-worker";
import { createScratchDatabase } from "../support/postgres";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callProcedure, startServer, tempDir, type TestServer } from "./support/server";

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

describe("a database worker joining a server", () => {
  it("takes the server's run, shows on the scheduler page, and its metrics reach the run", async (context) => {
    const adminUrl = process.env.TEST_DATABASE_URL;
    if (!adminUrl) context.skip();
    const { url } = await createScratchDatabase(adminUrl!, "tinkerlab_e2e");
    const basesDir = tempDir("bases");
    await saveTinyBase(basesDir);
    const artifacts = tempDir("artifacts");
    const server: TestServer = await startServer({
      DATABASE_URL: url,
      TINKERLAB_BASES_DIR: basesDir,
      TINKERLAB_EXAMPLES: "off",
      TINKERLAB_LOCAL_WORKERS: "0",
      ARTIFACTS_DIR: artifacts,
    });
    stops.push(() => server.stop());
    const worker: DatabaseWorker = startDatabaseWorker(url, { ARTIFACTS_DIR: artifacts, TINKERLAB_BASES_DIR: basesDir });
    stops.push(() => worker.stop());
    await waitForRegistration([worker]);

    const { id } = await callProcedure<{ id: string }>(server, "experiments.create", tinyExperiment("remote", 30));
    const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
    const overview = await callProcedure<{ devices: { pid: number }[] }>(server, "scheduler.overview", { windowMinutes: 60 }, "GET");
    // The worker's own process (tsx runs it as a child), as it names itself in its log.
    const pid = Number(/\[worker (\d+)\] registered/.exec(worker.output())![1]);
    expect(overview.devices.map((d) => d.pid)).toEqual([pid]);

    const deadline = Date.now() + 180_000;
    let run: { status: string; step: number };
    for (;;) {
      run = await callProcedure(server, "runs.byId", { id: runId }, "GET");
      if (["completed", "failed", "cancelled"].includes(run.status)) break;
      if (Date.now() > deadline) throw new Error(`run still ${run.status} at step ${run.step}:\n${worker.output().slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    expect(run).toMatchObject({ status: "completed", step: 30 });
    expect(worker.output()).toMatch(new RegExp(`job job_\\w+ \\(run ${runId}\\) started`));
    const { points } = await callProcedure<{ points: { name: string; step: number }[] }>(server, "runs.metrics", { runId }, "GET");
    expect(points.filter((p) => p.name === "reward/mean").map((p) => p.step)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  }, 300_000);
});
