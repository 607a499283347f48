/**
 * Old versions in the editor: an experiment saved twice, its first version opened read-only from the Versions
 * list, then restored into the editor and saved as a new version.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { starterEnvironment } from "@/components/editor/starter";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  server = await startServer({ TINKERLAB_EXAMPLES: "off", TINKERLAB_LOCAL_WORKERS: "0" });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const V1 = `// first try\n${starterEnvironment}`;
const V2 = `// second try\n${starterEnvironment}`;

describe("old versions in the editor", () => {
  it("shows an old version read-only and restores it as a new version", async () => {
    const config = { name: "versions", environment: "custom", agent: { base: "generalist-base" } };
    const { id } = await callProcedure<{ id: string }>(server, "experiments.create", { name: "versions", files: { "environment.ts": V1 }, config });
    await callProcedure(server, "experiments.save", { id, files: { "environment.ts": V2 }, config: { ...config, seed: 9 }, message: "second try" });

    await page.goto(`${server.url}/experiments/${id}/edit`);
    const source = page.getByLabel("Source", { exact: true });
    await expect.poll(() => source.textContent(), { timeout: 60_000 }).toContain("// second try");
    // A click before hydration does nothing: click until the viewer opens.
    const view = page.getByRole("button", { name: "View version 1" });
    await expect.poll(async () => (await view.click(), view.getAttribute("aria-pressed")), { timeout: 30_000, interval: 500 }).toBe("true");

    const old = page.getByLabel("Version 1 environment.ts");
    await expect.poll(() => old.textContent(), { timeout: 20_000 }).toContain("// first try");
    expect(await old.getAttribute("contenteditable")).toBe("false");
    await old.click();
    await page.keyboard.type("xyz");
    expect(await old.textContent()).not.toContain("xyz");
    await page.getByRole("tab", { name: "config.json" }).click();
    // Stored parsed, every default written down: version 1's seed is the default, version 2's the one it was given.
    // (The whole config is longer than the viewer shows at once; its first keys are these.)
    await expect.poll(() => page.getByLabel("Version 1 config.json").textContent()).toContain('"name": "versions"');
    expect(await page.getByLabel("Version 1 config.json").textContent()).toContain('"seed": 0');
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-old-version.png"), fullPage: true });

    await page.getByRole("button", { name: "Restore this version" }).click();
    await expect.poll(() => source.textContent()).toContain("// first try");
    expect(await page.getByTestId("editor-state").textContent()).toContain("unsaved changes");
    expect(await page.getByLabel("Version message").inputValue()).toBe("restored from v1");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await expect.poll(() => page.getByTestId("editor-state").textContent(), { timeout: 20_000 }).toBe("version 3 · saved");

    const saved = await callProcedure<{ latestVersion: number; latest: { files: Record<string, string>; config: Record<string, unknown>; message: string } }>(
      server,
      "experiments.byId",
      { id },
      "GET",
    );
    expect(saved.latestVersion).toBe(3);
    expect(saved.latest.files["environment.ts"]).toBe(V1);
    expect(saved.latest.config).toMatchObject({ ...config, seed: 0 });
    expect(saved.latest.message).toBe("restored from v1");
    // Version 2 is untouched.
    const second = await callProcedure<{ files: Record<string, string> }>(server, "experiments.version", { id, version: 2 }, "GET");
    expect(second.files["environment.ts"]).toBe(V2);
    await expect(callProcedure(server, "experiments.version", { id, version: 7 }, "GET")).rejects.toThrow("has no version 7; its versions are 1 to 3");
  }, 180_000);
});
