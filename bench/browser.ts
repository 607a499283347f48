/**
 * `npm run bench:browser`: a policy running in the browser against the same policy on the server.
 *
 * For each shipped base (lib/envs/bases), in headless Chromium on the playground page (`tinkerlab start` as a child
 * process, the app's own build):
 *   - tokens/s on WASM (the default context, --disable-gpu) and on WebGPU (--enable-unsafe-webgpu; without a GPU,
 *     Chromium's adapter is SwiftShader, WebGPU emulated on the CPU, which the table says),
 *   - the server runtime's single-stream sampling tokens/s on the same weights, in this process, in the same run,
 *   - the first token's time on a warm page (model loaded, one generation done) and from opening the page.
 *
 * Tokens/s: from the `<|bos|>` token, greedy, with no stop token, `--tokens` new tokens per call (default 64, fewer
 * where the context is shorter), repeated for `--seconds` (default 2, two calls at least) after 1.5 s of warm-up
 * calls; new tokens over the calls' time, the prompt's forward pass included, on both sides. WASM and the server are
 * measured by turns, `--rounds` times (default 3): each figure is the median of its turns, and WASM / server the
 * median of each round's ratio, so a machine whose load changes from one minute to the next weighs on both sides of
 * a ratio alike. First token: the median of five generations from a short chat prompt.
 * `--no-webgpu` skips the WebGPU context (on a machine without a GPU its software adapter takes minutes a base and
 * says nothing about a GPU); its column then reads "skipped".
 * The last line is JSON: {"models":[{"name", "wasm_tokens_per_s", "webgpu_tokens_per_s", "server_tokens_per_s",
 * "wasm_server_ratio", "first_token_ms"}]}.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { renderChat } from "../lib/model/chat";
import { ByteTokenizer, specialTokens } from "../lib/model/tokenizer";
import { BaseModel, initBackend, TrainingClient } from "../server/runtime";
import { launchBrowser, startServer, tempDir } from "../test/e2e/support/server";
import { formatTable, median } from "./lib/measure";

const root = path.resolve(import.meta.dirname, "..");
const option = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback);
const seconds = option("--seconds", 2);
const tokensPerCall = option("--tokens", 64);
const rounds = Math.max(1, option("--rounds", 3));
const withWebGpu = !process.argv.includes("--no-webgpu");
const basesDir = path.join(root, "lib", "envs", "bases");
const bases = fs
  .readdirSync(basesDir)
  .filter((name) => fs.existsSync(path.join(basesDir, name, "manifest.json")))
  .sort();

const tokenizer = new ByteTokenizer();
/** The first-token prompt: a short chat turn, which fits every base's context. */
const CHAT_PROMPT = renderChat(
  tokenizer,
  [
    { role: "system", content: "Add." },
    { role: "user", content: "12+7" },
  ],
  { addGenerationPrompt: true },
).tokens;
const FILL_PROMPT = [specialTokens.bos];

type Rate = { tokens: number; seconds: number };
const rate = (calls: Rate[]) => calls.reduce((sum, c) => sum + c.tokens, 0) / calls.reduce((sum, c) => sum + c.seconds, 0);

/**
 * Calls `generate` for a warm-up second and a half (once at least), then for `seconds` (twice at least); returns new
 * tokens per second over the measured calls. The warm-up matters in the browser: V8 compiles WebAssembly with a
 * baseline compiler and optimizes hot code in the background, and a cold page decoded at a fifth of the speed it
 * reached after about a second.
 */
async function measure(generate: () => Promise<Rate>): Promise<number> {
  const warm = performance.now();
  do await generate();
  while (performance.now() - warm < 1500);
  const calls: Rate[] = [];
  const start = performance.now();
  while (performance.now() - start < seconds * 1000 || calls.length < 2) calls.push(await generate());
  return rate(calls);
}

async function serverTokensPerSecond(name: string): Promise<number> {
  const client = new TrainingClient(BaseModel.load(path.join(basesDir, name)));
  const maxTokens = Math.min(tokensPerCall, client.base.config.contextLength);
  return measure(async () => {
    const start = performance.now();
    const { samples } = await client.sample([FILL_PROMPT], 1, { temperature: 0, maxTokens, stop: [] });
    return { tokens: samples[0]![0]!.tokens.length, seconds: (performance.now() - start) / 1000 };
  });
}

type BrowserFigures = { backend: string; adapter: string; tokensPerSecond: number; firstTokenMs: number; openToFirstTokenMs: number };

/** Tokens/s of the page's loaded model (see the header). */
function browserTokensPerSecond(page: Page, contextLength: number): Promise<number> {
  return measure(async () => {
    const generated = await page.evaluate(([ids, max]) => window.__tinkerlabPlayground!.generate(ids, { maxTokens: max, temperature: 0, stop: [] }), [
      FILL_PROMPT,
      Math.min(tokensPerCall, contextLength),
    ] as const);
    return { tokens: generated.tokens.length, seconds: generated.tokens.length / generated.tokensPerSecond };
  });
}

/** Opens the playground on the base and times its first tokens, and its tokens/s unless `rate` is false (then NaN). */
async function inBrowser(page: Page, url: string, name: string, contextLength: number, rate = true): Promise<BrowserFigures> {
  const opened = performance.now();
  await page.goto(`${url}/playground?model=${name}&backend=webgpu`); // WebGPU wherever the context offers an adapter, SwiftShader's too
  await page.waitForFunction(() => window.__tinkerlabPlayground !== undefined, null, { timeout: 120_000 });
  const { backend } = await page.evaluate(() => window.__tinkerlabPlayground!.ready);
  await page.evaluate((ids) => window.__tinkerlabPlayground!.generate(ids, { maxTokens: 1, temperature: 0 }), CHAT_PROMPT);
  const openToFirstTokenMs = performance.now() - opened;
  const adapter = await page.evaluate(async () => {
    type Adapter = { info?: { architecture?: string; isFallbackAdapter?: boolean } };
    const gpu = (navigator as unknown as { gpu?: { requestAdapter(): Promise<Adapter | null> } }).gpu;
    const found = await gpu?.requestAdapter();
    if (!found) return "none";
    return `${found.info?.architecture || "unknown"}${found.info?.isFallbackAdapter ? " (fallback, CPU)" : ""}`;
  });
  const firstTokens: number[] = [];
  for (let i = 0; i < 5; i++) {
    const { firstTokenMs } = await page.evaluate((ids) => window.__tinkerlabPlayground!.generate(ids, { maxTokens: 1, temperature: 0 }), CHAT_PROMPT);
    firstTokens.push(firstTokenMs);
  }
  const tokensPerSecond = rate ? await browserTokensPerSecond(page, contextLength) : Number.NaN;
  return { backend, adapter, tokensPerSecond, firstTokenMs: median(firstTokens), openToFirstTokenMs };
}

buildIfStale(root);
const loadBefore = os.loadavg()[0]!;
const backend = await initBackend();
const server = await startServer({
  TINKERLAB_BASES_DIR: basesDir,
  TINKERLAB_EXAMPLES: "off",
  TINKERLAB_LOCAL_WORKERS: "0",
  ARTIFACTS_DIR: tempDir("bench-browser-artifacts"),
});
const contexts: { wasm: BrowserContext; webgpu: BrowserContext | null } = {
  wasm: await launchBrowser(),
  webgpu: withWebGpu ? await launchBrowser(["--enable-unsafe-webgpu"]) : null,
};
const pages: { wasm: Page; webgpu: Page | null } = { wasm: await contexts.wasm.newPage(), webgpu: (await contexts.webgpu?.newPage()) ?? null };
const userAgent = await pages.wasm.evaluate(() => navigator.userAgent);

/** A backend that fails on one base (a GPU process lost, say) is reported as such rather than ending the bench. */
async function attempt<T>(what: string, run: () => Promise<T>): Promise<T | null> {
  try {
    return await run();
  } catch (error) {
    console.error(`${what} failed: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
    return null;
  }
}

const results: {
  name: string;
  parameters: number;
  wasm: BrowserFigures | null;
  webgpu: BrowserFigures | null;
  server: number;
  ratio: number | null;
}[] = [];
try {
  for (const name of bases) {
    const config = JSON.parse(fs.readFileSync(path.join(basesDir, name, "model_config.json"), "utf8"));
    const parameters = BaseModel.load(path.join(basesDir, name)).parameterCount();
    const wasm = await attempt(`${name} on WASM`, () => inBrowser(pages.wasm, server.url, name, config.contextLength, false));
    const webgpuContext = contexts.webgpu;
    const webgpu = webgpuContext
      ? await attempt(`${name} on WebGPU`, async () => {
          if (!pages.webgpu || pages.webgpu.isClosed()) pages.webgpu = await webgpuContext.newPage();
          return inBrowser(pages.webgpu, server.url, name, config.contextLength);
        })
      : null;
    // WASM and the server by turns: each ratio compares two windows a few seconds apart
    const turns: { server: number; wasm: number | null }[] = [];
    for (let round = 0; round < rounds; round++) {
      const serverTurn = await serverTokensPerSecond(name);
      const wasmTurn = wasm ? await attempt(`${name} on WASM`, () => browserTokensPerSecond(pages.wasm, config.contextLength)) : null;
      turns.push({ server: serverTurn, wasm: wasmTurn });
    }
    const wasmTurns = turns.flatMap((t) => (t.wasm === null ? [] : [t.wasm]));
    if (wasm) wasm.tokensPerSecond = wasmTurns.length ? median(wasmTurns) : Number.NaN;
    const ratios = turns.flatMap((t) => (t.wasm === null ? [] : [t.wasm / t.server]));
    const serverRate = median(turns.map((t) => t.server));
    results.push({ name, parameters, wasm: wasm && wasmTurns.length ? wasm : null, webgpu, server: serverRate, ratio: ratios.length ? median(ratios) : null });
    const rateOf = (figures: BrowserFigures | null) => (figures ? `${figures.backend} ${figures.tokensPerSecond.toFixed(0)} tok/s` : "failed");
    const webgpuRate = withWebGpu ? rateOf(webgpu) : "WebGPU skipped";
    console.error(`${name}: ${rateOf(wasm)}, ${webgpuRate}, server ${serverRate.toFixed(0)} tok/s`);
  }
} finally {
  await contexts.wasm.close();
  await contexts.webgpu?.close();
  await server.stop();
}

const wasmRun = results.find((r) => r.wasm)?.wasm;
const webgpuRun = results.find((r) => r.webgpu)?.webgpu;
console.log(
  `${userAgent.match(/Chrome\/[\d.]+/)?.[0] ?? userAgent}, headless · WASM context: ${wasmRun?.backend ?? "failed"} · WebGPU context: ${withWebGpu ? `${webgpuRun?.backend ?? "failed"}, adapter ${webgpuRun?.adapter ?? "?"}` : "skipped (--no-webgpu)"}`,
);
console.log(
  `server runtime: ${backend.capabilities.backend}${backend.capabilities.kernel ? ` (${backend.capabilities.kernel})` : ""}, ${os.cpus().length} cores`,
);
console.log(`load average (1 min): ${loadBefore.toFixed(2)} before, ${os.loadavg()[0]!.toFixed(2)} after`);
console.log(
  formatTable(
    [
      "base",
      "params",
      "WASM tok/s",
      "WebGPU tok/s",
      "server tok/s",
      "WASM / server",
      "first token ms (warm, WASM)",
      "first token ms (warm, WebGPU)",
      "open → first token ms (WASM)",
    ],
    results.map((r) => [
      r.name,
      r.parameters,
      r.wasm?.tokensPerSecond ?? "failed",
      r.webgpu?.tokensPerSecond ?? (withWebGpu ? "failed" : "skipped"),
      r.server,
      r.ratio ?? "-",
      r.wasm?.firstTokenMs ?? "-",
      r.webgpu?.firstTokenMs ?? "-",
      r.wasm?.openToFirstTokenMs ?? "-",
    ]),
  ),
);
const round = (x: number) => Math.round(x * 10) / 10;
console.log(
  JSON.stringify({
    models: results.map((r) => ({
      name: r.name,
      wasm_tokens_per_s: r.wasm ? round(r.wasm.tokensPerSecond) : null,
      webgpu_tokens_per_s: r.webgpu?.backend.startsWith("WebGPU") ? round(r.webgpu.tokensPerSecond) : null,
      server_tokens_per_s: round(r.server),
      wasm_server_ratio: r.ratio === null ? null : Math.round(r.ratio * 100) / 100,
      first_token_ms: r.wasm ? round(r.wasm.firstTokenMs) : null,
    })),
  }),
);
process.exit(0);
