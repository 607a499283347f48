/**
 * A Hugging Face model folder to a trained run, as a user does it from a terminal: `tinkerlab bases push` uploads
 * it to a running server and imports it, `bases ls` lists it, a run on it trains to the end on the server's
 * worker; `bases import` does the same on the server's own machine; a folder the import cannot read is refused in
 * one line that names what is wrong, and nothing is left half-imported. In the browser, the Models page imports a
 * folder picked from disk and lists it.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fineTuneRemotely } from "@/examples/remote-sft";
import { createClient } from "@/lib/client";
import { writeHFModelFolder } from "../support/hf-model-fixtures";
import { launchBrowser, ROOT, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
let artifacts: string;
let work: string;

beforeAll(async () => {
  artifacts = tempDir("artifacts");
  server = await startServer({ ARTIFACTS_DIR: artifacts });
  work = tempDir("import-work");
  writeHFModelFolder(path.join(work, "Tiny-Qwen2-Instruct"), "qwen2", { tokenizer: true, seed: 11 });
  writeHFModelFolder(path.join(work, "tiny-llama"), "llama3", { tokenizer: true, seed: 12 });
}, 180_000);
afterAll(() => server?.stop());

function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "bin", "tinkerlab"), args, {
      cwd: work,
      env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: work, TINKERLAB_URL: server.url, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    // "close", not "exit": the process can end before its last output has been read.
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("importing a Hugging Face model", () => {
  it("uploads a folder to the server, lists it, and trains a run on it to the end", async () => {
    const pushed = await cli(["bases", "push", "Tiny-Qwen2-Instruct", "--context-length", "64"]);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toMatch(/Imported qwen2 as base 'tiny-qwen2-instruct': 27\.9K parameters/);
    expect(fs.existsSync(path.join(artifacts, "uploads", "tiny-qwen2-instruct"))).toBe(false);

    const listed = await cli(["bases", "ls", "--json"]);
    const row = (JSON.parse(listed.stdout) as { base: string; kind: string; context: string; origin: string }[]).find((b) => b.base === "tiny-qwen2-instruct");
    expect(row).toMatchObject({ kind: "imported", context: "64", origin: "imported qwen2 model from an upload by the local user" });

    const folder = path.join(work, "on-qwen");
    fs.mkdirSync(folder);
    fs.writeFileSync(
      path.join(folder, "experiment.json"),
      JSON.stringify({
        name: "arithmetic on an imported model",
        environment: "arithmetic",
        agent: { base: "tiny-qwen2-instruct", training: { mode: "lora" }, sampling: { maxTokens: 4 } },
        algorithm: { name: "grpo", steps: 3, groupSize: 4, groupsPerStep: 2 },
        evaluation: { every: 0, episodes: 4 },
      }),
    );
    const run = await cli(["run", "on-qwen", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ status: "completed", step: 3 });
  }, 300_000);

  it("fine-tunes the imported model through a remote session, in the model's own chat template", async () => {
    const tl = createClient({ url: server.url });
    const session = await tl.training.create({ base: "tiny-qwen2-instruct", lora: { rank: 8 }, seed: 2, name: "import-e2e" });
    expect(session.tokenizer.kind).toBe("hf");
    const rendered = session.tokenizer.renderChat([{ role: "user", content: "1+1" }], { addGenerationPrompt: true });
    expect(session.tokenizer.decode(rendered.tokens)).toMatch(/<\|im_start\|>user\n1\+1<\|im_end\|>\n<\|im_start\|>assistant\n$/);
    await session.close();
    const lines = Array.from({ length: 12 }, (_, i) =>
      JSON.stringify({
        messages: [
          { role: "user", content: `${i}+${i}` },
          { role: "assistant", content: String(2 * i) },
        ],
      }),
    ).join("\n");
    const { losses } = await fineTuneRemotely(tl, lines, { base: "tiny-qwen2-instruct", steps: 12, batchSize: 12, learningRate: 1e-2, seed: 1 });
    expect(losses.at(-1)!).toBeLessThan(losses[0]! * 0.8);
  }, 120_000);

  it("imports a folder on the server's own machine", async () => {
    const imported = await cli(["bases", "import", "tiny-llama", "--name", "local-llama", "--json"], { ARTIFACTS_DIR: artifacts });
    expect(imported.code, imported.stderr).toBe(0);
    expect(JSON.parse(imported.stdout)).toMatchObject({ name: "local-llama", modelType: "llama", config: { architecture: "llama", tiedEmbeddings: false } });
    const listed = await cli(["bases", "ls", "--json"]);
    expect((JSON.parse(listed.stdout) as { base: string }[]).map((b) => b.base)).toContain("local-llama");
  });

  it("refuses a model it cannot read in one line naming the field, and keeps nothing of it", async () => {
    const bad = path.join(work, "bert-thing");
    writeHFModelFolder(bad, "qwen2", { tokenizer: true, config: { model_type: "bert" } });
    const pushed = await cli(["bases", "push", "bert-thing"]);
    expect(pushed.code).toBe(3);
    expect(pushed.stderr.trim().split("\n")).toHaveLength(1);
    expect(pushed.stderr).toMatch(/model_type.*bert/);
    const listed = await cli(["bases", "ls", "--json"]);
    expect((JSON.parse(listed.stdout) as { base: string }[]).map((b) => b.base)).not.toContain("bert-thing");
    expect(fs.existsSync(path.join(artifacts, "bases", "bert-thing"))).toBe(false);

    const noModel = await cli(["bases", "push", "."]);
    expect(noModel.code).toBe(2);
    expect(noModel.stderr).toMatch(/has no config\.json/);
  });

  it("imports a folder picked on the Models page, and lists it with its shape", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`${server.url}/models`);
      await page.getByRole("form", { name: "Import a Hugging Face model" }).waitFor();
      const folder = path.join(work, "Page-Picked-Model");
      writeHFModelFolder(folder, "gpt2", { tokenizer: true, seed: 13 });
      await page.getByLabel("Folder").setInputFiles(folder);
      await expect.poll(() => page.getByLabel("Name").inputValue()).toBe("page-picked-model");
      await expect.poll(() => page.getByLabel("Files to send").textContent()).toMatch(/config\.json.*model\.safetensors/);
      await page.getByLabel("Context length").fill("48");
      await page.getByRole("button", { name: "Import" }).click();
      const done = page.getByRole("status").filter({ hasText: "Imported" });
      await done.waitFor({ timeout: 60_000 });
      expect(await done.textContent()).toMatch(/Imported gpt2 as 'page-picked-model': 38\.3K parameters, context 48 tokens/);
      const row = page.getByRole("table", { name: "Imported models" }).getByRole("row").filter({ hasText: "page-picked-model" });
      await row.waitFor();
      expect(await row.textContent()).toMatch(/gpt.*2 × 32.*48/);
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, "models-page.png"), fullPage: true });
    } finally {
      await browser.close();
    }
  }, 120_000);
});
