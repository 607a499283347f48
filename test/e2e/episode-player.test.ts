/**
 * The playground's episode player in Chromium: the policy plays a built-in game in the page; a person takes the
 * second side of a two-player game against it; and an experiment's own environment runs in QuickJS in a worker of
 * the page, with its legal actions holding the policy's tokens and its CPU limit stopping a runaway step.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
let context: BrowserContext;

beforeAll(async () => {
  server = await startServer({ ARTIFACTS_DIR: tempDir("artifacts") });
  context = await launchBrowser();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 180_000);
afterAll(async () => {
  await context?.close();
  await server?.stop();
});

async function openPlayer(query: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${server.url}/playground?mode=episode&${query}`);
  return page;
}

const play = (page: Page) => page.getByRole("button", { name: /^Play (an episode|again)$/ });

describe("the episode player", () => {
  it("plays a built-in game with the policy in the page, turn by turn, to its outcome", async () => {
    const page = await openPlayer("model=tic-tac-toe-base");
    await page.getByLabel("Environment").selectOption("tic-tac-toe");
    await expect.poll(() => play(page).isEnabled(), { timeout: 60_000 }).toBe(true);
    await play(page).click();
    const outcome = page.getByLabel("Outcome");
    await outcome.waitFor({ timeout: 60_000 });
    const turns = page.getByLabel("Turns").locator("> li");
    // the start, at least the three moves of X's fastest win, and the outcome
    expect(await turns.count()).toBeGreaterThanOrEqual(5);
    expect(await page.getByText(/Turn 1 · agent · the policy/).count()).toBe(1);
    expect(await outcome.textContent()).toMatch(/turns? · return -?\d/);
    expect(await page.getByText(/won [01] · lost [01] · draw [01]/).count()).toBe(1);
    await page.close();
  }, 120_000);

  it("lets a person take O against the policy in a two-player game", async () => {
    const page = await openPlayer("model=tic-tac-toe-base");
    await page.getByLabel("Environment").selectOption("tic-tac-toe");
    await page.getByLabel("Opponent").selectOption("player");
    await expect(page.getByLabel("Who plays O").inputValue()).resolves.toBe("you");
    await expect(page.getByLabel("Who plays X").inputValue()).resolves.toBe("policy");
    await expect.poll(() => play(page).isEnabled(), { timeout: 60_000 }).toBe(true);
    await play(page).click();
    const outcome = page.getByLabel("Outcome");
    for (let move = 0; move < 5 && !(await outcome.isVisible()); move++) {
      // X (the policy) moves, then it is O's turn: take the first free cell offered (the duel's legal actions).
      // Wait for X's move of this round first: until it lands, the board on the page is the one O just played on.
      const xMoved = page.getByText(new RegExp(`Turn ${2 * move + 1} · X · the policy`));
      await Promise.race([xMoved.waitFor({ timeout: 30_000 }), outcome.waitFor({ timeout: 30_000 })]);
      if (await outcome.isVisible()) break;
      const board = page.getByLabel("What you see");
      await Promise.race([board.waitFor({ timeout: 30_000 }), outcome.waitFor({ timeout: 30_000 })]);
      if (await outcome.isVisible()) break;
      const choice = page.getByRole("form", { name: "Your move" }).getByRole("button").first();
      // A taken cell is never offered: the first choice is one the board shows free.
      const cell = (await choice.textContent())!;
      await expect(board.getByRole("button", { name: cell, exact: true }).count()).resolves.toBe(1);
      if (move === 0) await page.screenshot({ path: path.join(SCREENSHOTS, "episode-player-duel.png"), fullPage: true });
      await choice.click();
      await page.getByText(new RegExp(`Turn ${2 * move + 2} · O · you`)).waitFor({ timeout: 10_000 });
    }
    await outcome.waitFor({ timeout: 30_000 });
    expect(await outcome.textContent()).toMatch(/returns: X -?\d+, O -?\d+/);
    await page.close();
  }, 180_000);

  it("runs a run's own environment in QuickJS in the page: legal actions hold the policy, a runaway step is stopped", async () => {
    const source = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number; seed: number }, string>({
  name: "up-or-spin",
  data: { kind: "free" },
  systemPrompt: "Say up.",
  maxTurns: 4,
  actions: ["up", "spin"],
  reset: ({ seed }) => ({ state: { n: 0, seed }, observation: "at 0" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step(state, action) {
    // Only the seed this test plays runs away: validation's dry run (seeds 0 to 2) would stop it, and the launch be refused.
    if (action === "spin" && state.n > 0 && state.seed === 7) for (;;) {}
    if (action === "spin") return { state, observation: "at 0", reward: 0, done: false };
    return { state: { n: state.n + 1, seed: state.seed }, observation: "at " + (state.n + 1), reward: 1, done: state.n + 1 >= 4 };
  },
  render: (state) => "height " + state.n,
});
`;
    const call = <T>(procedure: string, input: unknown) => callProcedure<T>(server, procedure, input);
    const { id } = await call<{ id: string }>("experiments.create", {
      name: "up-or-spin",
      files: { "environment.ts": source },
      config: {
        name: "up-or-spin",
        environment: "custom",
        protocol: { name: "multi-turn" },
        agent: { base: "tic-tac-toe-base", sampling: { maxTokens: 6 } },
        algorithm: { name: "grpo", steps: 1, groupSize: 2, groupsPerStep: 1 },
      },
    });
    const { runId } = await call<{ runId: string }>("runs.launch", { experimentId: id });

    // The policy's first turn: under the legal actions it can only write one of them.
    const page = await openPlayer(`run=${runId}&model=tic-tac-toe-base`);
    await page.getByText(/up-or-spin of run .* \(its own code, sandboxed in this page\)/).waitFor({ timeout: 60_000 });
    await expect.poll(() => play(page).isEnabled(), { timeout: 60_000 }).toBe(true);
    await page.getByLabel("Episode seed").fill("7");
    await play(page).click();
    const firstTurn = page.getByLabel("Turns").locator("> li").nth(1);
    await firstTurn.getByText("Turn 1 · agent · the policy").waitFor({ timeout: 30_000 });
    // An unconstrained tic-tac-toe base writes a cell ("b2"), which the environment would answer as invalid.
    expect(await firstTurn.textContent()).not.toContain("Invalid");
    expect(await firstTurn.getByLabel("After turn 1").textContent()).toMatch(/^height [01]$/);
    // The policy plays on: to the end, or until a "spin" past the start is stopped.
    await Promise.race([page.getByLabel("Outcome").waitFor({ timeout: 60_000 }), page.getByLabel("Turns").getByRole("alert").waitFor({ timeout: 60_000 })]);

    // The person plays: the legal actions are buttons; "up" is stepped in the sandbox, "spin" never returns.
    await page.getByLabel("Who plays agent").selectOption("you");
    await play(page).click();
    await page.getByRole("button", { name: "up", exact: true }).click();
    await page.getByLabel("After turn 1").getByText("height 1").waitFor({ timeout: 10_000 });
    await page.getByRole("button", { name: "spin", exact: true }).click();
    const failure = page.getByLabel("Turns").getByRole("alert");
    await failure.waitFor({ timeout: 20_000 });
    expect(await failure.textContent()).toMatch(/step 2 of the episode \(seed 7\) ran past its CPU budget \(cpuMsPerCall, 200 ms\) and was stopped/);
    await page.screenshot({ path: path.join(SCREENSHOTS, "episode-player-sandbox.png"), fullPage: true });
    await page.close();
  }, 180_000);
});
