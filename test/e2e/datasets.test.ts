import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callProcedure, launchBrowser, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
let browser: BrowserContext;
let page: Page;

beforeAll(async () => {
  server = await startServer({ TINKERLAB_EXAMPLES: "off", TINKERLAB_LOCAL_WORKERS: "0", ARTIFACTS_DIR: tempDir("artifacts") });
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const jsonl = (rows: unknown[]) => Buffer.from(rows.map((row) => JSON.stringify(row)).join("\n") + "\n");
const row = (name: string) => page.locator(`tr[data-dataset="${name}"]`);

/** Chooses a file in the upload form, as a user picking it from disk. */
async function chooseFile(name: string, buffer: Buffer) {
  await page.getByRole("form", { name: "Upload a dataset" }).getByLabel("File").setInputFiles({ name, mimeType: "application/octet-stream", buffer });
}

describe("the datasets page", () => {
  it("lists the built-in datasets, with their rows and a preview", async () => {
    const response = await page.goto(`${server.url}/datasets`);
    expect(response?.status()).toBe(200);
    await expect(page.title()).resolves.toBe("Datasets · Tinkerlab");
    const nav = page.getByRole("navigation", { name: "Main" });
    expect(await nav.getByRole("link", { name: "Datasets" }).getAttribute("aria-current")).toBe("page");
    await page.getByRole("heading", { name: "No uploaded datasets yet" }).waitFor();
    const builtIn = await row("word-problems").innerText();
    expect(builtIn).toContain("built-in");
    expect(builtIn).toContain("rows");
    expect(builtIn).toContain("5,000");
    expect(builtIn).toMatch(/question, expression, answer, split/);
    // How to use a dataset, on the page.
    const main = await page.locator("main").innerText();
    expect(main).toContain('data: { kind: "dataset", dataset: "NAME" }');
    expect(main).toContain('sft: { data: "dataset", dataset: "NAME" }');

    await row("word-problems").getByRole("button", { name: "word-problems" }).click();
    const preview = page.getByRole("table", { name: "Preview" });
    await preview.getByText("A box holds 19 apples. How many apples are in 28 boxes?").waitFor();
    expect(await preview.locator("tbody tr").count()).toBe(20);
    expect(await page.locator("main").innerText()).toContain('dataset: "word-problems"');
  });

  it("uploads a JSONL file of rows, split into train and test, and previews it", async () => {
    await chooseFile("Math Facts.jsonl", jsonl(Array.from({ length: 10 }, (_, i) => ({ question: `${i}+${i}`, answer: 2 * i }))));
    const form = page.getByRole("form", { name: "Upload a dataset" });
    await expect.poll(() => form.getByLabel("Name").inputValue()).toBe("math-facts");
    expect(await form.getByLabel("Format").inputValue()).toBe("jsonl");
    await form.getByLabel("Description").fill("Doubling facts");
    await form.getByRole("button", { name: "Upload" }).click();
    await form.getByRole("status").getByText("Uploaded math-facts: 10 rows (8 train, 2 test).").waitFor();

    await row("math-facts").waitFor();
    const listed = await row("math-facts").innerText();
    expect(listed).toContain("Doubling facts");
    expect(listed).toContain("rows");
    expect(listed).toMatch(/\b10\b/);
    expect(listed).toContain("8 / 2");
    expect(listed).toContain("question, answer");
    expect(await page.getByRole("heading", { name: "No uploaded datasets yet" }).count()).toBe(0);

    // The new dataset is selected: its preview shows the stored rows, each with its split.
    const preview = page.getByRole("table", { name: "Preview" });
    await preview.getByText("9+9").waitFor();
    expect(await preview.locator("tbody tr").count()).toBe(10);
    expect(await preview.locator("thead").innerText()).toMatch(/question\s+answer\s+split/i);
    await page.getByText("first 10 of 10 rows").waitFor();
  });

  it("uploads SFT conversations, recognised by their messages", async () => {
    const conversations = [
      {
        messages: [
          { role: "user", content: "What is 2+3?" },
          { role: "assistant", content: "5" },
        ],
      },
      {
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Capital of France?" },
          { role: "assistant", content: "Paris" },
        ],
      },
    ];
    await chooseFile("chats.jsonl", jsonl(conversations));
    const form = page.getByRole("form", { name: "Upload a dataset" });
    await expect.poll(() => form.getByLabel("Name").inputValue()).toBe("chats");
    await form.getByRole("button", { name: "Upload" }).click();
    await form.getByRole("status").getByText("Uploaded chats: 2 conversations.").waitFor();
    const listed = await row("chats").innerText();
    expect(listed).toContain("conversations");
    expect(listed).toContain("2 / 0");
    await page.getByRole("list", { name: "Preview" }).getByText("Capital of France?").waitFor();
  });

  it("shows the server's message, naming the line, when an upload is refused", async () => {
    const text = ['{"question": "1+1", "answer": 2}', '{"question": "2+2", "answer": 4}', '{"question": "3+3", answer: 6}'].join("\n");
    await chooseFile("broken.jsonl", Buffer.from(text));
    const form = page.getByRole("form", { name: "Upload a dataset" });
    await expect.poll(() => form.getByLabel("Name").inputValue()).toBe("broken");
    await form.getByRole("button", { name: "Upload" }).click();
    const alert = form.getByRole("alert");
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/^broken:3: not valid JSON/);
    expect(await row("broken").count()).toBe(0);
    await page.screenshot({ path: path.join(SCREENSHOTS, "datasets-refused.png"), fullPage: true });

    // A name taken already is refused with the server's reason too.
    await chooseFile("math-facts.csv", Buffer.from("question,answer\n1+1,2\n"));
    await expect.poll(() => form.getByLabel("Format").inputValue()).toBe("csv");
    await form.getByRole("button", { name: "Upload" }).click();
    await form.getByRole("alert").getByText("a dataset named 'math-facts' exists already in this project; choose another name").waitFor();
  });

  it("lists the uploaded datasets after a reload", async () => {
    await page.goto(`${server.url}/datasets`);
    await row("math-facts").waitFor();
    await row("chats").waitFor();
    expect(await row("math-facts").innerText()).toContain("8 / 2");
    await row("math-facts").getByRole("button", { name: "math-facts" }).click();
    await page.getByRole("table", { name: "Preview" }).getByText("0+0").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "datasets.png"), fullPage: true });
  });

  it("renames an uploaded dataset in place, refusing a name taken in the project", async () => {
    const form = page.getByRole("form", { name: "Rename math-facts" });
    await row("math-facts").getByRole("button", { name: "Rename", exact: true }).click();
    await form.getByLabel("New name").fill("chats");
    await form.getByRole("button", { name: "Save" }).click();
    await page.getByRole("alert").getByText("Rename math-facts: a dataset named 'chats' exists already in this project; choose another name").waitFor();

    await form.getByLabel("New name").fill("doubling");
    await form.getByRole("button", { name: "Save" }).click();
    await page.getByRole("status").getByText("Renamed math-facts to doubling.").waitFor();
    expect(await row("doubling").innerText()).toContain("8 / 2");
    expect(await row("math-facts").count()).toBe(0);
    // The preview that was open follows the new name.
    await page.getByText("first 10 of 10 rows").waitFor();
    await page.reload();
    await row("doubling").waitFor();
  });

  it("refuses to delete a dataset a queued run reads, naming it; deletes another after a confirmation naming it", async () => {
    // An SFT run on 'chats' stays queued: this server has no worker.
    const config = {
      name: "imitate",
      environment: "arithmetic",
      agent: { base: "arithmetic-base", sampling: { maxTokens: 5 } },
      algorithm: { name: "sft", steps: 10 },
      sft: { data: "dataset", dataset: "chats" },
    };
    const experiment = await callProcedure<{ id: string }>(server, "experiments.create", { name: "imitate", config });
    const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: experiment.id });
    await page.goto(`${server.url}/datasets`);

    const asked: string[] = [];
    page.on("dialog", (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await row("chats").getByRole("button", { name: "Delete", exact: true }).click();
    const alert = page.getByRole("alert").filter({ hasText: /^Delete chats: dataset 'chats' is in use, so it was not deleted:/ });
    await alert.waitFor();
    const refusal = await alert.innerText();
    expect(refusal).toContain(`experiment 'imitate' (${experiment.id}) names it in the latest version`);
    expect(refusal).toMatch(new RegExp(`run '[^']+' \\(${runId}, queued\\) reads it`));
    expect(refusal).toContain("Save each experiment naming another dataset and cancel each run or let it end, then delete it.");
    expect(asked).toEqual(["Delete the dataset 'chats' and its stored rows? This cannot be undone."]);
    await row("chats").waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, "datasets-delete-refused.png"), fullPage: true });

    await row("doubling").getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByRole("status").getByText("Deleted doubling.").waitFor();
    expect(asked.at(-1)).toBe("Delete the dataset 'doubling' and its stored rows? This cannot be undone.");
    await expect.poll(() => row("doubling").count()).toBe(0);
    await page.reload();
    await row("chats").waitFor();
    expect(await row("doubling").count()).toBe(0);
  });
});
