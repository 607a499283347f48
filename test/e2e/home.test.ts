import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, ROOT, SCREENSHOTS, startServer, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  server = await startServer({ TINKERLAB_EXAMPLES: "off" });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("the home page", () => {
  it("greets a newcomer with an empty state that says what to do", async () => {
    const response = await page.goto(server.url);
    expect(response?.status()).toBe(200);
    await expect(page.title()).resolves.toBe("Tinkerlab");
    await page.getByRole("heading", { name: "No experiments yet" }).waitFor();
    const text = await page.locator("main").innerText();
    expect(text).toContain("Create an experiment");
    expect(text).toContain("Launch a run");
    const nav = page.getByRole("navigation", { name: "Main" });
    expect(await nav.getByRole("link", { name: "Experiments" }).getAttribute("aria-current")).toBe("page");
    await page.screenshot({ path: path.join(SCREENSHOTS, "home-empty.png"), fullPage: true });
  });

  it("creates an experiment from the form, with the server's validation shown inline", async () => {
    await page.getByRole("button", { name: "New experiment" }).click();
    const form = page.getByRole("form", { name: "New experiment" });
    await form.getByRole("button", { name: "Create experiment" }).click();
    await form.getByText("give the experiment a name").waitFor();

    await form.getByLabel("Name").fill("arithmetic-grpo");
    await form.getByLabel("Description").fill("Two-digit addition with GRPO");
    await form.getByRole("button", { name: "Create experiment" }).click();
    await page.waitForURL(/\/experiments\/exp_[a-z0-9]+$/);
    await page.getByRole("heading", { name: "arithmetic-grpo" }).waitFor();
    expect(await page.locator("main").innerText()).toContain("No runs of this experiment yet.");
    await page.screenshot({ path: path.join(SCREENSHOTS, "experiment.png"), fullPage: true });

    await page.getByRole("link", { name: "Experiments" }).click();
    const list = page.getByRole("list", { name: "Experiments" });
    await list.getByText("arithmetic-grpo").waitFor();
    expect(await list.innerText()).toContain("Two-digit addition with GRPO");
    await page.screenshot({ path: path.join(SCREENSHOTS, "home.png"), fullPage: true });
  });

  it("shows a not-found page for an unknown experiment", async () => {
    const response = await page.goto(`${server.url}/experiments/exp_doesnotexist`);
    expect(response?.status()).toBe(404);
    await page.getByRole("heading", { name: "Not found" }).waitFor();
  });

  it("lists runs with a search box and an empty state", async () => {
    await page.goto(`${server.url}/runs?q=nothing-like-this`);
    await page.getByRole("heading", { name: "No runs match" }).waitFor();
    expect(await page.getByRole("searchbox").inputValue()).toBe("nothing-like-this");
  });

  it("answers GET /api/health with the database kind, the migration and the training backend", async () => {
    const response = await fetch(`${server.url}/api/health`);
    expect(response.status).toBe(200);
    const health = await response.json();
    const journal = JSON.parse(fs.readFileSync(path.join(ROOT, "drizzle/meta/_journal.json"), "utf8")) as { entries: { tag: string }[] };
    expect(health).toMatchObject({
      status: "ok",
      database: { kind: "pglite", location: server.dataDir, migration: { applied: journal.entries.length, latest: journal.entries.at(-1)!.tag } },
    });
    expect(health.training.requested).toBe("auto");
    // The local worker registers once it has started, with the backend it chose.
    for (let i = 0; i < 60 && health.training.workers.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      health.training = (await (await fetch(`${server.url}/api/health`)).json()).training;
    }
    expect(health.training.workers).toEqual([expect.objectContaining({ backend: "js" })]);
  });
});

describe("a fresh workbench", () => {
  it("lists the built-in use cases as example experiments", async () => {
    const withExamples = await startServer({ TINKERLAB_LOCAL_WORKERS: "0" });
    try {
      const examplePage = await browser.newPage();
      await examplePage.goto(withExamples.url);
      const list = examplePage.getByRole("list", { name: "Experiments" });
      for (const name of [
        "arithmetic-grpo",
        "guess-number-ppo",
        "tic-tac-toe-ppo",
        "tool-use-grpo",
        "text-world-ppo",
        "kuhn-poker-grpo",
        "split-pot-grpo",
        "tic-tac-toe-self-play-grpo",
        "kuhn-poker-duel-grpo",
      ]) {
        await list.getByText(name, { exact: true }).waitFor();
      }
      await examplePage.close();
    } finally {
      await withExamples.stop();
    }
  });
});
