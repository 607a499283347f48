/**
 * Supervised fine-tuning on a JSONL file of conversations through a server's remote training session: each line
 * `{"messages": [{"role": "system" | "user" | "assistant", "content": "…"}, …]}`, trained on the assistant's tokens
 * (lib/rl/sft's `sftStep`, as an SFT run trains). Prints the loss each step and saves the session as a checkpoint,
 * which any run can then use as its base.
 *
 *   npx tsx examples/remote-sft.ts data.jsonl [--url …] [--key tl_…] [--base generalist-base] [--steps 50] [--batch 16] [--lr 1e-3]
 */
import fs from "node:fs";
import { parseArgs } from "node:util";
import { createClient, type TinkerlabClient } from "tinkerlab/client";
import { fitConversations, parseConversations, sftBatch, sftStep } from "../lib/rl/sft";

export async function fineTuneRemotely(
  client: TinkerlabClient,
  jsonl: string,
  options: { base: string; steps: number; batchSize: number; learningRate: number; seed?: number },
  log: (line: string) => void = () => {},
) {
  const conversations = parseConversations(jsonl, "the JSONL file");
  const session = await client.createTrainingClient({ base: options.base, seed: options.seed ?? 0, name: "sft-remote" });
  log(`session ${session.sessionId}: ${client.url}/runs/${session.sessionId}`);
  try {
    const policy = { primitives: session, tokenizer: session.tokenizer, contextLength: session.contextLength };
    const { kept, dropped } = fitConversations(policy, conversations);
    if (dropped > 0) log(`${dropped} of ${conversations.length} conversations are longer than the context of ${session.contextLength} tokens; left out`);
    const losses: number[] = [];
    for (let step = 0; step < options.steps; step++) {
      const metrics = await sftStep(policy, sftBatch(kept, options.seed ?? 0, step, options.batchSize), { learningRate: options.learningRate });
      losses.push(metrics["loss/sft"]!);
      log(`step ${step + 1}: loss ${metrics["loss/sft"]!.toFixed(4)}`);
    }
    return { sessionId: session.sessionId, losses, saved: await session.close() };
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      url: { type: "string", default: process.env.TINKERLAB_URL ?? "http://localhost:3000" },
      key: { type: "string", default: process.env.TINKERLAB_API_KEY },
      base: { type: "string", default: "generalist-base" },
      steps: { type: "string", default: "50" },
      batch: { type: "string", default: "16" },
      lr: { type: "string", default: "1e-3" },
    },
  });
  if (positionals.length !== 1) throw new Error("give one JSONL file of conversations: npx tsx examples/remote-sft.ts data.jsonl");
  const client = createClient({ url: values.url!, apiKey: values.key });
  const { losses, saved } = await fineTuneRemotely(
    client,
    fs.readFileSync(positionals[0]!, "utf8"),
    { base: values.base!, steps: Number(values.steps), batchSize: Number(values.batch), learningRate: Number(values.lr) },
    console.log,
  );
  console.log(`loss ${losses[0]!.toFixed(4)} → ${losses.at(-1)!.toFixed(4)}; saved as ${saved.checkpointId} (a base for any run)`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
