/**
 * The experiment editor in a real browser: an experiment made from a template, its config form (generated from
 * the zod schema), a custom environment whose typo shows up as a diagnostic while typing, SDK completions and
 * hover docs, and saving a new version. Also checks the editor's SDK docs table against lib/sdk's types.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { environmentFieldDocs, rngMethodDocs, stepOutcomeDocs } from "@/components/editor/sdk-docs";
import { starterEnvironment } from "@/components/editor/starter";
import { launchBrowser, ROOT, SCREENSHOTS, startServer, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  server = await startServer({ TINKERLAB_EXAMPLES: "off", TINKERLAB_LOCAL_WORKERS: "0" });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

/** The members of a type literal or class in an SDK source file, with their JSDoc text ("" when none). */
function sdkMembers(file: string, name: string): Map<string, string> {
  const source = ts.createSourceFile(file, fs.readFileSync(path.join(ROOT, file), "utf8"), ts.ScriptTarget.ES2022, true);
  const members = new Map<string, string>();
  const jsDoc = (node: ts.Node) =>
    ts
      .getJSDocCommentsAndTags(node)
      .map((doc) => ts.getTextOfJSDocComment((doc as ts.JSDoc).comment) ?? "")
      .join(" ")
      .replace(/\s+/g, " ")
      .trim();
  const visit = (node: ts.Node) => {
    if (ts.isTypeAliasDeclaration(node) && node.name.text === name && ts.isTypeLiteralNode(node.type)) {
      for (const member of node.type.members) if (member.name && ts.isIdentifier(member.name)) members.set(member.name.text, jsDoc(member));
    }
    if (ts.isClassDeclaration(node) && node.name?.text === name) {
      for (const member of node.members) {
        const hidden = ts.getCombinedModifierFlags(member as ts.Declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Static);
        if (ts.isMethodDeclaration(member) && !hidden && ts.isIdentifier(member.name)) members.set(member.name.text, jsDoc(member));
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return members;
}

describe("the editor's SDK docs", () => {
  it.each([
    ["EnvironmentDefinition", "lib/sdk/environment.ts", environmentFieldDocs],
    ["StepOutcome", "lib/sdk/environment.ts", stepOutcomeDocs],
    ["Rng", "lib/model/rng.ts", rngMethodDocs],
  ] as const)("covers every member of %s, starting each doc with the SDK's own JSDoc", (name, file, table) => {
    const members = sdkMembers(file, name);
    expect(members.size).toBeGreaterThan(0);
    expect(Object.keys(table).sort()).toEqual([...members.keys()].sort());
    for (const [member, doc] of members) {
      if (doc) expect(`${member}: ${(table as Record<string, { doc: string }>)[member]!.doc}`).toContain(`${member}: ${doc}`);
    }
  });
});

/** Moves the pointer over `word` on the editor line holding `line`. */
async function hoverWord(line: string, word: string) {
  const box = await page.evaluate(
    ([line, word]) => {
      const element = [...document.querySelectorAll(".cm-line")].find((l) => l.textContent?.includes(line));
      const walker = document.createTreeWalker(element!, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const at = node.textContent!.indexOf(word);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + word.length);
        const rect = range.getBoundingClientRect();
        return { x: rect.x + rect.width / 2, y: rect.y + rect.height / 2 };
      }
      throw new Error(`no '${word}' on the line '${line}'`);
    },
    [line, word] as const,
  );
  await page.mouse.move(box.x, box.y);
}

/** Clicks into the editor on the line holding `text` and moves to its end. */
async function goToLineEnd(text: string) {
  await page.locator(".cm-line", { hasText: text }).first().click();
  await page.keyboard.press("End");
}

describe("the experiment editor", () => {
  it("creates an experiment from a template and opens its config as a form", async () => {
    await page.goto(server.url);
    await page.getByRole("button", { name: "New experiment" }).click();
    const form = page.getByRole("form", { name: "New experiment" });
    await form.getByLabel("Name").fill("editor-e2e");
    await form.getByLabel("Start from").selectOption("arithmetic");
    await form.getByRole("button", { name: "Create experiment" }).click();
    await page.waitForURL(/\/experiments\/exp_[a-z0-9]+$/);

    await page.getByRole("link", { name: "Edit" }).click();
    await page.waitForURL(/\/experiments\/exp_[a-z0-9]+\/edit$/);
    await page.getByRole("heading", { name: "Edit editor-e2e" }).waitFor();
    const config = page.getByRole("form", { name: "Config form" });
    // Values from the template, defaults for the rest, each with its schema description and range.
    expect(await config.locator('[data-field="algorithm.learningRate"] input').inputValue()).toBe("0.0005");
    expect(await config.getByLabel("Group size").inputValue()).toBe("8");
    expect(await config.getByLabel("Clip range").inputValue()).toBe("0.2");
    expect(await config.locator('[data-field="algorithm.name"] select').inputValue()).toBe("grpo");
    expect(await config.innerText()).toContain("PPO clip range ε");
    expect(await config.innerText()).toContain("1e-7 – 1");

    await config.locator('[data-field="algorithm.learningRate"] input').fill("5");
    await config.getByText("must be a number from 1e-7 to 1").waitFor();
    await page.getByTestId("editor-state").getByText("unsaved changes").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-config.png"), fullPage: true });
    await config.locator('[data-field="algorithm.learningRate"] input').fill("0.001");
    await config.getByText("must be a number from 1e-7 to 1").waitFor({ state: "detached" });

    await page.getByRole("tab", { name: "JSON" }).click();
    const json = page.locator('[aria-label="Config JSON"]');
    await json.waitFor();
    expect(await json.innerText()).toContain('"learningRate": 0.001');
  }, 240_000);

  it("writes a custom environment; a typo shows up as a diagnostic while typing", async () => {
    await page.getByRole("tab", { name: "Config" }).click();
    await page.getByRole("button", { name: "Write a custom environment" }).click();
    await page.getByRole("tab", { name: "environment.ts" }).waitFor();
    const status = page.getByTestId("validation-status");
    await status.getByText("No problems").waitFor({ timeout: 60_000 });
    await page.getByRole("group", { name: "Dry run" }).getByText("larger-number").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-custom.png"), fullPage: true });

    // Hover docs for a field of defineEnvironment.
    await hoverWord("maxTurns: 1,", "maxTurns");
    await page.locator(".cm-sdk-doc").getByText("Turns before the episode is cut off").waitFor();

    // Completions for the fields not yet given.
    await goToLineEnd("maxTurns: 1,");
    await page.keyboard.press("Enter");
    await page.keyboard.type("stepC");
    const completions = page.locator(".cm-tooltip-autocomplete");
    await completions.getByText("stepCost").first().waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-completion.png") });
    await page.keyboard.press("Escape");
    await page.keyboard.press("Control+Shift+K"); // deletes the line

    // A typo: `nswer` for `answer`.
    await goToLineEnd("const correct = answer === Math.max(state.a, state.b);");
    for (let i = 0; i < "answer === Math.max(state.a, state.b);".length; i++) await page.keyboard.press("ArrowLeft");
    await page.keyboard.press("Delete");
    await page.locator(".cm-lintRange-error").first().waitFor({ timeout: 60_000 });
    const problems = page.getByRole("list", { name: "Problems" });
    await problems
      .getByText(/Cannot find name 'nswer'/)
      .first()
      .waitFor();
    const line = starterEnvironment.split("\n").findIndex((l) => l.includes("const correct = answer")) + 1;
    expect(await problems.innerText()).toContain(`environment.ts:${line}:`);
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-diagnostic.png"), fullPage: true });

    await page.keyboard.type("a");
    await status.getByText("No problems").waitFor({ timeout: 60_000 });
    expect(await page.locator(".cm-lintRange-error").count()).toBe(0);
  }, 240_000);

  it("saves a new version and lists it", async () => {
    await page.getByLabel("Version message").fill("custom environment");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByTestId("editor-state").getByText("version 2 · saved").waitFor();
    const versions = page.getByRole("list", { name: "Versions" });
    await versions.getByText("custom environment").waitFor();
    expect(await versions.innerText()).toMatch(/v2[\s\S]*v1/);

    await page.reload();
    await page.getByRole("tab", { name: "environment.ts" }).waitFor();
    expect(await page.locator(".cm-content").innerText()).toContain('name: "larger-number"');
    await page.getByRole("tab", { name: "Config" }).click();
    expect(await page.getByRole("form", { name: "Config form" }).locator('[data-field="environment"] input').inputValue()).toBe("custom");
    expect(await page.getByRole("form", { name: "Config form" }).locator('[data-field="algorithm.learningRate"] input').inputValue()).toBe("0.001");
    await page.screenshot({ path: path.join(SCREENSHOTS, "editor-saved.png"), fullPage: true });
  }, 120_000);
});
