/**
 * The life of a run through the real server, scheduler and worker processes: launch, live metrics, a worker
 * killed mid-run (its job resumes from the last checkpoint on another worker, with no metric point lost or
 * doubled), and several workers sharing a real PostgreSQL server.
 */
import { execFileSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeSafetensors } from "@/lib/model/safetensors";
import { createScratchDatabase } from "../support/postgres";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let basesDir: string;
const servers: TestServer[] = [];

beforeAll(async () => {
  basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

const call = callProcedure;

async function launch(server: TestServer, steps: number, name = "tiny") {
  const { id } = await call<{ id: string }>(server, "experiments.create", tinyExperiment(name, steps));
  return (await call<{ runId: string }>(server, "runs.launch", { experimentId: id })).runId;
}

type Run = { status: string; step: number; reason: string | null };

async function waitFor(server: TestServer, runId: string, done: (run: Run) => boolean, seconds: number): Promise<Run> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const run = await call<Run>(server, "runs.byId", { id: runId }, "GET");
    if (done(run)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} still ${run.status} at step ${run.step} after ${seconds} s:\n${server.output().slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

async function metricSteps(server: TestServer, runId: string, name: string) {
  const { points } = await call<{ points: { name: string; step: number }[] }>(server, "runs.metrics", { runId }, "GET");
  return points.filter((p) => p.name === name).map((p) => p.step);
}

describe("a run's life", () => {
  it("trains to the end, pausing and resuming, with every step's metrics growing live on the run page", async () => {
    const server = await startServer({ TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
    servers.push(server);
    // Enough steps that the pause, asked once step 5 shows, lands before the end on a fast, idle machine.
    const steps = 200;
    const runId = await launch(server, steps);
    // Paused part-way, so the page opens on a run that still has steps to go, however fast this machine trains.
    await waitFor(server, runId, (r) => r.step >= 5, 120);
    await call(server, "runs.control", { id: runId, action: "pause" });
    const paused = await waitFor(server, runId, (r) => r.status === "paused" || r.status === "completed", 120);
    expect(paused.status).toBe("paused");
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`${server.url}/runs/${runId}`);
      const chart = page.getByRole("figure", { name: "chart reward/mean" });
      await chart.waitFor({ timeout: 120_000 });
      const points = async () => Number(await chart.getAttribute("data-points"));
      await page.waitForFunction(() => Number(document.querySelector('figure[aria-label="chart reward/mean"]')?.getAttribute("data-points")) > 0);
      const early = await points();
      expect(early).toBe(paused.step);
      await page.getByRole("button", { name: "Resume" }).click();
      await page.getByText("completed", { exact: true }).waitFor({ timeout: 300_000 });
      await page.waitForFunction((n) => document.querySelector('figure[aria-label="chart reward/mean"]')?.getAttribute("data-points") === String(n), steps, {
        timeout: 30_000,
      });
      expect(await points()).toBe(steps);
      await page.screenshot({ path: path.join(SCREENSHOTS, "run.png"), fullPage: true });
    } finally {
      await browser.close();
    }
    const run = await waitFor(server, runId, (r) => r.status === "completed" || r.status === "failed", 120);
    expect(run).toMatchObject({ status: "completed", step: steps });
    expect(await metricSteps(server, runId, "reward/mean")).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
    expect((await metricSteps(server, runId, "eval/score")).sort((a, b) => a - b)).toEqual([0, steps]);
    const rollouts = await call<{ step: number; items: unknown[] }>(server, "runs.rollouts", { runId }, "GET");
    expect(rollouts.step).toBe(steps);
    expect(rollouts.items).toHaveLength(8);
  }, 480_000);

  it("survives its worker being killed: the job resumes from the last checkpoint, no point lost or doubled", async () => {
    const server = await startServer({ TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
    servers.push(server);
    // Enough steps that the run is still going when the worker is killed, right after step 12 shows.
    const steps = 80;
    const runId = await launch(server, steps);
    await waitFor(server, runId, (r) => r.step >= 12, 120);
    const { workers } = (await (await fetch(`${server.url}/api/health`)).json()).training as { workers: { id: string }[] };
    expect(workers).toHaveLength(1);
    const pid = Number(/\[worker (\d+)\] job/.exec(server.output())![1]);
    process.kill(pid, "SIGKILL");

    const run = await waitFor(server, runId, (r) => r.status === "completed" || r.status === "failed", 240);
    expect(run.status).toBe("completed");
    expect(server.output()).toMatch(/started from step \d+/);
    const rewardSteps = await metricSteps(server, runId, "reward/mean");
    expect(rewardSteps).toHaveLength(steps);
    expect(new Set(rewardSteps).size).toBe(steps);
    const logs = await call<{ message: string }[]>(server, "runs.logs", { runId }, "GET");
    expect(logs.map((l) => l.message).join("\n")).toMatch(
      /Worker lost: worker wrk_\w+'s process was killed by SIGKILL\. Job job_\w+ requeued[\s\S]*Resuming from the checkpoint of step \d+/,
    );
  }, 480_000);

  it("runs two LoRA runs on one base side by side on one worker", async () => {
    const server = await startServer({
      TINKERLAB_BASES_DIR: basesDir,
      TINKERLAB_EXAMPLES: "off",
      ARTIFACTS_DIR: tempDir("artifacts"),
      TINKERLAB_WORKER_SLOTS: "2",
    });
    servers.push(server);
    const lora = async (name: string) => {
      const experiment = tinyExperiment(name, 60);
      const config = { ...experiment.config, agent: { ...experiment.config.agent, training: { mode: "lora", rank: 4 } } };
      const { id } = await call<{ id: string }>(server, "experiments.create", { name, config });
      return (await call<{ runId: string }>(server, "runs.launch", { experimentId: id })).runId;
    };
    const runIds = [await lora("lora-a"), await lora("lora-b")];
    // Both running at once, on the one worker (the scheduler's view says where each job is).
    const deadline = Date.now() + 120_000;
    let together = false;
    while (!together && Date.now() < deadline) {
      const runs = await Promise.all(runIds.map((id) => call<Run>(server, "runs.byId", { id }, "GET")));
      together = runs.every((r) => r.status === "running" && r.step > 0);
      if (runs.some((r) => r.status === "completed")) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(together).toBe(true);
    expect(server.output()).toMatch(/registered as wrk_\w+ .*2 slots/);
    for (const runId of runIds)
      expect(await waitFor(server, runId, (r) => r.status === "completed" || r.status === "failed", 240)).toMatchObject({ status: "completed", step: 60 });
    const started = [...server.output().matchAll(/\[worker (\d+)\] job job_\w+ \(run (run_\w+)\) started/g)];
    expect(new Set(started.filter((m) => runIds.includes(m[2]!)).map((m) => m[1]))).toHaveLength(1);

    // Its last checkpoint exported as one file and downloaded, as the run page's Export and Download links do.
    const [last] = await call<{ id: string; step: number }[]>(server, "checkpoints.ofRun", { runId: runIds[0] }, "GET");
    const { runId: exportRun } = await call<{ runId: string }>(server, "runs.export", { checkpointId: last!.id });
    expect(await waitFor(server, exportRun, (r) => r.status === "completed" || r.status === "failed", 120)).toMatchObject({ status: "completed" });
    const [file] = await call<{ id: string; kind: string; sizeBytes: number }[]>(server, "checkpoints.ofRun", { runId: exportRun }, "GET");
    expect(file!.kind).toBe("export");
    const download = await fetch(`${server.url}/api/exports/${file!.id}`);
    expect(download.status).toBe(200);
    expect(download.headers.get("content-disposition")).toMatch(/^attachment; filename="lora-a-.*-export-step60\.safetensors"$/);
    const bytes = new Uint8Array(await download.arrayBuffer());
    expect(bytes.length).toBe(file!.sizeBytes);
    expect(decodeSafetensors(bytes).metadata.format).toBe("tinkerlab.model");
    expect((await fetch(`${server.url}/api/exports/ckpt_nope`)).status).toBe(404);
  }, 360_000);

  it("a SIGKILLed web server takes its local worker with it: no orphan heartbeating a server that is gone", async () => {
    const server = await startServer({ TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
    servers.push(server);
    const deadline = Date.now() + 60_000;
    while (!/\[worker (\d+)\] registered/.test(server.output()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const workerPid = Number(/\[worker (\d+)\] registered/.exec(server.output())![1]);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive(workerPid)).toBe(true);
    // The server itself (tsx runs it as a child of the process the test started), killed with no chance to clean up.
    const serverPid = Number(
      execFileSync("pgrep", ["-P", String(server.process.pid)], { encoding: "utf8" })
        .trim()
        .split("\n")[0],
    );
    process.kill(serverPid, "SIGKILL");
    const gone = Date.now() + 15_000;
    while (alive(workerPid) && Date.now() < gone) await new Promise((r) => setTimeout(r, 100));
    expect(alive(workerPid)).toBe(false);
    expect(server.output()).toMatch(/the server that started this worker is gone; leaving/);
  }, 120_000);

  it("continues after the whole server restarts: the run resumes from its checkpoint", async () => {
    const dataDir = path.join(tempDir("db"), "db");
    const artifacts = tempDir("artifacts");
    const env = { TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: artifacts, PGLITE_DATA_DIR: dataDir };
    const first = await startServer(env);
    const steps = 80;
    const runId = await launch(first, steps);
    await waitFor(first, runId, (r) => r.step >= 12, 120);
    await first.stop();

    const second = await startServer(env);
    servers.push(second);
    const run = await waitFor(second, runId, (r) => r.status === "completed" || r.status === "failed", 300);
    expect(run.status).toBe("completed");
    expect(second.output()).toMatch(/started from step [1-9]\d*/);
    const rewardSteps = await metricSteps(second, runId, "reward/mean");
    expect(new Set(rewardSteps).size).toBe(steps);
    expect(rewardSteps).toHaveLength(steps);
  }, 480_000);

  it("runs two jobs at once on two workers against a PostgreSQL server", async (context) => {
    const adminUrl = process.env.TEST_DATABASE_URL;
    if (!adminUrl) context.skip();
    const { url } = await createScratchDatabase(adminUrl!, "tinkerlab_e2e");
    const server = await startServer({
      DATABASE_URL: url,
      TINKERLAB_BASES_DIR: basesDir,
      TINKERLAB_EXAMPLES: "off",
      TINKERLAB_LOCAL_WORKERS: "2",
      ARTIFACTS_DIR: tempDir("artifacts"),
    });
    servers.push(server);
    // Both workers registered first: otherwise a fast machine lets the first one finish run a and take run b too
    // before the second has started up.
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { workers } = (await (await fetch(`${server.url}/api/health`)).json()).training as { workers: unknown[] };
      if (workers.length === 2) break;
      if (Date.now() > deadline) throw new Error(`${workers.length} of 2 workers registered after 120 s:\n${server.output().slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const steps = 80;
    const runs = [await launch(server, steps, "a"), await launch(server, steps, "b")];
    // At once: both running mid-way at the same moment.
    let overlap = false;
    while (!overlap) {
      const states = await Promise.all(runs.map((id) => call<Run>(server, "runs.byId", { id }, "GET")));
      overlap = states.every((r) => r.status === "running" && r.step > 0 && r.step < steps);
      if (!overlap && states.some((r) => r.status === "completed" || r.status === "failed")) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(overlap).toBe(true);
    for (const runId of runs) {
      expect(await waitFor(server, runId, (r) => r.status === "completed" || r.status === "failed", 180)).toMatchObject({ status: "completed", step: steps });
    }
    const workerOfJob = [...server.output().matchAll(/\[worker (\d+)\] job job_\w+ \(run (run_\w+)\) started/g)].map((m) => m[1]);
    expect(new Set(workerOfJob).size).toBe(2);
  }, 300_000);
});
