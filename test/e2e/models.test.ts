/**
 * The Models page lists the checkpoints of the caller's runs beside the bases: the run that saved each (a link),
 * its step, kind, size and age, with the actions the run page has for it. This test plays the run's worker, so the
 * checkpoints are exactly the ones it reports.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  callAsWorker,
  callProcedure,
  claimJobAsWorker,
  launchBrowser,
  SCREENSHOTS,
  startServerWithRunForTestWorker,
  tempDir,
  type TestServer,
} from "./support/server";

const TOKEN = "e2e-models-worker-token";
let server: TestServer;
let runId: string;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  ({ server, runId } = await startServerWithRunForTestWorker(TOKEN, "tiny-models", { name: "grpo", steps: 4, groupSize: 4, groupsPerStep: 2 }));
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("the models page", () => {
  it("lists the bases and no checkpoints before a run has saved one", async () => {
    await page.goto(`${server.url}/models`);
    await page.getByRole("table", { name: "Built-in bases" }).getByText("tiny-base").waitFor();
    await page.getByText("Checkpoints of your runs (0)").waitFor();
  });

  it("lists a run's checkpoints with their run, step, kind, size and actions", async () => {
    const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
    const folder = tempDir("checkpoint");
    const state = await callAsWorker<{ checkpointId: string }>(server, TOKEN, "worker.checkpoint", {
      workerId,
      jobId,
      step: 2,
      path: folder,
      sizeBytes: 3 * 1024,
    });
    const weights = await callAsWorker<{ checkpointId: string }>(server, TOKEN, "worker.checkpoint", {
      workerId,
      jobId,
      step: 4,
      path: folder,
      sizeBytes: 1536,
      kind: "sampler",
    });
    const run = await callProcedure<{ name: string }>(server, "runs.byId", { id: runId }, "GET");

    await page.goto(`${server.url}/models`);
    const table = page.getByRole("table", { name: "Checkpoints" });
    const row = (id: string) => table.locator(`tr[data-checkpoint="${id}"]`);
    await row(state.checkpointId).waitFor();
    await page.getByText("Checkpoints of your runs (2)").waitFor();
    // Newest first.
    expect(await table.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-checkpoint")))).toEqual([
      weights.checkpointId,
      state.checkpointId,
    ]);
    const cells = (id: string) => row(id).locator("td").allInnerTexts();
    const [id, runCell, step, kind, size, created, actions] = await cells(state.checkpointId);
    expect(id).toBe(state.checkpointId);
    expect(runCell).toContain(run.name);
    expect(runCell).toContain("tiny-models");
    expect([step, kind, size]).toEqual(["2", "state", "3.0 KiB"]);
    expect(created).toMatch(/now|second/);
    expect(actions).toMatch(/Export\s+ONNX\s+Try/);
    expect((await cells(weights.checkpointId)).slice(2, 5)).toEqual(["4", "weights", "1.5 KiB"]);
    expect(await row(state.checkpointId).getByRole("link", { name: "ONNX" }).getAttribute("href")).toBe(`/api/models/${state.checkpointId}.onnx`);
    expect(await row(state.checkpointId).getByRole("link", { name: "Try" }).getAttribute("href")).toBe(`/playground?model=${state.checkpointId}&run=${runId}`);
    await page.screenshot({ path: path.join(SCREENSHOTS, "models-checkpoints.png"), fullPage: true });

    await row(state.checkpointId).getByRole("link", { name: run.name }).click();
    await page.waitForURL(`${server.url}/runs/${runId}`);
  });
});
