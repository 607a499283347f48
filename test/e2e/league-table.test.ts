/**
 * The run page of a league run, in Chromium: a self-play run of tic-tac-toe against its frozen snapshots, trained
 * by the server's own worker, shows its league: every snapshot with its Elo (the initial one pinned at 1000) and
 * interval, its record, and the learner's score against it in each training period, the newest being "now"; the
 * snapshot dropped past the league's cap is marked so.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;

beforeAll(async () => {
  server = await startServer({ ARTIFACTS_DIR: tempDir("artifacts"), TINKERLAB_EXAMPLES: "off" });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 180_000);
afterAll(async () => {
  await server?.stop();
});

describe("a league run's page", () => {
  it("shows the league's snapshots with their Elo, record and the learner's scores by period", async () => {
    const name = "league-table";
    const config = {
      name,
      environment: "tic-tac-toe-self-play",
      agent: { base: "tic-tac-toe-base", training: { mode: "lora", rank: 4, alpha: 8 }, sampling: { temperature: 1, maxTokens: 3 } },
      protocol: { name: "turn-based", agents: ["X", "O"], history: "last" },
      algorithm: { name: "grpo", steps: 6, groupSize: 4, groupsPerStep: 2, league: { every: 2, maxMembers: 3, mix: { latest: 1, uniform: 1, pfsp: 1 } } },
      evaluation: { every: 0, episodes: 4 },
      checkpointEvery: 3,
    };
    const { id } = await callProcedure<{ id: string }>(server, "experiments.create", { name, config });
    const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.setViewportSize({ width: 1400, height: 900 });
      await page.goto(`${server.url}/runs/${runId}`);
      await page.getByText("completed", { exact: true }).waitFor({ timeout: 300_000 });
      const league = page.getByRole("region", { name: "League" });
      // The table follows the run's newest checkpoint: the one of its last step once it has ended.
      await league.getByText("as of the checkpoint of step 6").waitFor({ timeout: 30_000 });
      const table = league.getByRole("table", { name: "League members" });
      const rows = table.locator("tbody tr");
      // Newest first: the snapshots of steps 6, 4 and 2, and the initial policy.
      expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-member")))).toEqual(["step-6", "step-4", "step-2", "step-0"]);
      const initial = table.locator('tr[data-member="step-0"] td');
      // Past the cap of 3 snapshots, the oldest was dropped when step 6's was taken: it is listed, still rated.
      expect(await initial.nth(0).textContent()).toBe("initialdropped");
      await league.getByText("3 snapshots (1 dropped)").waitFor();
      expect(await initial.nth(2).textContent()).toBe("1000");
      expect(await initial.nth(3).textContent()).toMatch(/^1000 – 1000/);
      // Three training periods (→2, →4, →6), the last the current policy's; in it the learner played the earlier
      // snapshots (2 steps × 8 games), each score a number between 0 and 1.
      expect(await table.locator("thead tr").nth(1).locator("th").allTextContents()).toEqual(["", "→2", "→4", "now (→6)"]);
      const now = await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelectorAll("td")[7]?.textContent ?? ""));
      const scores = now.filter((text) => text !== "·").map(Number);
      expect(scores.length).toBeGreaterThan(0);
      for (const score of scores) expect(score >= 0 && score <= 1).toBe(true);
      expect(now[0]).toBe("·"); // the learner never plays itself
      await league.getByRole("figure", { name: "chart league Elo by snapshot" }).waitFor();
      await league.getByRole("figure", { name: "chart league/win_rate/all" }).waitFor();
      await page.screenshot({ path: path.join(SCREENSHOTS, "league-table.png"), fullPage: true });
      await league.screenshot({ path: path.join(SCREENSHOTS, "league-table-panel.png") });
    } finally {
      await browser.close();
    }
  }, 480_000);
});
