/**
 * "Send me the link", on a team server in Chromium: a person signs up, makes a project, launches a run in it and
 * shares it; someone with no account opens the link in a fresh browser and sees the same view with its curves
 * growing live, and no control; the link revoked, the same address is a 404.
 */
import path from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
const browsers: BrowserContext[] = [];

beforeAll(async () => {
  const basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
  server = await startServer({ TINKERLAB_AUTH: "team", TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
});
afterAll(async () => {
  await Promise.all(browsers.map((b) => b.close()));
  await server?.stop();
});

/** Calls a procedure as the person whose session cookie is given. */
async function callAs<T>(cookie: string, procedure: string, input: unknown): Promise<T> {
  const response = await fetch(`${server.url}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", cookie },
    body: JSON.stringify({ json: input }),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`${procedure}: ${response.status} ${JSON.stringify(body)}`);
  return body.result.data.json as T;
}

const pointsOf = (page: import("playwright-core").Page) =>
  page.evaluate(() => Number(document.querySelector('figure[aria-label="chart reward/mean"]')?.getAttribute("data-points") ?? 0));

describe("sharing a run", () => {
  it("opens for someone signed out with the same view, live and without controls, until it is revoked", async () => {
    const owner = await launchBrowser();
    browsers.push(owner);
    const page = await owner.newPage();

    // Sign up (the server's first account), then make a project from the Projects page.
    await page.goto(`${server.url}/sign-up`);
    const signUp = page.getByRole("form", { name: "Sign up" });
    await signUp.getByLabel("Name").fill("Grace");
    await signUp.getByLabel("Email").fill("grace@example.com");
    await signUp.getByLabel("Password").fill("a long enough password");
    await signUp.getByRole("button", { name: "Make the account" }).click();
    await page.waitForURL(`${server.url}/`);
    await page.goto(`${server.url}/projects`);
    const make = page.getByRole("form", { name: "Make a project" });
    await make.getByLabel("Name").fill("Agents");
    await make.getByRole("button", { name: "Make project" }).click();
    await page.waitForURL(/\/projects\/prj_\w+$/);
    const projectId = page.url().split("/").at(-1)!;

    // A run in that project, long enough to be training while the link is opened.
    const session = (await owner.cookies(server.url)).find((c) => c.name === "tinkerlab.session_token")!;
    const cookie = `${session.name}=${session.value}`;
    const experiment = await callAs<{ id: string; projectId: string }>(cookie, "experiments.create", { ...tinyExperiment("shared", 5000), projectId });
    expect(experiment.projectId).toBe(projectId);
    const { runId } = await callAs<{ runId: string }>(cookie, "runs.launch", { experimentId: experiment.id });

    await page.goto(`${server.url}/runs/${runId}`);
    await page.waitForFunction(() => Number(document.querySelector('figure[aria-label="chart reward/mean"]')?.getAttribute("data-points")) > 0, null, {
      timeout: 120_000,
    });
    // The view to share: wall time on the x-axis, heavier smoothing.
    await page.getByLabel("x-axis").selectOption("time");
    await page.getByLabel("Smoothing").fill("0.9");
    await page.waitForURL(/x=time.*smooth=0\.9|smooth=0\.9.*x=time/);
    // The page itself follows its URL (Next.js syncs the History API into its search parameters).
    expect(await page.getByLabel("x-axis").inputValue()).toBe("time");
    // The smoothing's value beside its slider (a chart's tick may read 0.90 too).
    await page.locator("span", { hasText: /^0\.90$/ }).waitFor();
    await page.getByRole("button", { name: "Share", exact: true }).click();
    const panel = page.getByRole("dialog", { name: "Share" });
    await panel.getByRole("button", { name: "Make link" }).click();
    const link = await panel.getByLabel("Share link", { exact: true }).inputValue();
    expect(link).toMatch(new RegExp(`^${server.url}/s/tls_[\\w-]{43}$`));
    await panel.getByRole("list", { name: "Share links" }).locator('[data-status="active"]').first().waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "share-panel.png"), fullPage: true });

    // Someone with no account, in a fresh browser: the same run and view, its curves growing.
    const visitor = await launchBrowser();
    browsers.push(visitor);
    const shared = await visitor.newPage();
    const opened = await shared.goto(link);
    expect(opened?.status()).toBe(200);
    expect(shared.url()).toMatch(/[?&]x=time/);
    expect(shared.url()).toMatch(/[?&]smooth=0\.9/);
    await shared.getByLabel("Shared view").waitFor();
    expect(await shared.getByLabel("x-axis").inputValue()).toBe("time");
    await shared.waitForFunction(() => Number(document.querySelector('figure[aria-label="chart reward/mean"]')?.getAttribute("data-points")) > 0, null, {
      timeout: 60_000,
    });
    const before = await pointsOf(shared);
    await shared.waitForFunction((n) => Number(document.querySelector('figure[aria-label="chart reward/mean"]')?.getAttribute("data-points")) > n, before, {
      timeout: 60_000,
    });
    for (const control of ["Pause", "Cancel", "Resume", "Share", "Launch run", "Evaluate", "Export"]) {
      expect(await shared.getByRole("button", { name: control, exact: true }).count(), control).toBe(0);
    }
    expect(await shared.getByRole("link", { name: "Download" }).count()).toBe(0);
    expect(await shared.getByRole("navigation", { name: "Main" }).count()).toBe(0);
    await shared.screenshot({ path: path.join(SCREENSHOTS, "shared-run.png"), fullPage: true });

    // The link opens this run and nothing else: the workbench's pages send the visitor to sign in.
    await shared.goto(`${server.url}/runs/${runId}`);
    await shared.waitForURL(/\/sign-in/);

    // One trajectory: a sample opened in the rollouts, shared; the link opens that step's sample and only the viewer.
    await page.keyboard.press("Escape");
    await page.locator('[aria-label="Samples"] [data-sample="1/2"]').click();
    await page.getByRole("button", { name: "Share trajectory" }).click();
    const trajectoryPanel = page.getByRole("dialog", { name: "Share" });
    await trajectoryPanel.getByRole("button", { name: "Make link" }).click();
    const trajectoryLink = await trajectoryPanel.getByLabel("Share link", { exact: true }).inputValue();
    const step = new URL(page.url()).searchParams.get("step");
    await page.keyboard.press("Escape");
    const trajectory = await visitor.newPage();
    await trajectory.goto(trajectoryLink);
    expect(new URL(trajectory.url()).searchParams.get("sample")).toBe("1/2");
    expect(new URL(trajectory.url()).searchParams.get("step")).toMatch(/^\d+$/);
    if (step) expect(new URL(trajectory.url()).searchParams.get("step")).toBe(step);
    await trajectory.getByLabel("Sample").getByText("group 1 · sample 2").waitFor();
    expect(await trajectory.getByRole("figure", { name: "chart reward/mean" }).count()).toBe(0);
    await trajectory.screenshot({ path: path.join(SCREENSHOTS, "shared-trajectory.png"), fullPage: true });

    // Revoked from the run page's Share panel: the same address is now a 404.
    await page.getByRole("button", { name: "Share", exact: true }).click();
    const runLink = panel.getByRole("listitem").filter({ hasText: /^run ·/ });
    await runLink.getByRole("button", { name: "Revoke" }).click();
    await runLink.and(page.locator('[data-status="revoked"]')).waitFor();
    const gone = await shared.goto(link);
    expect(gone?.status()).toBe(404);
    await shared.getByText("Not found").waitFor();
    await callAs(cookie, "runs.control", { id: runId, action: "cancel" });
  }, 300_000);
});

describe("the client bundle", () => {
  it("holds no server secret nor the names of the settings that carry them, and the log no share token", async () => {
    const { readdirSync, readFileSync } = await import("node:fs");
    const chunks = path.join(__dirname, "../../.next/static/chunks");
    const files = readdirSync(chunks, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".js"));
    expect(files.length).toBeGreaterThan(0);
    const bundle = files.map((f) => readFileSync(path.join(chunks, f), "utf8")).join("\n");
    for (const name of ["TINKERLAB_AUTH_SECRET", "TINKERLAB_WORKER_TOKEN", "DATABASE_URL", "auth_secret", "BETTER_AUTH_SECRET"]) {
      expect(bundle, name).not.toContain(name);
    }
    // Nor did the server's log ever show the share link's token made above.
    expect(server.output()).not.toMatch(/tls_[\w-]{43}/);
  });
});
