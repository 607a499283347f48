/**
 * A person against the policy in the episode player's two-player tic-tac-toe, in Chromium: whole games as O and as
 * X, each to its real end (a win or a draw, said as such), the person choosing among the free cells only (the duel's
 * legal actions); and a game cut short, whose outcome names the reason: a board that outgrows the policy's context
 * before its first move.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

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

const play = (page: Page) => page.getByRole("button", { name: /^Play (an episode|again)$/ });

/** The player on the playground with tic-tac-toe's base policy, `environment` for two players, `you` set to "You". */
async function openDuel(environment: string, you: "X" | "O"): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${server.url}/playground?mode=episode&model=tic-tac-toe-base`);
  await page.getByLabel("Environment").selectOption(environment);
  await page.getByLabel("Opponent").selectOption("player");
  const other = you === "X" ? "O" : "X";
  await page.getByLabel(`Who plays ${you}`).selectOption("you");
  await page.getByLabel(`Who plays ${other}`).selectOption("policy");
  // Greedy sampling: the policy's answer to each board is always the same, so each game is too.
  await page.getByLabel("Temperature").fill("0");
  await expect.poll(() => play(page).isEnabled(), { timeout: 60_000 }).toBe(true);
  return page;
}

/**
 * Plays `you`'s side to the end of the game, each move the first of the free cells offered, and returns the outcome's
 * text. Each move waits for its turn to be recorded as played before looking for the next.
 */
async function playToTheEnd(page: Page, you: "X" | "O", screenshot: string): Promise<string> {
  const outcome = page.getByLabel("Outcome");
  const board = page.getByLabel("What you see");
  const failure = page.getByLabel("Turns").getByRole("alert");
  for (let move = 0; move < 9; move++) {
    await Promise.race([board.waitFor({ timeout: 30_000 }), outcome.waitFor({ timeout: 30_000 }), failure.waitFor({ timeout: 30_000 })]);
    if (await failure.isVisible()) throw new Error(`the episode failed: ${await failure.textContent()}`);
    if (await outcome.isVisible()) break;
    const heading = (await page.getByText(new RegExp(`· ${you} · your move`)).textContent())!;
    const number = Number(/Turn (\d+)/.exec(heading)![1]);
    // The choices are the board's free cells, as the board shows them (a free cell shows its own name).
    const choices = page.getByRole("form", { name: "Your move" }).getByRole("button");
    const free = (await board.getByRole("button", { name: /^[a-c][1-3]$/ }).allTextContents()).sort();
    expect((await choices.allTextContents()).sort()).toEqual(free);
    if (move === 1) await page.screenshot({ path: path.join(SCREENSHOTS, screenshot), fullPage: true });
    await choices.first().click();
    await page.getByText(new RegExp(`^Turn ${number} · ${you} · you`)).waitFor({ timeout: 10_000 });
  }
  await outcome.waitFor({ timeout: 30_000 });
  return (await outcome.textContent())!;
}

describe("a two-player game in the episode player", () => {
  it.each(["O", "X"] as const)(
    "plays a whole game as %s against the policy, to a win or a draw",
    async (you) => {
      const page = await openDuel("tic-tac-toe", you);
      await play(page).click();
      const text = await playToTheEnd(page, you, `episode-player-duel-as-${you}.png`);
      await page.screenshot({ path: path.join(SCREENSHOTS, `episode-player-duel-as-${you}-over.png`), fullPage: true });
      expect(text).toMatch(/ · (X won|O won|a draw) · /);
      expect(text).not.toMatch(/cut short/);
      // A tic-tac-toe game needs five moves at least to be won.
      expect(Number(/^(\d+) turns/.exec(text)?.[1])).toBeGreaterThanOrEqual(5);
      expect(await page.getByText(new RegExp(`^Turn \\d+ · ${you} · you`)).count()).toBeGreaterThanOrEqual(2);
      // X's turns and O's are told apart by colour (the first item is the start).
      const border = (i: number) =>
        page
          .getByLabel("Turns")
          .locator("> li")
          .nth(i)
          .evaluate((li) => getComputedStyle(li).borderLeftColor);
      expect(await border(1)).toBe(await border(3));
      expect(await border(1)).not.toBe(await border(2));
      // The winning step pays both players: the last turn shows each one's reward.
      const items = page.getByLabel("Turns").locator("> li");
      const lastTurn = items.nth((await items.count()) - 2);
      if (!text.includes("a draw")) expect(await lastTurn.textContent()).toMatch(/rewards X -?1 · O -?1/);
      await page.close();
    },
    180_000,
  );

  it("says a game was cut short because the board outgrew the policy's context", async () => {
    // tic-tac-toe's base reads 64 tokens; a 6×6 gomoku board alone is longer.
    const page = await openDuel("gomoku", "O");
    await play(page).click();
    const outcome = page.getByLabel("Outcome");
    await outcome.waitFor({ timeout: 30_000 });
    expect(await outcome.textContent()).toMatch(/^0 turns · cut short: the conversation outgrew the policy's context \(64 tokens\) · /);
    await page.close();
  }, 120_000);
});
