/**
 * The trajectory viewer in a real browser: a run whose worker (this test, through the real worker API) reported
 * three steps of rollouts, one prompt recurring in each; then filtering and sorting by reward, moving with the
 * keyboard, stepping between steps, per-turn reward/return/advantage, tokens coloured by advantage, the same prompt
 * across steps, and a JSONL export that downloads.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { specialTokens } from "@/lib/model/tokenizer";
import { callAsWorker, claimJobAsWorker, launchBrowser, SCREENSHOTS, startServerWithRunForTestWorker, tempDir, type TestServer } from "./support/server";

const TOKEN = "trajectory-viewer-worker-token-0123456789";
let server: TestServer;
let browser: BrowserContext;
let page: Page;
let runId: string;

const asWorker = <T>(procedure: string, input: unknown) => callAsWorker<T>(server, TOKEN, procedure, input);

const bytes = (text: string) => Array.from(new TextEncoder().encode(text));

/**
 * Step `step`'s rollouts: two groups of four. Group 0 always asks "What is 2+3?"; its sample 3 takes two turns
 * (rewards 0 and 1). Rewards differ by sample and step, so filters and sorts have something to do.
 */
function rolloutsOf(step: number) {
  return [0, 1].flatMap((g) =>
    [0, 1, 2, 3].map((i) => {
      const task = g === 0 ? "What is 2+3?" : `What is ${step}+${i}?`;
      const turns =
        g === 0 && i === 3
          ? [
              { observation: task, action: "4", reward: 0 },
              { observation: "No. Again?", action: "5", reward: 1 },
            ]
          : [{ observation: task, action: String(i + step), reward: (i + g) * 0.25 + step * 0.1 }];
      const totalReward = turns.reduce((sum, t) => sum + t.reward, 0);
      const tokens = turns.flatMap((t) => [...bytes(t.action), specialTokens.endOfTurn]);
      return {
        step,
        split: "train" as const,
        groupIndex: g,
        sampleIndex: i,
        prompt: "Answer with a number.",
        turns,
        rewards: { correct: totalReward },
        totalReward,
        advantage: Number((totalReward - 0.5).toFixed(3)),
        tokens,
        tokenLogprobs: tokens.map((_, k) => -0.1 * (k + 1)),
      };
    }),
  );
}

beforeAll(async () => {
  ({ server, runId } = await startServerWithRunForTestWorker(TOKEN, "viewer", { name: "reinforce", steps: 10, groupSize: 4, groupsPerStep: 2, discount: 0.5 }));
  const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
  for (const step of [1, 2, 3]) {
    await asWorker("worker.report", { workerId, jobId, step, metrics: [{ step, name: "reward/mean", value: step / 3 }], rollouts: rolloutsOf(step) });
  }
  // The run has ended, so the page does not wait on a worker that would otherwise lose its lease.
  await asWorker("worker.finish", { workerId, jobId, outcome: "completed", reason: null });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const shown = () => page.getByLabel("Samples shown").textContent();
const rewards = async () => (await page.locator('[aria-label="Samples"] tbody tr td:nth-child(4)').allTextContents()).map(Number);
const selectedRow = () => page.locator('[aria-label="Samples"] tr[aria-selected="true"]').getAttribute("data-sample");

describe("the trajectory viewer", () => {
  it("filters and sorts a step's samples by reward", async () => {
    await page.goto(`${server.url}/runs/${runId}`);
    await page.getByText("Rollouts · train · step 3").waitFor({ timeout: 60_000 });
    await expect.poll(shown, { timeout: 30_000 }).toBe("8 of 8 samples");
    // Typing before hydration is lost: type until the list reacts.
    await expect
      .poll(async () => (await page.getByLabel("Minimum reward").fill("0.8"), shown()), { timeout: 30_000, interval: 500 })
      .not.toBe("8 of 8 samples");
    const kept = await rewards();
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(8);
    expect(kept.every((r) => r >= 0.8)).toBe(true);
    expect(await shown()).toBe(`${kept.length} of 8 samples`);
    await page.getByLabel("Maximum reward").fill("0.9");
    expect((await rewards()).every((r) => r >= 0.8 && r <= 0.9)).toBe(true);
    await page.getByLabel("Minimum reward").fill("");
    await page.getByLabel("Maximum reward").fill("");
    await page.getByLabel("Sort by").selectOption("reward-desc");
    const sorted = await rewards();
    expect(sorted).toHaveLength(8);
    expect(sorted).toEqual([...sorted].sort((a, b) => b - a));
    expect(sorted[0]).toBeGreaterThan(sorted[7]!);
  }, 120_000);

  it("moves between samples and steps with the keyboard, as the page says", async () => {
    expect(await page.getByLabel("Keyboard shortcuts").textContent()).toContain("j/k");
    await page.getByLabel("Sort by").selectOption("sample");
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.keyboard.press("j");
    await expect.poll(selectedRow).toBe("0/0");
    await page.keyboard.press("j");
    await page.keyboard.press("j");
    await expect.poll(selectedRow).toBe("0/2");
    await page.keyboard.press("k");
    await expect.poll(selectedRow).toBe("0/1");
    await expect.poll(() => page.getByLabel("Sample", { exact: true }).textContent()).toContain("group 0 · sample 1");
    // Arrow keys inside the list.
    await page.locator('[aria-label="Samples"] tr[aria-selected="true"] button').focus();
    await page.keyboard.press("ArrowDown");
    await expect.poll(selectedRow).toBe("0/2");
    // [ goes to the previous step, keeping the selection.
    await page.keyboard.press("[");
    await page.getByText("Rollouts · train · step 2").waitFor();
    await expect.poll(selectedRow).toBe("0/2");
    await page.keyboard.press("]");
    await page.getByText("Rollouts · train · step 3").waitFor();
  }, 60_000);

  it("shows each turn's reward, return and advantage, and colours tokens by advantage with values on hover", async () => {
    await page.locator('[aria-label="Samples"] tr[data-sample="0/3"]').click();
    // Rewards 0 then 1, γ = 0.5: returns 0.5 and 1. REINFORCE's advantage is return − baseline; the stored
    // first-turn advantage (0.5) puts the baseline at 0.5 − 0.5 = 0, so the advantages are 0.5 and 1.
    await expect.poll(() => page.getByLabel("turn 1 values").textContent()).toBe("r=0.00 G=0.50 A=0.50");
    expect(await page.getByLabel("turn 2 values").textContent()).toBe("r=1.00 G=1.00 A=1.00");
    const tokens = page.getByLabel("Action tokens").locator("span");
    expect(await tokens.count()).toBe(4); // "4", end, "5", end
    const logprobColour = await tokens.nth(2).evaluate((el) => getComputedStyle(el).backgroundColor);
    await page.getByRole("radio", { name: "advantage" }).click();
    await expect.poll(() => tokens.nth(2).getAttribute("data-by")).toBe("advantage");
    expect(await tokens.nth(2).evaluate((el) => getComputedStyle(el).backgroundColor)).not.toBe(logprobColour);
    await tokens.nth(2).hover();
    await expect.poll(() => page.getByLabel("Token values").textContent()).toBe("5 · id 53 · logprob -0.300 · p 0.741 · advantage 1.000 · turn 2");
    await tokens.nth(0).hover();
    await expect.poll(() => page.getByLabel("Token values").textContent()).toContain("advantage 0.500 · turn 1");
    await page.screenshot({ path: path.join(SCREENSHOTS, "trajectory-viewer.png"), fullPage: true });
  }, 60_000);

  it("follows the same prompt across steps", async () => {
    const across = page.getByRole("region", { name: "Same prompt across steps" });
    await expect.poll(() => across.locator("tbody tr").count(), { timeout: 20_000 }).toBe(3);
    expect(await across.locator("tbody tr td:first-child").allTextContents()).toEqual(["1", "2", "3"]);
    await across.getByTitle("step 1 · group 0 · sample 2").click();
    await page.getByText("Rollouts · train · step 1").waitFor();
    await expect.poll(selectedRow).toBe("0/2");
  }, 60_000);

  it("exports a step's rollouts as a JSONL download", async () => {
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Export JSONL" }).click()]);
    expect(download.suggestedFilename()).toBe(`${runId}-train-step-1.jsonl`);
    const file = path.join(tempDir("download"), "rollouts.jsonl");
    await download.saveAs(file);
    const lines = fs
      .readFileSync(file, "utf8")
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines).toHaveLength(8);
    expect(lines[0]).toMatchObject({ runId, split: "train", step: 1, groupIndex: 0, sampleIndex: 0, prompt: "Answer with a number." });
    expect(lines[3].turns.map((t: { action: string }) => t.action)).toEqual(["4", "5"]);
    const missing = await fetch(`${server.url}/runs/${runId}/rollouts.jsonl?step=99`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toContain("no train rollouts at step 99; its train rollouts span steps 1 to 3");
    const bad = await fetch(`${server.url}/runs/${runId}/rollouts.jsonl?split=test`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("use train or eval");
  }, 60_000);
});
