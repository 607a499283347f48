/**
 * The trajectory viewer on episodes played by two agents, in Chromium: a worker (this test, through the real worker
 * API) reports a step whose samples are games of X against O; the viewer shows each agent's return, every turn as
 * its acting agent's (its name, its colour, what it saw, its reward and own return), and a one-agent sample as
 * before.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { specialTokens } from "@/lib/model/tokenizer";
import { callAsWorker, claimJobAsWorker, launchBrowser, SCREENSHOTS, startServerWithRunForTestWorker, type TestServer } from "./support/server";

const TOKEN = "trajectory-viewer-agents-worker-token-0123";
let server: TestServer;
let browser: BrowserContext;
let page: Page;
let runId: string;

const bytes = (text: string) => Array.from(new TextEncoder().encode(text));

/**
 * Sample 0: X wins in five moves (the last step pays X +1 and O −1). Sample 1: X's third move is invalid (X −1, O
 * nothing). Sample 2: a one-agent episode, stored as before multi-agent runs (no agent on its turns).
 */
function rollouts() {
  const game = (moves: [string, string, string][], last: Record<string, number>) =>
    moves.map(([agent, observation, action], t) => ({
      agent,
      observation,
      action,
      reward: t === moves.length - 1 ? (last[agent] ?? 0) : 0,
      ...(t === moves.length - 1 ? { rewards: last } : {}),
      render: `after ${action}`,
    }));
  const samples = [
    game(
      [
        ["X", "X to move: a1 b1 c1", "a1"],
        ["O", "O to move: X b1 c1", "b2"],
        ["X", "X to move: X b1 c1 / a2 O c2", "a2"],
        ["O", "O to move: X b1 c1 / X O c2", "c1"],
        ["X", "X to move: X b1 O / X O c2 / a3", "a3"],
      ],
      { X: 1, O: -1 },
    ),
    game(
      [
        ["X", "X to move: a1 b1 c1", "b2"],
        ["O", "O to move: a1 b1 c1 / a2 X", "a1"],
        ["X", "X to move: O b1 c1 / a2 X", "a1"],
      ],
      { X: -1 },
    ),
    [{ observation: "What is 2+3?", action: "5", reward: 1 }],
  ];
  return samples.map((turns, i) => {
    const totalReward = turns.reduce((sum, t) => sum + t.reward, 0);
    const tokens = turns.flatMap((t) => [...bytes(t.action), specialTokens.endOfTurn]);
    return {
      step: 1,
      split: "train" as const,
      groupIndex: 0,
      sampleIndex: i,
      prompt: i < 2 ? "Three in a row." : "Answer with a number.",
      turns,
      rewards: { env: totalReward },
      totalReward,
      advantage: 0,
      tokens,
      tokenLogprobs: tokens.map(() => -0.1),
    };
  });
}

beforeAll(async () => {
  ({ server, runId } = await startServerWithRunForTestWorker(TOKEN, "duel-viewer", { name: "grpo", steps: 10, groupSize: 3, groupsPerStep: 1 }));
  const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
  await callAsWorker(server, TOKEN, "worker.report", { workerId, jobId, step: 1, metrics: [{ step: 1, name: "reward/mean", value: 0 }], rollouts: rollouts() });
  await callAsWorker(server, TOKEN, "worker.finish", { workerId, jobId, outcome: "completed", reason: null });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const sample = () => page.getByLabel("Sample", { exact: true });

describe("the trajectory viewer on a two-agent episode", () => {
  it("shows each agent's return, and each turn as its agent's, in its colour, with its own reward and return", async () => {
    await page.goto(`${server.url}/runs/${runId}?sample=0/0`);
    const returns = page.getByRole("list", { name: "Each agent's return" });
    await returns.waitFor({ timeout: 60_000 });
    expect(await returns.getByRole("listitem").allTextContents()).toEqual(["X 1.000", "O -1.000"]);
    const turns = sample().getByRole("list", { name: "Turns", exact: true }).getByRole("listitem");
    expect(await turns.count()).toBe(5);
    // Turns alternate X and O, each showing what its agent saw and played.
    for (const [t, agent] of ["X", "O", "X", "O", "X"].entries()) {
      const turn = sample().getByRole("listitem", { name: `turn ${t + 1} by ${agent}`, exact: true });
      expect(await turn.textContent()).toContain(`${agent} to move:`);
    }
    // X and O are told apart by colour: the left borders of their turns differ.
    const border = (name: string) =>
      sample()
        .getByRole("listitem", { name, exact: true })
        .evaluate((li) => getComputedStyle(li).borderLeftColor);
    expect(await border("turn 1 by X")).toBe(await border("turn 3 by X"));
    expect(await border("turn 1 by X")).not.toBe(await border("turn 2 by O"));
    // The last step's rewards, to each agent; the acting agent's own return: O's 2nd move (turn 4) returns O's −1.
    expect(await sample().getByLabel("turn 5 rewards by agent").textContent()).toBe("rewards: X +1.00 · O -1.00");
    expect(await sample().getByLabel("turn 4 values").textContent()).toMatch(/^r=0\.00 G=-1\.00 /);
    expect(await sample().getByLabel("turn 5 values").textContent()).toMatch(/^r=1\.00 G=1\.00 /);
    await page.screenshot({ path: path.join(SCREENSHOTS, "trajectory-viewer-agents.png"), fullPage: true });
  }, 120_000);

  it("counts an invalid move against the agent that made it, and shows a one-agent sample as before", async () => {
    await page.locator('[aria-label="Samples"] tr[data-sample="0/1"]').click();
    await expect.poll(() => page.getByRole("list", { name: "Each agent's return" }).getByRole("listitem").allTextContents()).toEqual(["X -1.000", "O 0.000"]);
    await page.locator('[aria-label="Samples"] tr[data-sample="0/2"]').click();
    await expect.poll(() => sample().textContent()).toContain("What is 2+3?");
    expect(await page.getByRole("list", { name: "Each agent's return" }).count()).toBe(0);
    expect(await sample().getByRole("list", { name: "Turns", exact: true }).getByRole("listitem").first().getAttribute("aria-label")).toBeNull();
  }, 60_000);
});
