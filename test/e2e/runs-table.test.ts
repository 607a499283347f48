/**
 * The runs table in Chromium: five runs of a learning-rate sweep, reported by the test playing the worker, some
 * tagged. Through the page's own controls the table gets a metric column, is sorted by it, grouped by the learning
 * rate and filtered by a tag; reloaded from its URL it shows the same rows in the same order.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saveTinyBase } from "../support/tiny-run";
import { callAsWorker, callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

const TOKEN = "runs-table-e2e-worker-token";

let server: TestServer;
let browser: BrowserContext;
let page: Page;
/** Each run's name by its id, and its rewards. */
const runs: { id: string; name: string; learningRate: number; rewards: number[] }[] = [];

const sweep: { learningRate: number; rewards: number[][] }[] = [
  {
    learningRate: 0.01,
    rewards: [
      [0.2, 0.6, 0.4],
      [0.1, 0.3, 0.5],
      [0.3, 0.9, 0.8],
    ],
  },
  {
    learningRate: 0.001,
    rewards: [
      [0.1, 0.2, 0.7],
      [0.0, 0.1, 0.2],
    ],
  },
];

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
  // One experiment, one version per learning rate: its first run launched, the others re-runs with new seeds.
  const config = (learningRate: number) => ({
    name: "sweep",
    environment: "arithmetic",
    agent: { base: "tiny-base", sampling: { maxTokens: 3 } },
    algorithm: { name: "grpo", steps: 3, groupSize: 2, groupsPerStep: 2, learningRate },
    evaluation: { every: 0, episodes: 8 },
    checkpointEvery: 0,
  });
  const { id } = await callProcedure<{ id: string }>(server, "experiments.create", { name: "sweep", config: config(sweep[0]!.learningRate) });
  for (const [v, { learningRate, rewards }] of sweep.entries()) {
    if (v > 0) await callProcedure(server, "experiments.save", { id, files: {}, config: config(learningRate) });
    const { runId: first } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
    const ids = [first];
    for (let i = 1; i < rewards.length; i++) ids.push((await callProcedure<{ runId: string }>(server, "runs.rerun", { id: first })).runId);
    for (const [i, runId] of ids.entries()) {
      const { name } = await callProcedure<{ name: string }>(server, "runs.byId", { id: runId }, "GET");
      runs.push({ id: runId, name, learningRate, rewards: rewards[i]! });
    }
  }
  // The test is the worker: it takes each job as the scheduler places it and reports the run's rewards.
  const { workerId } = await callAsWorker<{ workerId: string }>(server, TOKEN, "worker.register", {
    hostname: "e2e",
    pid: process.pid,
    backend: "e2e",
    devices: [{ kind: "cpu", name: "e2e", memoryMb: 4096, computeSlots: 1 }],
  });
  for (let done = 0; done < runs.length; ) {
    const [jobId] = (await callAsWorker<{ assignments: string[] }>(server, TOKEN, "worker.heartbeat", { workerId, running: [] })).assignments;
    if (!jobId) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      continue;
    }
    const claimed = await callAsWorker<{ job: { runId: string } }>(server, TOKEN, "worker.claim", { workerId, jobId });
    const run = runs.find((r) => r.id === claimed.job.runId)!;
    const metrics = run.rewards.map((value, i) => ({ step: i + 1, name: "reward/mean", value }));
    await callAsWorker(server, TOKEN, "worker.report", { workerId, jobId, step: run.rewards.length, metrics });
    await callAsWorker(server, TOKEN, "worker.finish", { workerId, jobId, outcome: "completed", reason: null });
    done++;
  }
  // Every run but the second of the first learning rate is tagged "keep".
  for (const [i, run] of runs.entries()) if (i !== 1) await callProcedure(server, "runs.tag", { id: run.id, add: ["keep"] });
  browser = await launchBrowser();
  page = await browser.newPage();
  await page.setViewportSize({ width: 1400, height: 900 });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

/** The table's rows as the page shows them, top to bottom: a group's header as `group:<value>`, a run by its name. */
async function shownRows(): Promise<string[]> {
  await page.locator('table[aria-label="Runs"][aria-busy="false"]').waitFor();
  return page
    .locator('table[aria-label="Runs"] tbody tr')
    .evaluateAll((rows) =>
      rows.map((row) => (row.hasAttribute("data-group") ? `group:${row.getAttribute("data-group")}` : (row.querySelector("th a")?.textContent ?? ""))),
    );
}

/** Clicks until the control reacts (a click before React hydrates the page is lost). */
async function clickUntil(click: () => Promise<unknown>, done: () => Promise<boolean>) {
  await expect.poll(async () => (await done()) || (await click(), await done()), { timeout: 60_000, interval: 500 }).toBe(true);
}

describe("the runs table", () => {
  it("sorts by a metric, groups by a config field, filters by a tag, and comes back the same from its URL", async () => {
    await page.goto(`${server.url}/runs`);
    const columnsButton = page.getByRole("button", { name: "Columns" });
    await clickUntil(
      () => columnsButton.click(),
      async () => (await columnsButton.getAttribute("aria-expanded")) === "true",
    );

    // A column of each run's best reward, then sorted by it (highest first).
    const picker = page.getByRole("region", { name: "Columns" });
    await picker.getByLabel("Metric").selectOption("reward/mean");
    await picker.getByLabel("Summary").selectOption("max");
    await picker.getByRole("button", { name: "Add column" }).first().click();
    await page.waitForURL((url) => url.searchParams.getAll("c").includes("metric:max:reward/mean"));
    const header = page.getByRole("columnheader", { name: "reward/mean (max)" });
    await header.getByRole("button").click();
    await page.waitForURL((url) => url.searchParams.get("sort") === "metric:max:reward/mean" && url.searchParams.get("order") === "desc");
    const byBest = [...runs].sort((a, b) => Math.max(...b.rewards) - Math.max(...a.rewards)).map((r) => r.name);
    expect(await shownRows()).toEqual(byBest);
    expect(await header.getAttribute("aria-sort")).toBe("descending");

    // Grouped by the learning rate: each group's rows under its header, groups in the order of their best run.
    await page.getByLabel("Group by").selectOption("algorithm.learningRate");
    await page.waitForURL((url) => url.searchParams.get("group") === "algorithm.learningRate");
    const grouped = (rows: typeof runs) =>
      sweep
        .map((s) => ({ s, members: rows.filter((r) => r.learningRate === s.learningRate) }))
        .filter((g) => g.members.length > 0)
        .sort((a, b) => Math.max(...b.members.flatMap((r) => r.rewards)) - Math.max(...a.members.flatMap((r) => r.rewards)))
        .flatMap((g) => [`group:${g.s.learningRate}`, ...byBest.filter((name) => g.members.some((r) => r.name === name))]);
    expect(await shownRows()).toEqual(grouped(runs));
    // The group's header shows its count and the mean of the best rewards.
    const firstGroup = page.locator('tr[data-group="0.01"]');
    expect(await firstGroup.innerText()).toContain("3 runs");
    expect(await firstGroup.innerText()).toContain("0.6667");

    // Filtered by the tag: the untagged run leaves its group.
    await page.getByLabel("Filter by tag").selectOption("keep");
    await page.waitForURL((url) => url.searchParams.getAll("tag").includes("keep"));
    const kept = runs.filter((_, i) => i !== 1);
    const expected = grouped(kept);
    expect(await shownRows()).toEqual(expected);
    expect(await page.locator('tr[data-group="0.01"]').innerText()).toContain("2 runs");
    await page.screenshot({ path: path.join(SCREENSHOTS, "runs-table.png"), fullPage: true });

    // The URL holds the whole table: reloaded, or opened afresh in another page, it shows the same rows in order.
    const url = page.url();
    await page.reload();
    expect(await shownRows()).toEqual(expected);
    const other = await browser.newPage();
    await other.goto(url);
    await other.locator('table[aria-label="Runs"] tbody tr').first().waitFor();
    const otherRows = await other
      .locator('table[aria-label="Runs"] tbody tr')
      .evaluateAll((rows) =>
        rows.map((row) => (row.hasAttribute("data-group") ? `group:${row.getAttribute("data-group")}` : (row.querySelector("th a")?.textContent ?? ""))),
      );
    expect(otherRows).toEqual(expected);
    expect(await other.getByLabel("Group by").inputValue()).toBe("algorithm.learningRate");
    await other.close();
  });

  it("renames, archives and deletes runs from a row's menu, each through its dialog", async () => {
    await page.goto(`${server.url}/runs`);
    const table = page.getByRole("table", { name: "Runs" });
    const menuOf = async (name: string, item: string) => {
      // Exact names: runs launched in the same second are `name` and `name-2`.
      const summary = page.getByLabel(`Actions for ${name}`, { exact: true });
      const button = page.getByRole("button", { name: item, exact: true });
      await clickUntil(
        () => summary.click(),
        () => button.isVisible(),
      );
      await button.click();
      return page.getByRole("dialog");
    };

    const [first, second, third] = runs;
    let dialog = await menuOf(first!.name, "Rename…");
    await dialog.getByLabel("Name").fill(second!.name);
    await dialog.getByRole("button", { name: "Rename" }).click();
    // A name another run has is refused, saying so; the dialog stays open to pick another.
    await dialog
      .getByRole("alert")
      .filter({ hasText: `is named '${second!.name}' already` })
      .waitFor();
    await dialog.getByLabel("Name").fill("best of the sweep");
    await dialog.getByRole("button", { name: "Rename" }).click();
    await table.getByRole("link", { name: "best of the sweep", exact: true }).waitFor();
    expect(await page.getByRole("dialog").count()).toBe(0);

    dialog = await menuOf(second!.name, "Archive…");
    await dialog.getByRole("button", { name: "Archive" }).click();
    await table.getByRole("link", { name: second!.name, exact: true }).waitFor({ state: "detached" });
    await page.getByLabel("Archived").check();
    await page.waitForURL((url) => url.searchParams.get("archived") === "1");
    expect(await table.locator("tr", { has: page.getByRole("link", { name: second!.name, exact: true }) }).innerText()).toContain("archived");

    dialog = await menuOf(third!.name, "Delete…");
    const confirm = dialog.getByRole("button", { name: "Delete for good" });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel("Type the run's name to confirm").fill(third!.name);
    await page.screenshot({ path: path.join(SCREENSHOTS, "runs-table-delete.png") });
    await confirm.click();
    await table.getByRole("link", { name: third!.name, exact: true }).waitFor({ state: "detached" });
    await page
      .getByRole("status")
      .filter({ hasText: `Deleted ${third!.name}.` })
      .waitFor();
    expect((await callProcedure<{ total: number }>(server, "runs.table", { projectId: "prj_default", includeArchived: true }, "GET")).total).toBe(
      runs.length - 1,
    );
  });
});
