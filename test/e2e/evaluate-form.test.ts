/**
 * The run page's Evaluate asks before it starts a job: a small form with the run's own episodes and temperature,
 * refusing values outside what `runs.evaluate` accepts (saying what is), and only its Start makes the evaluation run,
 * with the values given.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;

beforeAll(async () => {
  const basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
  server = await startServer({ TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await server?.stop();
});

type Run = { status: string; name: string; config: { evaluation: { episodes: number; temperature: number } } };

async function finishedRun(): Promise<{ runId: string; name: string }> {
  const { id } = await callProcedure<{ id: string }>(server, "experiments.create", tinyExperiment("to-evaluate", 5));
  const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
  const deadline = Date.now() + 180_000;
  for (;;) {
    const run = await callProcedure<Run>(server, "runs.byId", { id: runId }, "GET");
    if (run.status === "completed") return { runId, name: run.name };
    if (run.status === "failed" || Date.now() > deadline) throw new Error(`run ${runId} is ${run.status}:\n${server.output().slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

const runCount = async () => (await callProcedure<{ items: unknown[] }>(server, "runs.list", {}, "GET")).items.length;

describe("Evaluate on the run page", () => {
  it("asks for episodes and temperature, with the run's values and the limits, before it starts", async () => {
    const { runId, name } = await finishedRun();
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`${server.url}/runs/${runId}`);
      const checkpoints = page.getByRole("list", { name: "Checkpoints" });
      await checkpoints.getByRole("button", { name: "Evaluate" }).first().click();

      const form = page.getByRole("form", { name: "Evaluate step 5" });
      const episodes = form.getByLabel("Episodes");
      const temperature = form.getByLabel("Temperature");
      // The run's own settings (tinyExperiment: 8 episodes, greedy), and nothing started yet.
      expect(await episodes.inputValue()).toBe("8");
      expect(await temperature.inputValue()).toBe("0");
      expect(await form.innerText()).toContain("1 – 10,000");
      expect(await runCount()).toBe(1);

      await episodes.fill("20000");
      await form.getByText("20000 is not a whole number from 1 to 10,000").waitFor();
      expect(await form.getByRole("button", { name: "Start evaluation" }).isDisabled()).toBe(true);
      await temperature.fill("9");
      await form.getByText("9 is not a number from 0 to 5").waitFor();
      await page.screenshot({ path: path.join(SCREENSHOTS, "evaluate-form-refused.png"), fullPage: true });

      await episodes.fill("3");
      await temperature.fill("0.5");
      await page.screenshot({ path: path.join(SCREENSHOTS, "evaluate-form.png"), fullPage: true });
      expect(await runCount()).toBe(1);
      await form.getByRole("button", { name: "Start evaluation" }).click();
      await page.waitForURL((url) => url.pathname.startsWith("/runs/") && !url.pathname.endsWith(runId));
      const evaluation = await callProcedure<Run>(server, "runs.byId", { id: new URL(page.url()).pathname.split("/").at(-1)! }, "GET");
      expect(evaluation.name).toBe(`${name}-eval-step5`);
      expect(evaluation.config.evaluation).toMatchObject({ episodes: 3, temperature: 0.5 });
    } finally {
      await browser.close();
    }
  }, 360_000);
});
