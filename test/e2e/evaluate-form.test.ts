/**
 * The run page's Evaluate asks before it starts a job: a small form with the run's own episodes and temperature,
 * refusing values outside what `runs.evaluate` accepts (saying what is), and only its Start makes the evaluation run,
 * with the values given. Evaluations and exports belong to the run they come from: its page lists them with the
 * evaluation's score and the export's file to download.
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

/** Runs started from the run's checkpoints (its evaluations and exports). */
const derivedCount = async (runId: string) => (await callProcedure<unknown[]>(server, "derived.ofRun", { runId }, "GET")).length;

describe("Evaluate on the run page", () => {
  it("asks for episodes and temperature before it starts, then lists the evaluation and an export with score and download", async () => {
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
      expect(await derivedCount(runId)).toBe(0);

      await episodes.fill("20000");
      await form.getByText("20000 is not a whole number from 1 to 10,000").waitFor();
      expect(await form.getByRole("button", { name: "Start evaluation" }).isDisabled()).toBe(true);
      await temperature.fill("9");
      await form.getByText("9 is not a number from 0 to 5").waitFor();
      await page.screenshot({ path: path.join(SCREENSHOTS, "evaluate-form-refused.png"), fullPage: true });

      await episodes.fill("3");
      await temperature.fill("0.5");
      await page.screenshot({ path: path.join(SCREENSHOTS, "evaluate-form.png"), fullPage: true });
      expect(await derivedCount(runId)).toBe(0);
      await form.getByRole("button", { name: "Start evaluation" }).click();
      // The evaluation is listed on this page, the run it comes from, with the values given; the form closes.
      const derived = page.getByRole("list", { name: "Evaluations and exports" });
      const evaluationRow = derived.getByRole("listitem").filter({ hasText: "Evaluation" });
      await expect.poll(() => evaluationRow.count()).toBe(1);
      expect(await evaluationRow.innerText()).toContain("3 episodes, temperature 0.5");
      expect(await form.count()).toBe(0);
      expect(new URL(page.url()).pathname).toBe(`/runs/${runId}`);
      const evaluations = await callProcedure<{ id: string; name: string }[]>(server, "derived.ofRun", { runId }, "GET");
      expect(evaluations.map((run) => run.name)).toEqual([`${name}-eval-step5`]);
      const evaluation = await callProcedure<Run>(server, "runs.byId", { id: evaluations[0]!.id }, "GET");
      expect(evaluation.config.evaluation).toMatchObject({ episodes: 3, temperature: 0.5 });
      // Its score, once it has played, as its own log gives it.
      await expect.poll(() => evaluationRow.innerText(), { timeout: 180_000, interval: 1_000 }).toMatch(/completed/);
      const logs = await callProcedure<{ message: string }[]>(server, "runs.logs", { runId: evaluations[0]!.id }, "GET");
      const logged = logs.map((line) => line.message.match(/Evaluated on 3 held-out episodes \(temperature 0\.5\): .* (-?[\d.]+)\.$/)).find(Boolean);
      expect(logged).toBeTruthy();
      await expect.poll(() => evaluationRow.innerText()).toContain(`score ${logged![1]}`);

      // An export of the same checkpoint is listed too, with its file to download from here.
      await checkpoints.getByRole("button", { name: "Export" }).first().click();
      const exportRow = derived.getByRole("listitem").filter({ hasText: "Export" });
      await expect.poll(() => exportRow.count()).toBe(1);
      const download = exportRow.getByRole("link", { name: /Download safetensors/ });
      await download.waitFor({ timeout: 180_000 });
      const file = await page.request.get(new URL((await download.getAttribute("href"))!, server.url).toString());
      expect(file.status()).toBe(200);
      const bytes = await file.body();
      const headerLength = Number(bytes.readBigUInt64LE(0));
      expect(JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"))).toHaveProperty("__metadata__");
      await page.screenshot({ path: path.join(SCREENSHOTS, "run-derived.png"), fullPage: true });

      // Each opens as a run of its own.
      await evaluationRow.getByRole("link", { name: "Open" }).click();
      await page.waitForURL((url) => url.pathname === `/runs/${evaluations[0]!.id}`);
      // ...which names the run it comes from, and leads back there.
      await page.getByText("an evaluation of step 5 of").waitFor();
      await page.screenshot({ path: path.join(SCREENSHOTS, "run-derived-source.png") });
      await page.getByRole("link", { name, exact: true }).click();
      await page.waitForURL((url) => url.pathname === `/runs/${runId}`);
    } finally {
      await browser.close();
    }
  }, 600_000);
});
