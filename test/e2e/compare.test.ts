/**
 * Comparing runs in a real browser: three runs of three versions of one experiment (seeds 0, 1 and 0; the third
 * version changes a line of environment.ts), whose metrics this test reports as their worker. The compare view
 * draws two panels (one with another metric as its x-axis) with a shared hover, diffs the configs and the source
 * files, groups the runs by seed into a mean with a band, and restores all of it from the URL.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saveTinyBase } from "../support/tiny-run";
import { callAsWorker, callProcedure, claimJobAsWorker, launchBrowser, SCREENSHOTS, startServer, type TestServer, tempDir } from "./support/server";

const TOKEN = "compare-worker-token-0123456789abcdef";
const STEPS = 20;
let server: TestServer;
let browser: BrowserContext;
let page: Page;
const runIds: string[] = [];

const environment = (target: number) =>
  [
    "// The arithmetic environment's target, as this experiment tunes it.",
    "export const description = 'add two numbers';",
    `export const target = ${target};`,
    "export function reward(answer: number, expected: number) {",
    "  return answer === expected ? 1 : 0;",
    "}",
    "",
  ].join("\n");

const config = (seed: number) => ({
  name: "adder",
  environment: "arithmetic",
  seed,
  agent: { base: "tiny-base", sampling: { maxTokens: 3 } },
  algorithm: { name: "grpo", steps: STEPS, groupSize: 2, groupsPerStep: 2 },
  evaluation: { every: 0, episodes: 8 },
  checkpointEvery: 0,
});

/**
 * How far each run's reward/mean sits above the first's: the seed-0 runs (0 and 2) average 0.1 above it, well
 * apart from the seed-1 run.
 */
const OFFSETS = [0, 0.5, 0.2];

/** Launches the experiment's latest version and reports its metrics as its worker. */
async function launchAndReport(experimentId: string, r: number) {
  const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId });
  const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
  const metrics = Array.from({ length: STEPS }, (_, i) => i + 1).flatMap((step) => [
    { step, name: "reward/mean", value: step / STEPS + OFFSETS[r]! },
    { step, name: "loss/policy", value: 1 / step + OFFSETS[r]! / 2 },
    { step, name: "train/tokens", value: 100 + 20 * r },
  ]);
  await callAsWorker(server, TOKEN, "worker.report", { workerId, jobId, step: STEPS, metrics });
  await callAsWorker(server, TOKEN, "worker.finish", { workerId, jobId, outcome: "completed", reason: null });
  runIds.push(runId);
}

beforeAll(async () => {
  const basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
  server = await startServer({
    TINKERLAB_BASES_DIR: basesDir,
    TINKERLAB_EXAMPLES: "off",
    ARTIFACTS_DIR: tempDir("artifacts"),
    TINKERLAB_LOCAL_WORKERS: "0",
    TINKERLAB_WORKER_TOKEN: TOKEN,
  });
  const { id } = await callProcedure<{ id: string }>(server, "experiments.create", {
    name: "adder",
    config: config(0),
    files: { "environment.ts": environment(10) },
  });
  await launchAndReport(id, 0);
  await callProcedure(server, "experiments.save", { id, config: config(1), files: { "environment.ts": environment(10) }, message: "seed 1" });
  await launchAndReport(id, 1);
  await callProcedure(server, "experiments.save", { id, config: config(0), files: { "environment.ts": environment(12) }, message: "target 12" });
  await launchAndReport(id, 2);
  browser = await launchBrowser();
  page = await browser.newPage();
  await page.setViewportSize({ width: 1400, height: 1000 });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const panel = (n: number) => page.getByRole("region", { name: `Panel ${n}` });
const linesOf = async (n: number) => Number(await panel(n).getByRole("figure").getAttribute("data-lines"));

describe("comparing runs", () => {
  it("draws two panels, one against another metric, with one hover read in both, and diffs configs and sources", async () => {
    await page.goto(`${server.url}/compare?runs=${runIds.join(",")}`);
    const first = panel(1).getByRole("figure", { name: "chart reward/mean" });
    await first.locator(".compare-line").first().waitFor({ state: "attached", timeout: 60_000 });
    expect(await linesOf(1)).toBe(3);

    // A second panel, loss/policy against reward/mean: paired step by step.
    await page.getByRole("button", { name: "Add panel" }).click();
    await page.getByLabel("Metric of panel 2").selectOption("loss/policy");
    await page.getByLabel("X axis of panel 2").selectOption("metric:reward/mean");
    await page.waitForURL((url) => url.searchParams.get("panels") === "reward/mean~step~0.6;loss/policy~metric:reward/mean~0.6");
    const second = panel(2).getByRole("figure", { name: "chart loss/policy" });
    await expect.poll(() => second.getAttribute("data-x")).toBe("metric:reward/mean");
    await expect.poll(() => linesOf(2)).toBe(3);
    // Its x-axis is reward/mean's range (0.05 to 1.5, rounded out to 0 to 2), not steps.
    const xTicks = (await second.locator(".recharts-xAxis-tick-labels .recharts-cartesian-axis-tick-value").allTextContents()).map(Number);
    expect(Math.max(...xTicks)).toBeLessThanOrEqual(2);
    expect(xTicks.some((t) => !Number.isInteger(t))).toBe(true);

    // Hovering the first panel reads the same step in both.
    const plot = (await first.locator("[data-hover-layer]").boundingBox())!;
    await page.mouse.move(plot.x + plot.width / 2, plot.y + plot.height / 2);
    const caption = (n: number) => panel(n).locator("figcaption");
    await expect.poll(() => caption(1).innerText()).toMatch(/step \d+/);
    const step = (await caption(1).innerText()).match(/step (\d+)/)![1]!;
    expect(Number(step)).toBeGreaterThan(5);
    expect(Number(step)).toBeLessThan(16);
    await expect.poll(() => caption(2).innerText()).toContain(`step ${step}`);
    expect(await caption(2).locator("[data-series]").count()).toBe(3);
    await page.screenshot({ path: path.join(SCREENSHOTS, "compare-panels.png"), fullPage: true });

    // The configs differ in the seed; the third run's environment.ts differs by one line.
    const diff = page.getByRole("table", { name: "Config diff" });
    await diff.getByRole("rowheader", { name: /^seed$/ }).waitFor();
    expect(await diff.locator("tr[data-differs]").count()).toBe(1);
    const names = await Promise.all(runIds.map(async (id) => (await callProcedure<{ name: string }>(server, "runs.byId", { id }, "GET")).name));
    const sameSource = page.getByRole("region", { name: `Source of ${names[1]}` });
    await expect.poll(() => sameSource.innerText()).toMatch(/files are identical/);
    const changed = page.getByRole("region", { name: `Source of ${names[2]}` }).getByRole("table", { name: "Diff of environment.ts" });
    await expect.poll(() => changed.locator('tr[data-kind="removed"]').innerText()).toContain("export const target = 10;");
    expect(await changed.locator('tr[data-kind="added"]').innerText()).toContain("export const target = 12;");
    expect(await changed.locator('tr[data-kind="added"] td').first().innerText()).toBe("");
    expect(await changed.locator('tr[data-kind="added"] td').nth(1).innerText()).toBe("3");
    await page.getByRole("heading", { name: "Source", exact: true }).scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(SCREENSHOTS, "compare-source-diff.png"), fullPage: true });
  }, 120_000);

  it("groups the runs by seed: one mean line per group, a band where a group has several runs", async () => {
    await page.getByLabel("Group by").fill("seed");
    await page.waitForURL((url) => url.searchParams.get("group") === "seed");
    const legend = page.getByRole("list", { name: "Legend" });
    await expect.poll(() => legend.locator("li").allInnerTexts()).toEqual(["seed = 0 · 2 runs", "seed = 1 · 1 run"]);
    await expect.poll(() => linesOf(1)).toBe(2);
    expect(await linesOf(2)).toBe(2);
    // The seed-0 group (runs 0 and 2) has a band; the lone seed-1 run has none.
    expect(await panel(1).locator(".compare-band").count()).toBe(1);

    // Its mean at a step is the mean of its runs: reward/mean of runs 0 and 2 at step 10 is 0.5 and 0.7.
    await page.getByLabel("Smoothing of panel 1").fill("0");
    // The hover is a slider for the keyboard too; the pointer leaves the charts first.
    await page.mouse.move(0, 0);
    await panel(1).locator("[data-hover-layer]").focus();
    await page.keyboard.press("Home");
    for (let i = 1; i < 10; i++) await page.keyboard.press("ArrowRight");
    const caption = panel(1).locator("figcaption");
    await expect.poll(() => caption.innerText()).toContain("step 10");
    expect(await caption.locator('[data-series="seed = 0 · 2 runs"]').innerText()).toMatch(/0\.6\s*\[0\.5, 0\.7\]/);

    await page.getByRole("radio", { name: "Std. error" }).check();
    await page.waitForURL((url) => url.searchParams.get("band") === "sem");
    // Two runs 0.2 apart: a standard deviation of 0.1414 over √2, a standard error of 0.1 (for two runs, half their
    // distance, so this band matches the min-max one; test/unit/compare/panel-data.test.ts tests more runs).
    await expect.poll(() => caption.locator('[data-series="seed = 0 · 2 runs"]').innerText()).toMatch(/0\.6\s*\[0\.5, 0\.7\]/);
    await page.screenshot({ path: path.join(SCREENSHOTS, "compare-grouped.png"), fullPage: true });

    // A field no run has is named, with what is accepted.
    await page.getByLabel("Group by").fill("algorithm.nope");
    await expect
      .poll(() => page.getByRole("alert").filter({ hasText: "No compared run" }).innerText())
      .toContain('No compared run\'s config has a field "algorithm.nope"');
    await page.getByLabel("Group by").fill("seed");
  }, 120_000);

  it("restores the panels, their axes and the grouping from the URL", async () => {
    await page.waitForURL((url) => url.searchParams.get("group") === "seed");
    await page.reload();
    expect(await page.getByLabel("Metric of panel 1").inputValue()).toBe("reward/mean");
    expect(await page.getByLabel("Metric of panel 2").inputValue()).toBe("loss/policy");
    expect(await page.getByLabel("X axis of panel 2").inputValue()).toBe("metric:reward/mean");
    expect(await page.getByLabel("Smoothing of panel 1").inputValue()).toBe("0");
    expect(await page.getByLabel("Group by").inputValue()).toBe("seed");
    expect(await page.getByRole("radio", { name: "Std. error" }).isChecked()).toBe(true);
    await expect.poll(() => linesOf(2), { timeout: 30_000 }).toBe(2);
    expect(await panel(1).locator(".compare-band").count()).toBe(1);

    // Removing a panel leaves the other, and the URL follows.
    await page.getByRole("button", { name: "Remove panel 1" }).click();
    await page.waitForURL((url) => url.searchParams.get("panels") === "loss/policy~metric:reward/mean~0.6");
    expect(await page.getByRole("region", { name: /^Panel / }).count()).toBe(1);
  }, 60_000);
});
