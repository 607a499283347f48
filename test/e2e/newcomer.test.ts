/**
 * A newcomer's first run, in Chromium: start "your own environment" from the single-turn starter, write their own
 * task into it (odd or even), pick the generalist base in the base picker, launch with the starter's defaults (SFT
 * steps on the demonstrator, then RL), and see the held-out score rise.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callProcedure, launchBrowser, ROOT, startServer, tempDir, type TestServer } from "./support/server";

const SCREENSHOTS = path.join(ROOT, "test-results", "screenshots");
let server: TestServer;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  server = await startServer({ TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("a newcomer's own environment", () => {
  it("is written from a starter, trained from the generalist base, and its reward rises", async () => {
    await page.goto(server.url);
    await page.getByRole("button", { name: "New experiment" }).click();
    const form = page.getByRole("form", { name: "New experiment" });
    await form.getByLabel("Name").fill("my-first-env");
    await form.getByLabel("Start from").selectOption("custom:single-turn");
    await form.getByRole("button", { name: "Create experiment" }).click();
    await page.waitForURL(/\/experiments\/exp_[a-z0-9]+$/);
    await page.getByRole("link", { name: "Edit" }).click();
    await page.getByRole("tab", { name: "environment.ts" }).waitFor();

    // The user's own task, typed over the starter: odd or even, which nothing in the base's corpus taught it.
    const source = [
      'import { defineEnvironment } from "tinkerlab";',
      "type State = { n: number; said: string | null };",
      'const parity = (n: number) => (n % 2 === 1 ? "odd" : "even");',
      "export default defineEnvironment<State, string>({",
      '  name: "odd-or-even",',
      '  data: { kind: "free" },',
      '  systemPrompt: "Odd or even?",',
      "  maxTurns: 1,",
      "  invalidAction: { penalty: 0, endEpisode: true },",
      "  reset({ rng }) {",
      "    const n = Math.floor(rng.uniform() * 100);",
      "    return { state: { n, said: null }, observation: String(n) };",
      "  },",
      '  actions: ["odd", "even"],',
      '  parseAction: (text) => (text === "odd" || text === "even" ? { ok: true, action: text } : { ok: false, error: "odd or even" }),',
      "  step: (state, said) => ({ state: { ...state, said }, reward: said === parity(state.n) ? 1 : 0, done: true }),",
      "  demonstrate: (state) => parity(state.n),",
      "  score: ({ state }) => (state.said === parity(state.n) ? 1 : 0),",
      '  scoreName: "accuracy",',
      "});",
      "",
    ].join("\n");
    await page.locator(".cm-content").click();
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText(source);
    const status = page.getByTestId("validation-status");
    await status.getByText("No problems").waitFor({ timeout: 90_000 });

    // The base picker lists the generalist base with its size and context; a short run.
    await page.getByRole("tab", { name: "Config" }).click();
    const config = page.getByRole("form", { name: "Config form" });
    const picker = config.locator('[data-field="agent.base"] select');
    await picker.selectOption("generalist-base");
    await config
      .getByTestId("base-origin")
      .getByText(/generic skills/)
      .waitFor();
    expect(await picker.locator("option:checked").innerText()).toMatch(/generalist-base · [\d.]+K params · context 256/);
    await config.locator('[data-field="algorithm.steps"] input').fill("15");
    await page.screenshot({ path: path.join(SCREENSHOTS, "newcomer-config.png"), fullPage: true });
    await page.getByRole("button", { name: "Save & launch" }).click();
    await page.waitForURL(/\/runs\/run_[a-z0-9]+$/, { timeout: 60_000 });
    const runId = page.url().split("/").at(-1)!;

    // The run page shows where its base came from, then the run completes.
    await page.getByLabel("Base").getByText("generalist-base").waitFor();
    await page.getByText("completed").first().waitFor({ timeout: 360_000 });
    await page.screenshot({ path: path.join(SCREENSHOTS, "newcomer-run.png"), fullPage: true });
    const { points } = await callProcedure<{ points: { name: string; step: number; value: number }[] }>(server, "runs.metrics", { runId }, "GET");
    const series = (name: string) =>
      points
        .filter((p) => p.name === name)
        .sort((a, b) => a.step - b.step)
        .map((p) => p.value);
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    // The starter's defaults: 40 SFT steps on the demonstrator (the loss falls), then the 15 RL steps.
    const loss = series("loss/sft");
    expect(loss).toHaveLength(40);
    expect(mean(loss.slice(-5))).toBeLessThan(mean(loss.slice(0, 5)) / 2);
    const reward = series("reward/mean");
    expect(points.filter((p) => p.name === "reward/mean").map((p) => p.step)).toContain(55);
    expect(reward).toHaveLength(15);
    const score = series("eval/score");
    console.log(
      `held-out accuracy ${score.map((s) => s.toFixed(2)).join(" → ")}; RL reward first 5 ${mean(reward.slice(0, 5)).toFixed(3)}, last 5 ${mean(reward.slice(-5)).toFixed(3)}`,
    );
    expect(score.at(-1)!).toBeGreaterThan(score[0]! + 0.3);
    expect(mean(reward.slice(-5))).toBeGreaterThan(0.8);
    // The legal actions kept every sampled answer valid.
    const invalid = points.filter((p) => p.name === "episode/invalid_actions").map((p) => p.value);
    expect(Math.max(...invalid)).toBe(0);
  }, 540_000);
});
