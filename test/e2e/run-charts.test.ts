/**
 * The run page's charts with a long series, in a real browser: 20,000 points arrive as a coarse min/max summary;
 * dragging across a chart zooms every chart into that range at full resolution (fetched from the server), and
 * "reset zoom" or a double-click returns to the whole run.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callAsWorker, callProcedure, claimJobAsWorker, launchBrowser, SCREENSHOTS, startServerWithRunForTestWorker, type TestServer } from "./support/server";

const TOKEN = "run-charts-worker-token-0123456789abcdef";
const POINTS = 20_000;
let server: TestServer;
let browser: BrowserContext;
let page: Page;
let runId: string;

/** reward/mean over 20,000 steps: a slow wave with a one-step spike at 12,345. */
const rewardAt = (step: number) => (step === 12_345 ? 3 : Math.sin(step / 400));

beforeAll(async () => {
  ({ server, runId } = await startServerWithRunForTestWorker(TOKEN, "long", { name: "grpo", steps: POINTS, groupSize: 2, groupsPerStep: 2 }));
  const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
  for (let from = 1; from <= POINTS; from += 10_000) {
    const steps = Array.from({ length: Math.min(10_000, POINTS - from + 1) }, (_, i) => from + i);
    const metrics = steps.flatMap((step) => [
      { step, name: "reward/mean", value: rewardAt(step) },
      { step, name: "loss/policy", value: 1 / step },
    ]);
    await callAsWorker(server, TOKEN, "worker.report", { workerId, jobId, step: steps.at(-1), metrics });
  }
  await callAsWorker(server, TOKEN, "worker.finish", { workerId, jobId, outcome: "completed", reason: null });
  browser = await launchBrowser();
  page = await browser.newPage();
  await page.setViewportSize({ width: 1400, height: 900 });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const chart = (name: string) => page.getByLabel(`chart ${name}`);
const shownOf = async (name: string) => Number(await chart(name).getAttribute("data-shown"));
const zoomOf = (name: string) => chart(name).getAttribute("data-zoom");

describe("run page charts", () => {
  it("zooms every chart into a dragged range, at full resolution there, and back out", async () => {
    await page.goto(`${server.url}/runs/${runId}`);
    await expect.poll(() => chart("reward/mean").getAttribute("data-points"), { timeout: 60_000 }).toBe(String(POINTS));
    // The whole run arrives as a summary: far fewer points held than the series has.
    const whole = await shownOf("reward/mean");
    expect(whole).toBeLessThan(2_000);

    // Drag across the middle of the plot area (hydration first: a drag before it is lost, so retry until it takes).
    const box = (await chart("reward/mean").locator(".recharts-cartesian-grid").boundingBox())!;
    const y = box.y + box.height / 2;
    await expect
      .poll(
        async () => {
          await page.mouse.move(box.x + box.width * 0.55, y);
          await page.mouse.down();
          await page.mouse.move(box.x + box.width * 0.6, y, { steps: 5 });
          await page.mouse.move(box.x + box.width * 0.65, y, { steps: 5 });
          await page.mouse.up();
          return zoomOf("reward/mean");
        },
        { timeout: 30_000, interval: 1_000 },
      )
      .not.toBeNull();
    const [from, to] = (await zoomOf("reward/mean"))!.split("-").map(Number) as [number, number];
    expect(from).toBeGreaterThan(POINTS * 0.45);
    expect(to).toBeLessThan(POINTS * 0.75);
    expect(to - from).toBeGreaterThan(POINTS * 0.05);
    // Every integer step of the range is drawn once the range has come from the server, on every chart.
    const inRange = Math.floor(to) - Math.ceil(from) + 1;
    await expect.poll(() => shownOf("reward/mean"), { timeout: 30_000 }).toBe(inRange);
    await expect.poll(() => shownOf("loss/policy"), { timeout: 30_000 }).toBe(inRange);
    expect(await zoomOf("loss/policy")).toBe(await zoomOf("reward/mean"));
    await expect(page.getByRole("button", { name: /reset zoom/ }).textContent()).resolves.toContain(`steps ${Math.round(from)}–${Math.round(to)}`);
    await page.screenshot({ path: path.join(SCREENSHOTS, "run-charts-zoomed.png") });

    await page.getByRole("button", { name: /reset zoom/ }).click();
    await expect.poll(() => zoomOf("reward/mean")).toBeNull();
    expect(await shownOf("reward/mean")).toBe(whole);
  }, 180_000);

  it("refuses a zoom range that runs backwards, naming the fields", async () => {
    await expect(callProcedure(server, "runs.metricRange", { runId, name: "reward/mean", fromStep: 10, toStep: 5 }, "GET")).rejects.toThrow(
      /fromStep must not be after toStep/,
    );
  });
});
