/**
 * A report in Chromium, on a team server: a person makes a report from two runs (one finished, one still training,
 * whose metrics this test reports as its worker) with two panels, writes a note with its preview, saves it and
 * shares it; someone signed out opens the link in a fresh browser and reads the note and both panels, the training
 * run's curve growing as it reports; revoked, the link is a 404.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callAsWorker, claimJobAsWorker, launchBrowser, SCREENSHOTS, startServer, type TestServer, tempDir } from "./support/server";

const TOKEN = "reports-worker-token-0123456789abcdef";
let server: TestServer;
const browsers: BrowserContext[] = [];

beforeAll(async () => {
  const basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
  server = await startServer({
    TINKERLAB_AUTH: "team",
    TINKERLAB_BASES_DIR: basesDir,
    TINKERLAB_EXAMPLES: "off",
    ARTIFACTS_DIR: tempDir("artifacts"),
    TINKERLAB_LOCAL_WORKERS: "0",
    TINKERLAB_WORKER_TOKEN: TOKEN,
  });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  await Promise.all(browsers.map((b) => b.close()));
  await server?.stop();
});

async function callAs<T>(cookie: string, procedure: string, input: unknown): Promise<T> {
  const response = await fetch(`${server.url}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", cookie },
    body: JSON.stringify({ json: input }),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`${procedure}: ${response.status} ${JSON.stringify(body)}`);
  return body.result.data.json as T;
}

/** Steps `from`..`to` of reward/mean and loss/policy, offset per run so the two lines differ. */
const metricsOf = (from: number, to: number, offset: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i).flatMap((step) => [
    { step, name: "reward/mean", value: step / 20 + offset },
    { step, name: "loss/policy", value: 1 / step + offset },
  ]);

/** The last step a panel's chart reads (its hover slider's maximum). */
const lastStep = (page: Page, metric: string) =>
  page
    .getByRole("region", { name: `panel ${metric}` })
    .locator("[data-hover-layer]")
    .getAttribute("aria-valuemax")
    .then(Number);

describe("a report", () => {
  it("saved with two panels and a note, opens by its share link for someone signed out, live, until revoked", async () => {
    const owner = await launchBrowser();
    browsers.push(owner);
    const page = await owner.newPage();
    await page.setViewportSize({ width: 1300, height: 1000 });
    await page.goto(`${server.url}/sign-up`);
    const signUp = page.getByRole("form", { name: "Sign up" });
    await signUp.getByLabel("Name").fill("Grace");
    await signUp.getByLabel("Email").fill("grace@example.com");
    await signUp.getByLabel("Password").fill("a long enough password");
    await signUp.getByRole("button", { name: "Make the account" }).click();
    await page.waitForURL(`${server.url}/`);
    await page.goto(`${server.url}/projects`);
    const make = page.getByRole("form", { name: "Make a project" });
    await make.getByLabel("Name").fill("Agents");
    await make.getByRole("button", { name: "Make project" }).click();
    await page.waitForURL(/\/projects\/prj_\w+$/);
    const projectId = page.url().split("/").at(-1)!;
    const session = (await owner.cookies(server.url)).find((c) => c.name === "tinkerlab.session_token")!;
    const cookie = `${session.name}=${session.value}`;

    // Two runs: the first finished at step 20, the second training (10 steps so far).
    const experiment = await callAs<{ id: string }>(cookie, "experiments.create", { ...tinyExperiment("adder", 20), projectId });
    const done = await callAs<{ runId: string }>(cookie, "runs.launch", { experimentId: experiment.id });
    const first = await claimJobAsWorker(server, TOKEN);
    await callAsWorker(server, TOKEN, "worker.report", { ...first, step: 20, metrics: metricsOf(1, 20, 0) });
    await callAsWorker(server, TOKEN, "worker.finish", { ...first, outcome: "completed", reason: null });
    const training = await callAs<{ runId: string }>(cookie, "runs.launch", { experimentId: experiment.id });
    const second = await claimJobAsWorker(server, TOKEN);
    await callAsWorker(server, TOKEN, "worker.report", { ...second, step: 10, metrics: metricsOf(1, 10, 0.3) });
    // Its worker stays alive (its lease is 20 s) while the report is made.
    const heartbeats = setInterval(
      () => void callAsWorker(server, TOKEN, "worker.heartbeat", { workerId: second.workerId, running: [second.jobId] }).catch(() => undefined),
      3000,
    );
    onTestFinished(() => clearInterval(heartbeats));

    // A new report from both runs, a panel per metric.
    await page.goto(`${server.url}/reports`);
    await page.getByRole("button", { name: "New report" }).click();
    await page.getByLabel("Title", { exact: true }).fill("Adder: two seeds");
    await page.getByLabel("Metrics").fill("reward/mean, loss/policy");
    const runBoxes = page.getByRole("group", { name: /Runs/ }).getByRole("checkbox");
    await expect.poll(() => runBoxes.count()).toBe(2);
    await runBoxes.nth(0).check();
    await runBoxes.nth(1).check();
    await page.getByRole("button", { name: "Create report" }).click();
    await page.waitForURL(/\/reports\/rep_\w+$/);
    await page.getByRole("region", { name: "panel reward/mean" }).locator(".compare-line").first().waitFor({ state: "attached", timeout: 60_000 });
    expect(await page.getByRole("figure", { name: "chart reward/mean" }).getAttribute("data-lines")).toBe("2");
    expect(await page.getByRole("figure", { name: "chart loss/policy" }).getAttribute("data-lines")).toBe("2");

    // The note: written in edit mode with its preview, moved to the top, saved.
    await page.getByRole("button", { name: "Edit" }).click();
    await page.getByLabel("Note (markdown)").fill("# Findings\nThe second seed is **ahead** at every step.\n\n<script>alert(1)</script>");
    await page.getByRole("region", { name: "Preview" }).getByRole("heading", { name: "Findings" }).waitFor();
    await page.getByRole("button", { name: "Move block 3 up" }).click();
    await page.getByRole("button", { name: "Move block 2 up" }).click();
    await page.screenshot({ path: path.join(SCREENSHOTS, "report-edit.png"), fullPage: true });
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("button", { name: "Edit" }).waitFor();
    const note = page.getByRole("article", { name: "note" });
    await note.getByRole("heading", { name: "Findings" }).waitFor();
    // Markup in a note is text, never HTML.
    expect(await note.locator("script").count()).toBe(0);
    expect(await note.innerText()).toContain("<script>alert(1)</script>");
    await page.screenshot({ path: path.join(SCREENSHOTS, "report.png"), fullPage: true });

    await page.getByRole("button", { name: "Share", exact: true }).click();
    const panel = page.getByRole("dialog", { name: "Share" });
    await panel.getByRole("button", { name: "Make link" }).click();
    const link = await panel.getByLabel("Share link", { exact: true }).inputValue();
    expect(link).toMatch(new RegExp(`^${server.url}/s/tls_[\\w-]{43}$`));
    await panel.getByRole("list", { name: "Share links" }).locator('[data-status="active"]').first().waitFor();

    // Someone signed out, in a fresh browser: the note and both panels, read-only.
    const visitor = await launchBrowser();
    browsers.push(visitor);
    const shared = await visitor.newPage();
    await shared.setViewportSize({ width: 1300, height: 1000 });
    const opened = await shared.goto(link);
    expect(opened?.status()).toBe(200);
    await shared.getByLabel("Shared view").waitFor();
    await shared.getByRole("heading", { name: "Adder: two seeds" }).waitFor();
    await shared.getByRole("article", { name: "note" }).getByRole("heading", { name: "Findings" }).waitFor();
    for (const metric of ["reward/mean", "loss/policy"]) {
      await shared
        .getByRole("figure", { name: `chart ${metric}` })
        .locator(".compare-line")
        .first()
        .waitFor({ state: "attached", timeout: 60_000 });
      expect(await shared.getByRole("figure", { name: `chart ${metric}` }).getAttribute("data-lines")).toBe("2");
    }
    expect(await lastStep(shared, "reward/mean")).toBe(20);
    for (const control of ["Edit", "Share", "Save"]) expect(await shared.getByRole("button", { name: control, exact: true }).count(), control).toBe(0);

    // The training run reports on: the shared panel follows it (its own steps past 20, drawn without a reload).
    await callAsWorker(server, TOKEN, "worker.report", { ...second, step: 30, metrics: metricsOf(11, 30, 0.3) });
    await expect.poll(() => lastStep(shared, "reward/mean"), { timeout: 30_000 }).toBe(30);
    await shared.screenshot({ path: path.join(SCREENSHOTS, "shared-report.png"), fullPage: true });

    // Revoked from the report's Share panel: the same address is a 404.
    await panel.getByRole("button", { name: "Revoke" }).click();
    await panel.locator('[data-status="revoked"]').waitFor();
    expect((await shared.goto(link))?.status()).toBe(404);
    await callAs(cookie, "runs.control", { id: training.runId, action: "cancel" });

    // The project's reports list it, with what it holds.
    await page.goto(`${server.url}/reports`);
    const listed = page.getByRole("list", { name: "Reports" }).getByRole("listitem").filter({ hasText: "Adder: two seeds" });
    await listed.getByText("2 panels · 1 note · 2 runs").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "reports-list.png"), fullPage: true });

    // "Save as report" from a comparison: the new report's form holds its runs and its panels' metrics.
    await page.goto(`${server.url}/compare?runs=${done.runId},${training.runId}&panels=reward/mean~step~0.6;loss/policy~step~0`);
    await page.getByRole("link", { name: "Save as report" }).click();
    await page.waitForURL(/\/reports\?new=1&/);
    await expect.poll(() => page.getByLabel("Metrics").inputValue()).toBe("reward/mean, loss/policy");
    const boxes = page.getByRole("group", { name: /Runs/ }).getByRole("checkbox");
    await expect.poll(() => boxes.evaluateAll((inputs) => inputs.filter((input) => (input as HTMLInputElement).checked).length)).toBe(2);
    await page.screenshot({ path: path.join(SCREENSHOTS, "report-from-compare.png"), fullPage: true });
  }, 300_000);
});
