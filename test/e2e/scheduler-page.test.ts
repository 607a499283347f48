/**
 * The scheduler page in Chromium: the device and the run on it, and the queue behind it with estimated starts
 * that follow the queue's order (the policy run forward from the running job's measured pace).
 */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
const basesDir = tempDir("bases");

beforeAll(async () => {
  await saveTinyBase(basesDir);
  server = await startServer({
    TINKERLAB_BASES_DIR: basesDir,
    TINKERLAB_EXAMPLES: "off",
    ARTIFACTS_DIR: tempDir("artifacts"),
    TINKERLAB_LOCAL_WORKERS: "1",
    TINKERLAB_WORKER_SLOTS: "1",
  });
});
afterAll(() => server?.stop());

async function launch(name: string, steps: number) {
  const { id } = await callProcedure<{ id: string }>(server, "experiments.create", tinyExperiment(name, steps));
  return (await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id })).runId;
}

describe("scheduler page", () => {
  it("shows the running job on its device and the queue's estimated starts, in order", async () => {
    const running = await launch("running", 2000);
    // Queued behind it on the one worker.
    await launch("next", 300);
    await launch("after", 300);
    const deadline = Date.now() + 120_000;
    while ((await callProcedure<{ step: number }>(server, "runs.byId", { id: running }, "GET")).step < 8) {
      if (Date.now() > deadline) throw new Error(`the first run did not reach step 8:\n${server.output().slice(-3000)}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`${server.url}/scheduler`);
      const devices = page.getByRole("list", { name: "Devices" });
      await devices.getByText(/running-arithmetic/).waitFor({ timeout: 60_000 });
      const queue = page.getByRole("list", { name: "Queue" });
      await queue.getByText(/next-arithmetic/).waitFor();
      const starts = queue.getByTestId("estimated-start");
      await expect.poll(async () => (await starts.allTextContents()).every((text) => /^starts in \d+/.test(text)), { timeout: 30_000 }).toBe(true);
      const times = await queue.locator("[data-testid=estimated-start] time").evaluateAll((nodes) => nodes.map((n) => Date.parse(n.getAttribute("datetime")!)));
      expect(times).toHaveLength(2);
      // The second waits for the first: its start is later by about the first's length.
      expect(times[1]!).toBeGreaterThan(times[0]!);
      expect(times[0]!).toBeGreaterThan(Date.now());
      await page.screenshot({ path: path.join(SCREENSHOTS, "scheduler.png"), fullPage: true });
    } finally {
      await browser.close();
    }
  }, 300_000);
});
