/**
 * Serving on the real workbench (`tinkerlab start` and its local worker): a checkpoint's "Serve" on the Models page
 * shows the endpoint, the model name and copyable examples; `tinkerlab serve` starts its serving job and prints the
 * same; the `openai` client's completion of the checkpoint answers; and the scheduler page shows the inference job.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@/lib/client";
import { launchBrowser, ROOT, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;
let checkpointId: string;
let runId: string;

beforeAll(async () => {
  server = await startServer({ ARTIFACTS_DIR: tempDir("artifacts"), TINKERLAB_EXAMPLES: "off" });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  // A LoRA checkpoint on a shipped base, saved by a remote session on the server's worker.
  const tl = createClient({ url: server.url });
  const session = await tl.training.create({ base: "generalist-base", seed: 2, leaseSeconds: 60, name: "e2e-serving", lora: { rank: 4 } });
  ({ checkpointId } = (await session.saveWeightsForSampler()) as { checkpointId: string });
  runId = session.sessionId;
  await session.close();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "bin", "tinkerlab"), args, {
      env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: tempDir("home") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("serving from the workbench and the CLI", () => {
  it("shows a checkpoint's endpoint, model name and examples under Serve", async () => {
    await page.goto(`${server.url}/models`);
    const row = page.locator(`tr[data-checkpoint="${checkpointId}"]`);
    await row.getByRole("button", { name: "Serve" }).click();
    const panel = page.locator(`[data-serve-panel="${checkpointId}"]`);
    await panel.getByText(`${server.url}/v1`, { exact: true }).first().waitFor();
    await expect(panel.getByText(`${runId}:latest`).count()).resolves.toBe(1);
    const curl = await panel.getByLabel("curl example").inputValue();
    expect(curl).toContain(`${server.url}/v1/chat/completions`);
    expect(curl).toContain(`"model":"${checkpointId}"`);
    expect(await panel.getByLabel("openai npm example").inputValue()).toContain(`model: "${checkpointId}"`);
    await page.screenshot({ path: path.join(SCREENSHOTS, "serve-panel.png"), fullPage: true });
  }, 60_000);

  it("serves the checkpoint with `tinkerlab serve`, answers the openai client, and shows the job on the scheduler page", async () => {
    const served = await cli(["serve", checkpointId, "--url", server.url, "--timeout", "120"]);
    expect(served.code).toBe(0);
    expect(served.stdout).toContain(`Serving ${checkpointId} at ${server.url}/v1`);
    expect(served.stdout).toContain(`"model":"${checkpointId}"`);

    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused-on-a-local-server", maxRetries: 20 });
    // On a local server without accounts a request without a key is the local user; the client always sends one,
    // so the test calls without it as curl would.
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: checkpointId, messages: [{ role: "user", content: "2+3=" }], max_tokens: 8 }),
    });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as OpenAI.ChatCompletion;
    expect(answer.choices[0]!.message.role).toBe("assistant");
    expect(answer.usage!.completion_tokens).toBeGreaterThan(0);
    const refused = await client.chat.completions.create({ model: checkpointId, messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(401);

    await page.goto(`${server.url}/scheduler`);
    await page.getByText("inference · full").first().waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "serve-scheduler.png"), fullPage: true });

    // The serving run's page, under the project's "Serving" experiment.
    const status = (await (await fetch(`${server.url}/v1/serving`)).json()) as { data: { runId: string; base: string }[] };
    const serving = status.data.find((s) => s.base === "generalist-base")!;
    await page.goto(`${server.url}/runs/${serving.runId}`);
    await page.getByText("Serving", { exact: true }).first().waitFor();
    await page
      .getByText(/Serving generalist-base/)
      .first()
      .waitFor();
    // It says what it is, not "evaluates or exports its base".
    await page.getByText(/serves generalist-base and adapters on it at \/v1/).waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "serve-run.png"), fullPage: true });
  }, 180_000);
});
