/**
 * `npm run bench:serve`: the OpenAI-compatible endpoint under load, through the real server and its worker.
 *
 * A server is started (`tinkerlab start` as a child process, one local worker), two LoRA adapters of a shipped
 * base are trained a few steps in remote sessions and saved, and then, with `--requests` streamed chat
 * completions per client (default 4) of `--tokens` new tokens each (default 64, `ignore_eos`, so every request
 * writes the same number):
 *   - the base at 1, 8 and 32 concurrent clients: requests/s, generated tokens/s, and the p50/p95 time to first
 *     token (from sending the request to its first token's chunk);
 *   - at 32 clients, all on one adapter, then half on each of the two (one batch of two adapters).
 * Each client sends its next request when the last has ended. The serving job is started and warmed first (the
 * 503s while it loads are not measured). The last line is JSON:
 * {"concurrency":[{"clients","tokens_per_s","ttft_p50_ms","ttft_p95_ms","requests_per_s"},…],"adapters_mixed_tokens_per_s",…}.
 * Targets (issue 43): tokens/s at 32 clients ≥ 4× one client's; p95 TTFT under 300 ms at 8 clients; two adapters
 * mixed ≥ 0.8× one adapter's tokens/s.
 */
import os from "node:os";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { createClient } from "../lib/client";
import { ByteTokenizer } from "../server/runtime";
import { ROOT, startServer, tempDir } from "../test/e2e/support/server";
import { formatTable, quantile } from "./lib/measure";

const option = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback);
const requestsPerClient = option("--requests", 4);
const newTokens = option("--tokens", 64);
const BASE = "generalist-base";
const messages = [{ role: "user", content: "Name a prime number." }];

type Sample = { ttftMs: number; tokens: number };

/** One streamed chat completion: its time to first token and the tokens it wrote (its usage). */
async function streamOnce(url: string, model: string): Promise<Sample> {
  const started = performance.now();
  for (;;) {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages, max_tokens: newTokens, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
    });
    if (response.status === 503) {
      await new Promise((resolve) => setTimeout(resolve, 1000 * Number(response.headers.get("retry-after") ?? 1)));
      continue;
    }
    if (!response.ok || !response.body) throw new Error(`${model}: ${response.status} ${await response.text()}`);
    let ttftMs = -1;
    let tokens = 0;
    let buffer = "";
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      buffer += decoder.decode(read.value, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = line.replace(/^data: /, "");
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data) as {
          error?: { message: string };
          choices: { delta: { content?: string; role?: string } }[];
          usage?: { completion_tokens: number } | null;
        };
        if (chunk.error) throw new Error(`${model}: ${chunk.error.message}`);
        // The first chunk after the role's: the first token's.
        if (ttftMs < 0 && chunk.choices.some((choice) => choice.delta.role === undefined)) ttftMs = performance.now() - started;
        if (chunk.usage) tokens = chunk.usage.completion_tokens;
      }
    }
    return { ttftMs, tokens };
  }
}

/** `clients` clients at once, each sending `requestsPerClient` requests one after another, client i on models[i % n]. */
async function load(url: string, models: string[], clients: number) {
  const started = performance.now();
  const samples = (
    await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        const mine: Sample[] = [];
        for (let r = 0; r < requestsPerClient; r++) mine.push(await streamOnce(url, models[i % models.length]!));
        return mine;
      }),
    )
  ).flat();
  const seconds = (performance.now() - started) / 1000;
  const ttfts = samples.map((s) => s.ttftMs);
  const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
  return {
    clients,
    requests_per_s: samples.length / seconds,
    tokens_per_s: tokens / seconds,
    ttft_p50_ms: quantile(ttfts, 0.5),
    ttft_p95_ms: quantile(ttfts, 0.95),
  };
}

/** A LoRA adapter of the base trained `steps` steps toward answering `text`, saved: its checkpoint id. */
async function trainedAdapter(client: ReturnType<typeof createClient>, seed: number, text: string, steps: number): Promise<string> {
  const tokenizer = new ByteTokenizer();
  const session = await client.training.create({ base: BASE, seed, leaseSeconds: 60, name: `bench-serve-${seed}`, lora: { rank: 8 } });
  const prompt = tokenizer.encodeChat([{ role: "user", content: messages[0]!.content }], { addGenerationPrompt: true });
  const tokens = [...prompt, ...tokenizer.encode(text)];
  const weights = tokens.map((_, i) => (i >= prompt.length ? 1 : 0));
  for (let step = 0; step < steps; step++) {
    await session.forwardBackward({ tokens: [tokens], weights: [weights] }, "cross_entropy");
    await session.optimStep({ lr: 0.01 });
  }
  const { checkpointId } = (await session.saveWeightsForSampler()) as { checkpointId: string };
  await session.close();
  return checkpointId;
}

buildIfStale(ROOT);
const server = await startServer({ ARTIFACTS_DIR: tempDir("bench-serve"), TINKERLAB_EXAMPLES: "off" });
try {
  const client = createClient({ url: server.url });
  const adapterA = await trainedAdapter(client, 1, "Seven.", 5);
  const adapterB = await trainedAdapter(client, 2, "Eleven.", 5);
  // Start and warm each model's serving (the job's load, the adapters' first read) before anything is measured.
  for (const model of [BASE, adapterA, adapterB]) await streamOnce(server.url, model);

  const concurrency = [];
  for (const clients of [1, 8, 32]) concurrency.push(await load(server.url, [BASE], clients));
  const single = await load(server.url, [adapterA], 32);
  const mixed = await load(server.url, [adapterA, adapterB], 32);

  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  console.log(
    `bench:serve on ${cpu} (${os.cpus().length} cores), load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  console.log(`${requestsPerClient} streamed chat completions of ${newTokens} tokens per client, ${BASE}\n`);
  console.log(
    formatTable(
      ["model", "clients", "requests/s", "tokens/s", "TTFT p50 ms", "TTFT p95 ms"],
      [
        ...concurrency.map((row) => [BASE, row.clients, row.requests_per_s, row.tokens_per_s, row.ttft_p50_ms, row.ttft_p95_ms]),
        ["one adapter", single.clients, single.requests_per_s, single.tokens_per_s, single.ttft_p50_ms, single.ttft_p95_ms],
        ["two adapters", mixed.clients, mixed.requests_per_s, mixed.tokens_per_s, mixed.ttft_p50_ms, mixed.ttft_p95_ms],
      ],
    ),
  );
  const one = concurrency[0]!.tokens_per_s;
  const at32 = concurrency[2]!.tokens_per_s;
  console.log(
    `\n32 clients / 1 client tokens/s: ${(at32 / one).toFixed(2)}x (target ≥ 4); p95 TTFT at 8 clients: ${concurrency[1]!.ttft_p95_ms.toFixed(0)} ms (target < 300); two adapters / one: ${(mixed.tokens_per_s / single.tokens_per_s).toFixed(2)}x (target ≥ 0.8)`,
  );
  const round = (n: number) => Math.round(n * 10) / 10;
  console.log(
    JSON.stringify({
      concurrency: concurrency.map((row) => ({
        clients: row.clients,
        tokens_per_s: round(row.tokens_per_s),
        ttft_p50_ms: round(row.ttft_p50_ms),
        ttft_p95_ms: round(row.ttft_p95_ms),
        requests_per_s: round(row.requests_per_s),
      })),
      adapters_mixed_tokens_per_s: round(mixed.tokens_per_s),
      adapter_single_tokens_per_s: round(single.tokens_per_s),
    }),
  );
} finally {
  await server.stop();
}
