/**
 * The playground in Chromium: a run's checkpoint-free base (tiny-base) exported to ONNX by the server and run in the
 * page's worker with onnxruntime-web, once on WebAssembly (the default context, --disable-gpu) and once where
 * Chromium offers a WebGPU adapter (--enable-unsafe-webgpu: without a GPU, its software one, SwiftShader): there the
 * page picks WASM by itself and says why, and runs on WebGPU when it is picked by hand, and back. The last position's
 * logits must equal the training runtime's to 1e-4, and greedy generation the runtime's greedy sample, token for token. Also: the page is cross-origin isolated (so WASM could
 * run threaded; a model as narrow as tiny-base decodes on one thread, decoding-threads.ts), the runtime's files come
 * from the app, and tokens stream in as chips with their alternatives.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodingThreads } from "@/components/playground/decoding-threads";
import { renderChat } from "@/lib/model/chat";
import { ByteTokenizer, specialTokens } from "@/lib/model/tokenizer";
import { saveTinyBase } from "@/test/support/tiny-run";
import { tokenLabel } from "@/components/playground/token-label";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { callAsWorker, claimJobAsWorker, launchBrowser, SCREENSHOTS, startServerWithRunForTestWorker, tempDir, type TestServer } from "./support/server";

const TOKEN = "playground-worker-token-0123456789";
const tokenizer = new ByteTokenizer();
let server: TestServer;
let runId: string;
let reference: BaseModel;

const chat = (system: string, user: string) =>
  renderChat(
    tokenizer,
    [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
    { addGenerationPrompt: true },
  ).tokens;

/** Token sequences whose last-position logits are compared: chat prompts, and raw ids with special tokens among them. */
const SEQUENCES = [
  chat("Answer with a number.", "What is 2+3?"),
  [specialTokens.bos],
  [specialTokens.bos, 72, 105, 33, specialTokens.endOfTurn, specialTokens.user, 0, 255, 32, 10],
  Array.from({ length: 40 }, (_, i) => (i * 37) % 262),
];
const PROMPTS = [chat("Answer with a number.", "What is 2+3?"), chat("", "hi")];

/** Logits after the last token, from the training runtime's forward pass. */
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
  ({ server, runId } = await startServerWithRunForTestWorker(TOKEN, "playground", { name: "grpo", steps: 10, groupSize: 2, groupsPerStep: 2 }));
  const { workerId, jobId } = await claimJobAsWorker(server, TOKEN);
  const rollouts = ["What is 2+3?", "What is 4+4?"].flatMap((task, g) =>
    [0, 1].map((i) => ({
      step: 1,
      split: "train" as const,
      groupIndex: g,
      sampleIndex: i,
      prompt: "Answer with a number.",
      turns: [{ observation: task, action: String(i), reward: i }],
      rewards: { correct: i },
      totalReward: i,
      advantage: i - 0.5,
      tokens: [48 + i, specialTokens.endOfTurn],
      tokenLogprobs: [-0.5, -0.1],
    })),
  );
  await callAsWorker(server, TOKEN, "worker.report", { workerId, jobId, step: 1, metrics: [], rollouts });
  await callAsWorker(server, TOKEN, "worker.finish", { workerId, jobId, outcome: "completed", reason: null });
  // The same tiny base the server was given (saveTinyBase is seeded), loaded here as the runtime loads it.
  const dir = tempDir("reference");
  await saveTinyBase(dir);
  reference = BaseModel.load(path.join(dir, "tiny-base"));
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);
afterAll(async () => {
  await server?.stop();
});

/** Opens the playground on tiny-base and waits for its model; returns the backend the page reports. */
async function openPlayground(page: Page): Promise<string> {
  const response = await page.goto(`${server.url}/playground?model=tiny-base&run=${runId}`);
  expect(response?.headers()["cross-origin-opener-policy"]).toBe("same-origin");
  expect(response?.headers()["cross-origin-embedder-policy"]).toBe("require-corp");
  await page.waitForFunction(() => window.__tinkerlabPlayground !== undefined, null, { timeout: 60_000 });
  const { backend } = await page.evaluate(() => window.__tinkerlabPlayground!.ready);
  await expect.poll(() => page.getByLabel("Runtime").innerText(), { timeout: 30_000 }).toContain(backend);
  return backend;
}

/** Last-position logits and greedy generations in the page against the runtime; returns the largest logit difference. */
async function checkParity(page: Page): Promise<number> {
  let worst = 0;
  for (const tokens of SEQUENCES) {
    const logits = await page.evaluate((ids) => window.__tinkerlabPlayground!.logits(ids), tokens);
    worst = Math.max(worst, maxAbsDiff(logits, runtimeLogits(tokens)));
  }
  expect(worst).toBeLessThan(1e-4);
  for (const prompt of PROMPTS) {
    const maxTokens = 48 - prompt.length + 4; // past the context, so the limit there is checked too
    const generated = await page.evaluate(([ids, max]) => window.__tinkerlabPlayground!.generate(ids, { maxTokens: max, temperature: 0 }), [
      prompt,
      maxTokens,
    ] as const);
    expect(generated.tokens).toEqual(await runtimeGreedy(prompt, maxTokens));
    expect(generated.tokensPerSecond).toBeGreaterThan(0);
  }
  return worst;
}

describe("the playground on WebAssembly", () => {
  let browser: BrowserContext;
  let page: Page;
  beforeAll(async () => {
    browser = await launchBrowser();
    page = await browser.newPage();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("serves onnxruntime-web's files itself, with the headers a cross-origin-isolated worker needs", async () => {
    const version = JSON.parse(fs.readFileSync(path.join(__dirname, "../../node_modules/onnxruntime-web/package.json"), "utf8")).version;
    const wasm = await fetch(`${server.url}/ort/${version}/ort-wasm-simd-threaded.jsep.wasm`);
    expect(wasm.status).toBe(200);
    expect(wasm.headers.get("content-type")).toBe("application/wasm");
    expect(wasm.headers.get("cross-origin-embedder-policy")).toBe("require-corp");
    expect(new Uint8Array(await wasm.arrayBuffer()).subarray(0, 4)).toEqual(new Uint8Array([0, 0x61, 0x73, 0x6d]));
    for (const file of ["ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.jsep.mjs"]) {
      const loader = await fetch(`${server.url}/ort/${version}/${file}`, { method: "HEAD" });
      expect(loader.headers.get("content-type")).toMatch(/^text\/javascript/);
    }
    expect((await fetch(`${server.url}/ort/${version}/ort.node.min.mjs`)).status).toBe(404);
    expect((await fetch(`${server.url}/ort/0.0.1/ort-wasm-simd-threaded.jsep.wasm`)).status).toBe(404);
    // Only the playground is isolated: other pages keep their ordinary headers.
    expect((await fetch(`${server.url}/runs`)).headers.get("cross-origin-opener-policy")).toBeNull();
  });

  it("runs tiny-base on WASM, on one thread, with the runtime's logits and greedy tokens", async () => {
    const requested: string[] = [];
    browser.on("request", (request) => requested.push(request.url()));
    const backend = await openPlayground(page);
    // Everything comes from the app; the worker takes the runtime from its /ort route, not from a bundler's copy.
    expect(requested.filter((url) => !url.startsWith(`${server.url}/`) && !url.startsWith("blob:"))).toEqual([]);
    const runtimeFiles = requested.map((url) => new URL(url).pathname).filter((url) => url.includes("ort-wasm"));
    expect(runtimeFiles.every((url) => url.startsWith("/ort/"))).toBe(true);
    expect(new Set(runtimeFiles.map((url) => url.split("/").at(-1)))).toEqual(new Set(["ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"]));
    expect(await page.evaluate(() => window.crossOriginIsolated)).toBe(true);
    // isolated, so threads could run; a model this narrow decodes fastest on one
    expect(decodingThreads(reference.config, 4)).toBe(1);
    expect(backend).toBe("WASM, 1 thread (no WebGPU adapter)");
    const worst = await checkParity(page);
    console.log(`playground parity on ${backend}: max |logit difference| ${worst.toExponential(2)}`);
  });

  it("reloads itself once when reached by an in-app link, to get the isolation headers", async () => {
    await page.goto(`${server.url}/runs`);
    expect(await page.evaluate(() => window.crossOriginIsolated)).toBe(false);
    // A client-side navigation, as a <Link> makes: the document (and its headers) stay those of /runs.
    await page.evaluate(() => (window as unknown as { next: { router: { push(href: string): void } } }).next.router.push("/playground?model=tiny-base"));
    await page.waitForFunction(() => window.__tinkerlabPlayground !== undefined, null, { timeout: 60_000 });
    expect(await page.evaluate(() => window.crossOriginIsolated)).toBe(true);
    expect((await page.evaluate(() => window.__tinkerlabPlayground!.ready)).backend).toMatch(/^WASM, \d threads? \(no WebGPU adapter\)$/);
  });

  it("streams a generation from a run's observation as chips with their alternatives", async () => {
    await openPlayground(page);
    const form = page.getByRole("form", { name: "Generate" });
    await form.getByLabel(`Observation from run ${runId}`).selectOption({ label: "group 0, sample 0: What is 2+3?" });
    expect(await form.getByRole("textbox", { name: "System" }).inputValue()).toBe("Answer with a number.");
    expect(await form.getByRole("textbox", { name: "User" }).inputValue()).toBe("What is 2+3?");
    await form.getByLabel("Temperature").fill("0");
    await form.getByLabel("Max tokens").fill("12"); // past the context's room (10 tokens): generation stops there
    await form.getByRole("button", { name: "Generate" }).click();
    await expect.poll(() => page.getByLabel("Runtime").innerText(), { timeout: 30_000 }).toMatch(/tokens\/s · first token in \d+ ms/);

    const expected = await runtimeGreedy(chat("Answer with a number.", "What is 2+3?"), 12);
    const chips = page.getByRole("list", { name: "Generated tokens" }).getByRole("listitem");
    await expect.poll(() => chips.count()).toBe(expected.length);
    expect(await chips.allInnerTexts()).toEqual(expected.map(tokenLabel));
    const first = chips.first().getByRole("button");
    await first.hover();
    const tooltip = page.getByRole("tooltip").first();
    await tooltip.waitFor({ state: "visible" });
    expect(await tooltip.innerText()).toContain("Most likely here");
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground.png"), fullPage: true });
  });
});

describe("the playground where WebGPU's adapter may be a software one", () => {
  let browser: BrowserContext;
  let page: Page;
  let adapter: { kind: "none" | "hardware" | "software"; name: string };
  beforeAll(async () => {
    browser = await launchBrowser(["--enable-unsafe-webgpu"]);
    page = await browser.newPage();
  });
  afterAll(async () => {
    await browser?.close();
  });

  /** The backend of the page's model once it is `expected`'s (a switch starts a new worker; its hook replaces the old). */
  const backendOnceReady = async (expected: RegExp) => {
    await expect
      .poll(
        async () => {
          await page.waitForFunction(() => window.__tinkerlabPlayground !== undefined, null, { timeout: 60_000 });
          return (await page.evaluate(() => window.__tinkerlabPlayground!.ready)).backend;
        },
        { timeout: 90_000, interval: 500 },
      )
      .toMatch(expected);
    const { backend } = await page.evaluate(() => window.__tinkerlabPlayground!.ready);
    await expect.poll(() => page.getByLabel("Runtime").innerText(), { timeout: 30_000 }).toContain(backend);
    return backend;
  };
  const picker = () => page.getByRole("combobox", { name: "Backend" });

  it("picks WASM over a software WebGPU adapter by itself, and says so", async () => {
    const requested: string[] = [];
    browser.on("request", (request) => requested.push(new URL(request.url()).pathname));
    const backend = await openPlayground(page);
    adapter = await page.evaluate(async () => {
      type Adapter = { info?: { vendor?: string; architecture?: string; isFallbackAdapter?: boolean } };
      const gpu = (navigator as unknown as { gpu?: { requestAdapter(): Promise<Adapter | null> } }).gpu;
      const found = await gpu?.requestAdapter();
      if (!found) return { kind: "none" as const, name: "" };
      const name = [found.info?.vendor, found.info?.architecture].filter(Boolean).join(" ");
      return { kind: found.info?.isFallbackAdapter || /swiftshader|llvmpipe/i.test(name) ? ("software" as const) : ("hardware" as const), name };
    });
    console.log(`WebGPU adapter with --enable-unsafe-webgpu: ${adapter.kind} ${adapter.name}; automatic backend: ${backend}`);
    if (adapter.kind === "software") {
      expect(backend).toMatch(new RegExp(`^WASM, \\d threads? \\(WebGPU's only adapter runs in software \\(${adapter.name}\\), slower than WASM\\)$`));
      // The plain WebAssembly build: the JSEP build WebGPU needs is not even downloaded.
      expect(requested.filter((url) => url.includes("ort-wasm")).some((url) => url.includes(".jsep."))).toBe(false);
    } else if (adapter.kind === "hardware") expect(backend).toBe("WebGPU");
    else expect(backend).toMatch(/^WASM, \d threads? \((this browser has no WebGPU|no WebGPU adapter)/);
    expect(await picker().inputValue()).toBe("auto");
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground-auto-backend.png"), fullPage: true });
    const worst = await checkParity(page);
    console.log(`playground parity on ${backend}: max |logit difference| ${worst.toExponential(2)}`);
  });

  it("switches to WebGPU by hand, keeps it in the address and the browser, and runs the runtime's logits there", async ({ skip }) => {
    if (adapter.kind === "none") skip("this Chromium offers no WebGPU adapter even with --enable-unsafe-webgpu");
    await picker().selectOption("webgpu");
    const backend = await backendOnceReady(/^WebGPU/);
    if (adapter.kind === "software") expect(backend).toBe(`WebGPU (chosen by hand; its adapter runs in software (${adapter.name}))`);
    expect(new URL(page.url()).searchParams.get("backend")).toBe("webgpu");
    const worst = await checkParity(page);
    console.log(`playground parity on ${backend}: max |logit difference| ${worst.toExponential(2)}`);
    // Opened again without the parameter: the browser remembers the choice.
    await page.goto(`${server.url}/playground?model=tiny-base&run=${runId}`);
    expect(await backendOnceReady(/^WebGPU/)).toBe(backend);
    expect(await picker().inputValue()).toBe("webgpu");
  });

  it("stops a generation between two tokens", async () => {
    const form = page.getByRole("form", { name: "Generate" });
    await form.getByRole("textbox", { name: "System" }).fill("");
    await form.getByRole("textbox", { name: "User" }).fill("Count.");
    await form.getByLabel("Temperature").fill("0");
    await form.getByLabel("Max tokens").fill("40");
    await form.getByRole("button", { name: "Generate" }).click();
    const chips = page.getByRole("list", { name: "Generated tokens" }).getByRole("listitem");
    await chips.first().waitFor();
    // The generation may have ended before the click lands (Stop is then disabled): the checks below hold either way.
    await form
      .getByRole("button", { name: "Stop" })
      .click({ timeout: 2_000 })
      .catch(() => {});
    await expect.poll(() => page.getByLabel("Runtime").innerText(), { timeout: 30_000 }).toMatch(/tokens\/s/);
    const shown = await chips.allInnerTexts();
    const greedy = (await runtimeGreedy(chat("", "Count."), 40)).map(tokenLabel);
    // On a fast GPU the generation may end before Stop lands; on SwiftShader (about 20 tokens/s) it is stopped.
    if (shown.length < greedy.length) expect(await page.getByLabel("Runtime").innerText()).toContain("stopped");
    expect(shown).toEqual(greedy.slice(0, shown.length));
    // The chips' hidden tooltips take no room: a row of chips reaching the card's edge does not widen the page.
    expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBe(0);
    await page.screenshot({ path: path.join(SCREENSHOTS, "playground-webgpu.png"), fullPage: true });
  });

  it("goes back to the automatic choice, which the address and the browser then forget", async () => {
    await picker().selectOption("auto");
    const backend = await backendOnceReady(adapter.kind === "hardware" ? /^WebGPU$/ : /^WASM/);
    expect(new URL(page.url()).searchParams.has("backend")).toBe(false);
    await page.reload();
    expect(await backendOnceReady(adapter.kind === "hardware" ? /^WebGPU$/ : /^WASM/)).toBe(backend);
    expect(await picker().inputValue()).toBe("auto");
  });
});
