/**
 * Leaving the experiment editor with unsaved edits asks first: a link of the app (the nav bar, the editor's own
 * Back), the browser's Back, and a reload each ask; staying keeps the page and its edits, leaving leaves. Saved
 * edits leave without a question.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Dialog, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;
let experimentId: string;
const QUESTION = "You have unsaved changes to guarded: leave and lose them?";

beforeAll(async () => {
  server = await startServer({ TINKERLAB_EXAMPLES: "off", TINKERLAB_LOCAL_WORKERS: "0" });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  ({ id: experimentId } = await callProcedure<{ id: string }>(server, "experiments.create", {
    name: "guarded",
    config: { name: "guarded", environment: "arithmetic", agent: { base: "arithmetic-base" } },
  }));
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

/** Does `act`, answers the dialog it opens (accepting or dismissing it), and returns that dialog. */
async function answering(answer: "accept" | "dismiss", act: () => Promise<unknown>): Promise<Dialog> {
  const opened = page.waitForEvent("dialog", { timeout: 15_000 });
  const [dialog] = await Promise.all([opened.then(async (d) => (await d[answer](), d)), act()]);
  return dialog;
}

const state = () => page.getByTestId("editor-state");
const groupSize = () => page.getByRole("form", { name: "Config form" }).getByLabel("Group size");

/** Opens the editor from the experiment's page (an in-app navigation, so Back returns there) and edits a field. */
async function openAndEdit() {
  await page.goto(`${server.url}/experiments/${experimentId}`);
  await page.getByRole("link", { name: "Edit" }).click();
  await page.waitForURL(/\/edit$/);
  await page.getByRole("tab", { name: "Config" }).click();
  await groupSize().fill("16");
  await state().getByText("unsaved changes").waitFor();
}

describe("unsaved edits in the editor", () => {
  it("a nav link asks: staying keeps the page and the edit, leaving leaves", async () => {
    await openAndEdit();
    const dialog = await answering("dismiss", () => page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Runs" }).click());
    expect(dialog.type()).toBe("confirm");
    expect(dialog.message()).toBe(QUESTION);
    // Still here, nothing lost: the click was stopped before the app router saw it.
    expect(new URL(page.url()).pathname).toBe(`/experiments/${experimentId}/edit`);
    expect(await groupSize().inputValue()).toBe("16");
    await state().getByText("unsaved changes").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-unsaved-stay.png"), fullPage: true });

    await answering("accept", () => page.getByRole("link", { name: "Back" }).click());
    await page.waitForURL(new RegExp(`/experiments/${experimentId}$`));
  }, 180_000);

  it("the browser's Back asks: staying keeps the editor, leaving goes back", async () => {
    await openAndEdit();
    const dialog = await answering("dismiss", () => page.evaluate(() => window.history.back()));
    expect(dialog.message()).toBe(QUESTION);
    // Staying cancels the traversal: the address and the editor stay.
    await page.waitForURL(new RegExp(`/experiments/${experimentId}/edit$`));
    expect(await groupSize().inputValue()).toBe("16");

    await answering("accept", () => page.evaluate(() => window.history.back()));
    await page.waitForURL(new RegExp(`/experiments/${experimentId}$`));
    await page.getByRole("link", { name: "Edit" }).waitFor();
  }, 180_000);

  it("a reload asks the browser's own question", async () => {
    await openAndEdit();
    const dialog = await answering("dismiss", () => page.evaluate(() => window.location.reload()));
    expect(dialog.type()).toBe("beforeunload");
    expect(await groupSize().inputValue()).toBe("16");
  }, 180_000);

  it("saved edits leave without a question", async () => {
    await openAndEdit();
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await state().getByText("· saved").waitFor();
    let asked = false;
    page.once("dialog", (d) => {
      asked = true;
      void d.accept();
    });
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Runs" }).click();
    await page.waitForURL(/\/runs$/);
    expect(asked).toBe(false);
  }, 180_000);
});
