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

  it("shows a run that started over and failed at the furthest step it reached, with sparse charts on sensible axes", async () => {
    const config = {
      name: "restarts",
      environment: "arithmetic",
      agent: { base: "tiny-base", sampling: { maxTokens: 3 } },
      algorithm: { name: "grpo", steps: 8, groupSize: 2, groupsPerStep: 2 },
      evaluation: { every: 0, episodes: 8 },
      checkpointEvery: 0,
    };
    const { id } = await callProcedure<{ id: string }>(server, "experiments.create", { name: "restarts", config });
    const { runId: failed } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
    // The first attempt reports steps 1-3 (reward/mean at step 3 only) and loses its worker; with no checkpoint, each
    // of the next two starts over at step 0 and loses its worker too: the third loss fails the run.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
      const metrics =
        attempt === 1 ? [1, 2, 3].map((step) => ({ step, name: "loss/policy", value: 1 / step })).concat({ step: 3, name: "reward/mean", value: 0.69 }) : [];
      await callAsWorker(server, TOKEN, "worker.report", { workerId, jobId, step: attempt === 1 ? 3 : 0, metrics });
      await callAsWorker(server, TOKEN, "worker.leave", { workerId, why: "the worker left" });
    }
    await page.goto(`${server.url}/runs/${failed}`);
    await expect.poll(() => page.getByText("failed", { exact: true }).count()).toBeGreaterThan(0);
    await expect.poll(() => page.getByText(/step 3 of 8/).count()).toBe(1);
    // The reason, beside the status and in the log's last line.
    await expect.poll(() => page.getByText(/without getting past step 3/).count()).toBe(2);
    // The words point to the log, and the log is where they say: below them.
    const pointer = page.getByRole("link", { name: "the log below" });
    const log = page.getByRole("list", { name: "Log" });
    await expect.poll(() => log.getByText(/Failed: lost its worker 3 times/).count()).toBe(1);
    expect((await log.boundingBox())!.y).toBeGreaterThan((await pointer.boundingBox())!.y);
    expect(await pointer.getAttribute("href")).toBe("#run-log");
    // One point at 0.69: an axis of a small band around it (not -0.31 to 1.69), ticks that differ from each other.
    const ticksOf = (name: string, axis: "x" | "y") =>
      chart(name).locator(`.recharts-${axis}Axis-tick-labels .recharts-cartesian-axis-tick-value`).allTextContents();
    await expect.poll(async () => (await ticksOf("reward/mean", "y")).length).toBeGreaterThan(2);
    const yTicks = (await ticksOf("reward/mean", "y")).map((t) => Number(t.replace("\u2212", "-")));
    expect(Math.min(...yTicks)).toBeGreaterThanOrEqual(0.5);
    expect(Math.max(...yTicks)).toBeLessThanOrEqual(0.9);
    expect(new Set(yTicks).size).toBe(yTicks.length);
    // Three steps: ticks at whole steps only.
    const xTicks = (await ticksOf("loss/policy", "x")).map(Number);
    expect(xTicks.length).toBeGreaterThan(1);
    expect(xTicks.every(Number.isInteger)).toBe(true);
    await page.screenshot({ path: path.join(SCREENSHOTS, "run-failed-restarts.png"), fullPage: true });
  }, 120_000);

  it("serves an icon at /favicon.ico, the address browsers ask for on every page", async () => {
    const response = await fetch(`${server.url}/favicon.ico`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/image\/(x-icon|vnd\.microsoft\.icon)/);
    expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(0);
  });

  it("refuses a zoom range that runs backwards, naming the fields", async () => {
    await expect(callProcedure(server, "runs.metricRange", { runId, name: "reward/mean", fromStep: 10, toStep: 5 }, "GET")).rejects.toThrow(
      /fromStep must not be after toStep/,
    );
  });
});
