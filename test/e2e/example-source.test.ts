/**
 * "Open the example's source": from the editor of a built-in example, an editable copy of that example's own
 * environment (lib/envs/arithmetic.ts, not the unrelated starter), which validates as the experiment's custom
 * environment, keeps an edit, and launches.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { callProcedure, launchBrowser, ROOT, SCREENSHOTS, startServer, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;
beforeAll(async () => {
  // The built-in examples on; no worker, so the launched run waits in the queue.
  server = await startServer({ TINKERLAB_EXAMPLES: "on", TINKERLAB_LOCAL_WORKERS: "0" });
  browser = await launchBrowser();
  page = await browser.newPage();
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const call = <T>(procedure: string, input: unknown) => callProcedure<T>(server, procedure, input, "GET");

it("opens the arithmetic example's own environment, edits it, validates and launches the copy", async () => {
  const experiments = await call<{ id: string; name: string }[]>("experiments.list", { limit: 200 });
  const example = experiments.find((e) => e.name === "arithmetic-grpo");
  expect(example, `the examples: ${experiments.map((e) => e.name).join(", ")}`).toBeDefined();

  await page.goto(`${server.url}/experiments/${example!.id}/edit`);
  await page.getByRole("heading", { name: "Edit arithmetic-grpo" }).waitFor();
  await page.getByRole("button", { name: "Open the example's source" }).click();

  // The example's real source, with a default export naming its environment; the config now runs it as custom.
  await page.getByRole("tab", { name: "environment.ts" }).waitFor();
  const original = fs.readFileSync(path.join(ROOT, "lib/envs/arithmetic.ts"), "utf8");
  const editor = page.locator(".cm-content");
  await expect.poll(() => editor.innerText()).toContain("Add two two-digit numbers. Reward 1 for the exact sum, 0 otherwise.");
  expect(await editor.innerText()).toContain("export default arithmetic;");
  expect(await editor.innerText()).toContain('import { defineEnvironment } from "tinkerlab";');
  expect(original).toContain("const correct = answer === state.a + state.b;");

  const status = page.getByTestId("validation-status");
  await status.getByText("No problems").waitFor({ timeout: 90_000 });
  // The dry run plays the copied environment itself (its name is the example's).
  await page.getByRole("group", { name: "Dry run" }).getByText("arithmetic").first().waitFor({ timeout: 90_000 });

  // An edit: the score's name. (A short line: End then goes to its end, where a wrapped one would not.)
  await page.locator(".cm-line", { hasText: 'scoreName: "accuracy",' }).first().click();
  await page.keyboard.press("End");
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("ArrowLeft");
  for (let i = 0; i < "accuracy".length; i++) await page.keyboard.press("Backspace");
  await page.keyboard.type("exact-sum");
  await page.locator(".cm-line", { hasText: 'scoreName: "exact-sum",' }).first().waitFor();
  await page.locator('section[aria-label="Validation"][aria-busy="false"]').waitFor({ timeout: 90_000 });
  await expect
    .poll(async () => `${await status.innerText()} ${await page.locator('[aria-label="Problems"]').allInnerTexts()}`, { timeout: 90_000 })
    .toMatch(/^No problems/);
  await page.getByTestId("editor-state").getByText("unsaved changes").waitFor();
  await page.screenshot({ path: path.join(SCREENSHOTS, "example-source.png"), fullPage: true });

  // Launch saves the copy as a new version first, then starts a run of it.
  await page.getByRole("button", { name: "Save & launch" }).click();
  await page.waitForURL(/\/runs\/run_[a-z0-9]+$/, { timeout: 60_000 });
  const runId = new URL(page.url()).pathname.split("/").pop()!;
  const run = await call<{ experimentId: string; status: string; config: { environment: string } }>("runs.byId", { id: runId });
  expect(run.experimentId).toBe(example!.id);
  expect(run.config.environment).toBe("custom");
  expect(["queued", "placing", "running"]).toContain(run.status);
  const saved = await call<{ files: Record<string, string> }>("experiments.version", { id: example!.id, version: 2 });
  expect(saved.files["environment.ts"]).toContain('scoreName: "exact-sum",');
  expect(saved.files["environment.ts"]).toContain("const correct = answer === state.a + state.b;");
}, 300_000);
