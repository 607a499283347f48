/**
 * The playground's "Server (/v1)" backend on the real workbench (`tinkerlab start` and its local worker): picked
 * under Runtime (and kept in the address), it sends the prompt to `/v1/chat/completions`, says the model is loading
 * on a worker while the endpoint answers 503, then draws the streamed tokens as chips with their alternatives, and
 * the reply's text is the endpoint's own: a direct call with the same seed at temperature 0 writes the same.
 * Stop ends a generation that waits for its model.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { servedTokenLabel } from "@/components/playground/token-label";
import { launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

const MODEL = "generalist-base";
const SYSTEM = "Answer briefly.";
const USER = "What is 12 + 7?";

let server: TestServer;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  server = await startServer({ ARTIFACTS_DIR: tempDir("artifacts"), TINKERLAB_EXAMPLES: "off" });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

async function fillSampling(values: { temperature: number; maxTokens: number; seed: number }) {
  await page.getByLabel("Temperature").fill(String(values.temperature));
  await page.getByLabel("Max tokens").fill(String(values.maxTokens));
  await page.getByLabel("Seed").fill(String(values.seed));
}

const generateButton = () => page.getByRole("button", { name: "Generate", exact: true });

describe("the playground on the server's /v1 endpoint", () => {
  it("is picked under Runtime, kept in the address and this browser, and waits while a worker loads the model until stopped", async () => {
    await page.goto(`${server.url}/playground?model=${MODEL}`);
    await page.getByLabel("Backend").selectOption("server");
    await page.waitForURL(/backend=server/);
    // The choice outlives a reload (this browser's storage), and says where the model runs.
    await page.goto(`${server.url}/playground?model=${MODEL}`);
    await expect(page.getByLabel("Backend").inputValue()).resolves.toBe("server");
    await page.getByText(/this workbench's \/v1\/chat\/completions/).waitFor();

    await fillSampling({ temperature: 0, maxTokens: 16, seed: 11 });
    await generateButton().click();
    // No job serves the base yet: the endpoint answers 503 (and starts one); the page says so and asks again.
    await page.getByText("Loading the model on a worker…").waitFor({ timeout: 30_000 });
    await page.getByText(/is loading: a worker is starting to serve/).waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground-serve-loading.png"), fullPage: true });
    // Stop ends the wait: no more tries, nothing drawn.
    await page.getByRole("button", { name: "Stop" }).click();
    await page.getByText("no tokens, stopped").waitFor();
    await expect(page.getByText("Loading the model on a worker…").count()).resolves.toBe(0);
    await expect(generateButton().isEnabled()).resolves.toBe(true);
  }, 120_000);

  it("streams a greedy reply as chips whose text equals a direct /v1/chat/completions call's", async () => {
    await generateButton().click();
    const chips = page.getByRole("list", { name: "Generated tokens" }).getByRole("button");
    await chips.first().waitFor({ timeout: 150_000 });
    await page.getByText(/tokens\/s · first token in/).waitFor();
    await expect(generateButton().isEnabled()).resolves.toBe(true);

    const shownText = await page.getByRole("figure", { name: "Generated text" }).locator("pre").textContent();
    const shownChips = await chips.allTextContents();

    const direct = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: USER },
        ],
        temperature: 0,
        seed: 11,
        max_tokens: 16,
        logprobs: true,
      }),
    });
    expect(direct.status).toBe(200);
    const answer = (await direct.json()) as {
      choices: { message: { content: string }; logprobs: { content: { token: string; bytes: number[] }[] } }[];
      usage: { completion_tokens: number };
    };
    const choice = answer.choices[0]!;
    expect(shownText).toBe(choice.message.content);
    expect(shownChips).toEqual(choice.logprobs.content.map((token) => servedTokenLabel({ text: token.token, bytes: token.bytes })));
    expect(shownChips.length).toBe(answer.usage.completion_tokens);

    // A chip's alternatives, the five the endpoint sent, the drawn one first (greedy).
    await chips.first().focus();
    const tooltip = page.getByRole("tooltip").first();
    await tooltip.getByText("Most likely here:").waitFor();
    await expect(tooltip.locator("span.flex").count()).resolves.toBe(5);
    await expect(tooltip.locator("span.flex").first().locator("span").first().textContent()).resolves.toBe(shownChips[0]);
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground-serve.png"), fullPage: true });
  }, 240_000);

  it("shows the endpoint's own message when it refuses the request", async () => {
    await fillSampling({ temperature: 3, maxTokens: 8, seed: 1 });
    await generateButton().click();
    // The endpoint's own words (400, param `temperature`: OpenAI's range is 0 to 2), as a direct call gets them.
    const refused = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: USER }], temperature: 3 }),
    });
    expect(refused.status).toBe(400);
    const { error } = (await refused.json()) as { error: { message: string; param: string } };
    expect(error.param).toBe("temperature");
    const alert = page.locator('p[role="alert"]');
    await alert.waitFor();
    await expect(alert.textContent()).resolves.toBe(error.message);
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground-serve-refused.png"), fullPage: true });
  }, 60_000);
});
