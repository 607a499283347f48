/**
 * A team server in Chromium (TINKERLAB_AUTH=team): a signed-out visitor is sent to sign in; the first account is
 * made from the page and lands on the workbench, signed in; everything else refuses a request without the session;
 * signing out ends it.
 */
import path from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
beforeAll(async () => {
  server = await startServer({ TINKERLAB_AUTH: "team", TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts"), TINKERLAB_LOCAL_WORKERS: "0" });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("a team server", () => {
  it("sends a signed-out visitor to sign in, makes the first account from the page, and signs out", async () => {
    // Without a session: procedures, the health of training and downloads refuse; pages send the visitor to sign in.
    const procedure = await fetch(`${server.url}/api/trpc/experiments.list?input=${encodeURIComponent(JSON.stringify({ json: {} }))}`);
    expect(procedure.status).toBe(401);
    expect((await fetch(`${server.url}/api/exports/ckpt_x`)).status).toBe(401);

    const page = await browser.newPage();
    await page.goto(`${server.url}/runs`);
    await page.waitForURL(/\/sign-in\?next=%2Fruns$/);
    await page.getByRole("link", { name: "make the first one" }).click();
    await page.waitForURL(/\/sign-up$/);
    const form = page.getByRole("form", { name: "Sign up" });
    await form.getByLabel("Name").fill("Ada");
    await form.getByLabel("Email").fill("ada@example.com");
    await form.getByLabel("Password").fill("correct horse battery staple");
    await page.screenshot({ path: path.join(SCREENSHOTS, "sign-up.png"), fullPage: true });
    await form.getByRole("button", { name: "Make the account" }).click();
    await page.waitForURL(`${server.url}/`);
    await page.getByRole("banner").getByText("Ada").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "signed-in.png"), fullPage: true });

    // Signed in, the page's own calls work; a second sign-up is refused with the reason.
    const cookies = await browser.cookies(server.url);
    const session = cookies.find((c) => c.name === "tinkerlab.session_token")!;
    expect(session.httpOnly).toBe(true);
    const listed = await fetch(`${server.url}/api/trpc/experiments.list?input=${encodeURIComponent(JSON.stringify({ json: {} }))}`, {
      headers: { cookie: `${session.name}=${session.value}` },
    });
    expect(listed.status).toBe(200);
    const second = await fetch(`${server.url}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: server.url },
      body: JSON.stringify({ name: "Bob", email: "bob@example.com", password: "another long password" }),
    });
    expect(second.status).toBe(403);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/sign-in/);
    await page.goto(`${server.url}/scheduler`);
    await page.waitForURL(/\/sign-in\?next=%2Fscheduler$/);
    // And back in, to the page asked for.
    const signIn = page.getByRole("form", { name: "Sign in" });
    await signIn.getByLabel("Email").fill("ada@example.com");
    await signIn.getByLabel("Password").fill("correct horse battery staple");
    await signIn.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${server.url}/scheduler`);
  }, 180_000);
});
