/**
 * The playground in Chromium on a base imported from Hugging Face: a tiny random Qwen2 model with a ChatML BPE
 * tokenizer, imported with `tinkerlab bases import` into the server's ARTIFACTS_DIR, exported to ONNX by the server
 * (the llama graph, with the tokenizer's files in its metadata) and run in the page. The page must speak the model's
 * own tokenizer: the prompt in its ChatML template, chips with its BPE token texts, generation ending at <|im_end|>,
 * the logits and greedy tokens of the training runtime; and the episode player must hold its BPE tokens to a game's
 * legal actions.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenLabels } from "@/components/playground/token-label";
import type { Tokenizer } from "@/lib/model/tokenizer";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { writeHFModelFolder } from "@/test/support/hf-model-fixtures";
import { callProcedure, launchBrowser, ROOT, SCREENSHOTS, startServer, tempDir, type TestServer } from "./support/server";

const NAME = "tiny-qwen";
let server: TestServer;
let reference: BaseModel;
let tokenizer: Tokenizer;
let browser: BrowserContext;
let page: Page;

const chat = (system: string, user: string) =>
  tokenizer.renderChat(
    [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
    { addGenerationPrompt: true },
  ).tokens;

function runtimeLogits(tokens: number[]): Float32Array {
  const { config, weights } = reference;
  const { logits } = reference.engine.run({
    model: { config, weights, lora: null, valueHead: null },
    tokens: Int32Array.from(tokens),
    batch: 1,
    seqLen: tokens.length,
  });
  return logits.slice((tokens.length - 1) * config.vocabSize, tokens.length * config.vocabSize);
}

async function runtimeGreedy(prompt: number[], maxTokens: number): Promise<number[]> {
  const { samples } = await new TrainingClient(reference).sample([prompt], 1, { temperature: 0, maxTokens });
  return samples[0]![0]!.tokens;
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
};

beforeAll(async () => {
  const source = path.join(tempDir("hf-model"), "Tiny-Qwen");
  writeHFModelFolder(source, "qwen2", { tokenizer: true, seed: 7 });
  const artifacts = tempDir("artifacts");
  // As a person imports a model: the CLI, on the server's machine, into the ARTIFACTS_DIR the server reads.
  const imported = spawnSync(
    path.join(ROOT, "node_modules", ".bin", "tsx"),
    [path.join(ROOT, "bin", "tinkerlab.ts"), "bases", "import", source, "--name", NAME],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: "production", ARTIFACTS_DIR: artifacts },
      encoding: "utf8",
    },
  );
  if (imported.status !== 0) throw new Error(`tinkerlab bases import failed (${imported.status}):\n${imported.stdout}${imported.stderr}`);
  server = await startServer({ ARTIFACTS_DIR: artifacts, TINKERLAB_EXAMPLES: "off", TINKERLAB_LOCAL_WORKERS: "0" });
  reference = BaseModel.load(path.join(artifacts, "bases", NAME));
  tokenizer = reference.tokenizer;
  expect(tokenizer.kind).toBe("hf");
  browser = await launchBrowser();
  page = await browser.newPage();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("the playground on an imported Hugging Face model", () => {
  it("loads the model with its own tokenizer and computes the runtime's logits and greedy tokens", async () => {
    await page.goto(`${server.url}/playground?model=${NAME}`);
    await page.waitForFunction(() => window.__tinkerlabPlayground !== undefined, null, { timeout: 60_000 });
    const { backend } = await page.evaluate(() => window.__tinkerlabPlayground!.ready);
    const runtime = page.getByLabel("Runtime");
    await expect.poll(() => runtime.innerText(), { timeout: 30_000 }).toContain(backend);
    expect(await runtime.innerText()).toContain(`the model's own (Hugging Face), ${tokenizer.vocabSize} ids · replies end at <|im_end|>`);
    expect(await page.getByRole("combobox").first().locator("optgroup[label='Imported models'] option").allInnerTexts()).toEqual([
      expect.stringContaining(NAME),
    ]);

    const [imStart, imEnd] = ["<|im_start|>", "<|im_end|>"].map((text) => tokenizer.encode(text)[0]!);
    const sequences = [
      chat("Answer briefly.", "What is 12 + 7?"),
      [imStart!],
      [imStart!, ...tokenizer.encode("user\nhi there"), imEnd!, 0, 255, reference.config.vocabSize - 1],
    ];
    let worst = 0;
    for (const tokens of sequences) {
      const logits = await page.evaluate((ids) => window.__tinkerlabPlayground!.logits(ids), tokens);
      worst = Math.max(worst, maxAbsDiff(logits, runtimeLogits(tokens)));
    }
    expect(worst).toBeLessThan(1e-4);
    console.log(`imported-model parity on ${backend}: max |logit difference| ${worst.toExponential(2)}`);
    // The hook stops where the runtime does by default: at the model's stop tokens, not the byte tokenizer's <|end|>.
    for (const prompt of [chat("Answer briefly.", "What is 12 + 7?"), chat("", "hi")]) {
      const generated = await page.evaluate(([ids]) => window.__tinkerlabPlayground!.generate(ids, { maxTokens: 40, temperature: 0 }), [prompt] as const);
      expect(generated.tokens).toEqual(await runtimeGreedy(prompt, 40));
    }
  });

  it("renders the prompt in the model's ChatML template and shows its BPE tokens as chips", async () => {
    const form = page.getByRole("form", { name: "Generate" });
    await form.getByRole("textbox", { name: "System" }).fill("Answer briefly.");
    await form.getByRole("textbox", { name: "User" }).fill("What is 12 + 7?");
    await form.getByLabel("Temperature").fill("0");
    await form.getByLabel("Max tokens").fill("24");
    const prompt = chat("Answer briefly.", "What is 12 + 7?");
    expect(tokenizer.decode(prompt)).toBe(
      "<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n<|im_start|>assistant\n",
    );
    expect(await form.innerText()).toContain(`${prompt.length} prompt tokens in the chat template of the model's ${reference.config.contextLength}`);
    await form.getByRole("button", { name: "Generate" }).click();
    const runtime = page.getByLabel("Runtime");
    await expect.poll(() => runtime.innerText(), { timeout: 30_000 }).toMatch(/tokens\/s · first token in \d+ ms/);

    const expected = await runtimeGreedy(prompt, 24);
    const labels = tokenLabels(tokenizer);
    const chips = page.getByRole("list", { name: "Generated tokens" }).getByRole("listitem");
    await expect.poll(() => chips.count()).toBe(expected.length);
    expect(await chips.allInnerTexts()).toEqual(expected.map(labels.label));
    // Chips are the BPE tokens' texts (several bytes each, spaces shown as ␣), not bytes.
    expect(expected.map((token) => tokenizer.tokenText(token).length).some((length) => length > 1)).toBe(true);
    const last = expected.at(-1)!;
    const ended = tokenizer.stopTokens.includes(last);
    expect(ended || expected.length === 24).toBe(true);
    expect(await runtime.innerText()).toContain(ended ? `ended at ${tokenizer.tokenText(last)}` : "cut at the token limit");
    expect(await page.getByLabel("Generated text").textContent()).toBe(tokenizer.decode(expected, { skipSpecial: true }));

    // The prompt as the page sent it: the ChatML template's tokens.
    await page.getByText(/Prompt as the model read it/).click();
    const promptChips = page.getByRole("list", { name: "Prompt tokens" }).getByRole("listitem");
    expect(await promptChips.allInnerTexts()).toEqual(prompt.map(labels.label));
    expect((await promptChips.allInnerTexts()).join("")).toMatch(/^<\|im_start\|>system↵Answer␣briefly\.<\|im_end\|>↵<\|im_start\|>user↵/);

    await chips.first().getByRole("button").hover();
    const tooltip = page.getByRole("tooltip").first();
    await tooltip.waitFor({ state: "visible" });
    expect(await tooltip.innerText()).toContain("Most likely here");
    await page.mouse.move(0, 0);
    await tooltip.waitFor({ state: "hidden" });
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground-imported.png"), fullPage: true });
  });

  it("plays a run's own environment with the imported model, its BPE tokens held to the legal actions", async () => {
    const environment = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, string>({
  name: "climb",
  data: { kind: "free" },
  systemPrompt: "Say up.",
  maxTurns: 3,
  actions: ["up", "down", "stay"],
  reset: () => ({ state: { n: 0 }, observation: "at 0" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step(state, action) {
    const n = state.n + (action === "up" ? 1 : action === "down" ? -1 : 0);
    return { state: { n }, observation: "at " + n, reward: action === "up" ? 1 : 0, done: false };
  },
  render: (state) => "height " + state.n,
});
`;
    const { id } = await callProcedure<{ id: string }>(server, "experiments.create", {
      name: "climb",
      files: { "environment.ts": environment },
      config: {
        name: "climb",
        environment: "custom",
        protocol: { name: "multi-turn" },
        agent: { base: NAME, sampling: { maxTokens: 6 } },
        algorithm: { name: "grpo", steps: 1, groupSize: 2, groupsPerStep: 1 },
      },
    });
    const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
    await page.goto(`${server.url}/playground?mode=episode&run=${runId}&model=${NAME}`);
    await page.getByText(/climb of run .* \(its own code, sandboxed in this page\)/).waitFor({ timeout: 60_000 });
    const play = page.getByRole("button", { name: /^Play (an episode|again)$/ });
    await expect.poll(() => play.isEnabled(), { timeout: 60_000 }).toBe(true);
    await play.click();
    const outcome = page.getByLabel("Outcome");
    await outcome.waitFor({ timeout: 60_000 });
    expect(await outcome.textContent()).toMatch(/^3 turns/);
    expect(await outcome.textContent()).not.toMatch(/invalid/);
    const labels = tokenLabels(tokenizer);
    const turns = page.getByLabel("Turns").locator("> li");
    for (let turn = 1; turn <= 3; turn++) {
      const item = turns.nth(turn);
      expect(await item.textContent()).toContain(`Turn ${turn} · agent · the policy`);
      expect(await item.textContent()).not.toContain("Invalid");
      // The move in the model's own tokens, then its end of turn: only tokens spelling a legal action were allowed.
      const chips = await item.getByRole("list", { name: "Generated tokens" }).getByRole("listitem").allInnerTexts();
      expect(chips.at(-1)).toBe(labels.label(tokenizer.stopTokens[0]!));
      expect(["up", "down", "stay"]).toContain(chips.slice(0, -1).join(""));
    }
    await page.screenshot({ path: path.join(SCREENSHOTS, "episode-player-imported.png"), fullPage: true });
  }, 120_000);
});
