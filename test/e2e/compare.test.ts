/**
 * Comparing runs in a real browser: two short runs on a tiny base (one launched from the editor after a config
 * change, one through the API), picked in the runs list, then the compare view's curves and config diff, with
 * every control written to the URL.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;
const runIds: string[] = [];

beforeAll(async () => {
  const basesDir = tempDir("bases");
  const base = BaseModel.create({ vocabSize: 262, contextLength: 48, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 7 });
  await new TrainingClient(base).saveWeightsForSampler(path.join(basesDir, "tiny-base"));
  server = await startServer({ TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const call = <T>(procedure: string, input: unknown, method: "GET" | "POST" = "POST") => callProcedure<T>(server, procedure, input, method);

async function waitForEnd(runId: string, seconds: number) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const run = await call<{ status: string; step: number }>("runs.byId", { id: runId }, "GET");
    if (run.status === "completed" || run.status === "failed") return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} still ${run.status} after ${seconds} s:\n${server.output().slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

const tinyConfig = (name: string) => ({
  name,
  environment: "arithmetic",
  agent: { base: "tiny-base", sampling: { maxTokens: 3 } },
  algorithm: { name: "grpo", steps: 8, groupSize: 4, groupsPerStep: 2 },
  evaluation: { every: 0, episodes: 8 },
  checkpointEvery: 0,
});

describe("comparing runs", () => {
  it("launches a run from the editor after changing its config", async () => {
    const { id } = await call<{ id: string }>("experiments.create", { name: "tiny", config: tinyConfig("tiny") });
    runIds.push((await call<{ runId: string }>("runs.launch", { experimentId: id })).runId);

    await page.goto(`${server.url}/experiments/${id}/edit`);
    const config = page.getByRole("form", { name: "Config form" });
    await config.locator('[data-field="seed"] input').fill("3");
    await config.locator('[data-field="algorithm.learningRate"] input').fill("0.01");
    await page.getByRole("button", { name: "Save & launch" }).click();
    await page.waitForURL(/\/runs\/run_[a-z0-9]+$/);
    runIds.push(page.url().split("/").at(-1)!);
    for (const runId of runIds) expect(await waitForEnd(runId, 180)).toMatchObject({ status: "completed", step: 8 });
  }, 300_000);

  it("picks runs in the runs list and compares their curves and configs, keeping the view in the URL", async () => {
    await page.goto(`${server.url}/runs`);
    for (const runId of runIds) {
      const run = await call<{ name: string }>("runs.byId", { id: runId }, "GET");
      const box = page.getByLabel(`Select ${run.name} to compare`);
      // A click before the table hydrates is undone by React; click until the selection holds it.
      await expect.poll(async () => (await box.isChecked()) || (await box.click(), box.isChecked()), { timeout: 60_000, interval: 500 }).toBe(true);
    }
    await page.getByRole("region", { name: "Selected runs" }).getByText("2 runs selected").waitFor();
    await page.getByRole("region", { name: "Selected runs" }).getByRole("link", { name: "Compare" }).click();
    await page.waitForURL((url) => url.pathname === "/compare" && url.searchParams.get("runs") === runIds.join(","));

    const chart = page.getByRole("figure", { name: "chart reward/mean" });
    await chart.locator(".recharts-line-curve").first().waitFor({ state: "attached" });
    expect(await chart.locator(".recharts-line-curve").count()).toBeGreaterThanOrEqual(2);
    const metric = page.getByLabel("Metric");
    expect(await metric.inputValue()).toBe("reward/mean");

    // The config diff: the seed and learning rate differ; "differences only" hides the rest.
    const diff = page.getByRole("table", { name: "Config diff" });
    await diff.getByRole("rowheader", { name: /^seed$/ }).waitFor();
    expect(await diff.locator("tr[data-differs]").count()).toBe(2);
    const allRows = await diff.locator("tbody tr").count();
    expect(allRows).toBeGreaterThan(10);
    await page.screenshot({ path: path.join(SCREENSHOTS, "compare.png"), fullPage: true });

    await page.getByLabel("Differences only").check();
    await page.waitForURL(/[?&]diff=1/);
    expect(await diff.locator("tbody tr").count()).toBe(2);
    expect(await diff.innerText()).toMatch(/algorithm\.learningRate[\s\S]*seed/);

    const other = (await metric.locator("option").allInnerTexts()).find((name) => name !== "reward/mean")!;
    await metric.selectOption(other);
    await page.waitForURL((url) => url.searchParams.get("metric") === other);
    await page.getByRole("figure", { name: `chart ${other}` }).waitFor();

    await page.getByLabel("Smoothing").fill("0.9");
    await page.waitForURL(/[?&]smooth=0\.9/);
    await page.getByRole("radio", { name: "Wall time" }).click();
    await page.waitForURL(/[?&]x=time/);

    // The whole view comes back from the URL.
    await page.reload();
    expect(await page.getByLabel("Metric").inputValue()).toBe(other);
    expect(await page.getByLabel("Smoothing").inputValue()).toBe("0.9");
    expect(await page.getByRole("radio", { name: "Wall time" }).isChecked()).toBe(true);
    expect(await page.getByLabel("Differences only").isChecked()).toBe(true);
    await page
      .getByRole("figure", { name: `chart ${other}` })
      .locator(".recharts-line-curve")
      .first()
      .waitFor({ state: "attached" });
    await page.screenshot({ path: path.join(SCREENSHOTS, "compare-wall-time.png"), fullPage: true });
  }, 120_000);
});
