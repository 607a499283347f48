/**
 * Serving through the OpenAI-compatible endpoints, driven by the official `openai` client against the web server's
 * serving routes with the scheduler and a real worker process: a request for a model nobody serves starts an
 * inference job (503 and Retry-After while it loads, which the client waits out), and the job answers chat and
 * text completions, streamed or not, with usage, logprobs equal to the runtime's `forward`, several choices, seeded
 * reproducibly, for two adapters of one base at once, under a JSON schema, for a run's latest checkpoint as it
 * changes, and frees the row of a client that goes away. Bad requests get OpenAI's error object and leave the
 * service serving.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiKey, DEFAULT_PROJECT } from "@/server/auth";
import { checkpoints, type DatabaseHandle, LOCAL_USER } from "@/server/db";
import type { SessionMethod } from "@/server/jobs";
import { BaseModel, ByteTokenizer, specialTokens, TrainingClient } from "@/server/runtime";
import { saveTinyBase } from "../support/tiny-run";
import { callerFor, openTestDatabase } from "./support/database";
import { type ServingServer, startServingServer } from "./support/serving-server";

const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-serving-bases-"));
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-serving-artifacts-"));
process.env.TINKERLAB_BASES_DIR = basesDir;
// Serving jobs pause after 8 s without a request (the last test waits for it; the client's retries wait out a restart).
process.env.TINKERLAB_SERVE_IDLE_S = "8";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let server: ServingServer;
let client: OpenAI;
let apiKey: string;

/** A base whose context is long enough that a reply held to 1,000 letters is still being written when its client leaves. */
async function saveLongBase() {
  const base = BaseModel.create({ vocabSize: 262, contextLength: 1024, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 3 });
  await new TrainingClient(base).saveWeightsForSampler(path.join(basesDir, "long-base"));
}

beforeAll(async () => {
  await saveTinyBase(basesDir);
  await saveLongBase();
  db = await openTestDatabase();
  handle = db.handle;
  server = await startServingServer(handle, { basesDir, artifactsDir });
  ({ key: apiKey } = await createApiKey(handle.db, { userId: LOCAL_USER.id, name: "serving test", projectId: DEFAULT_PROJECT, role: "editor" }));
  // The client waits out the 503s a loading model answers (Retry-After), as any OpenAI client does.
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 40, timeout: 60_000 });
}, 120_000);

afterAll(async () => {
  await server?.close();
  await db?.close();
  fs.rmSync(artifactsDir, { recursive: true, force: true });
});

const tokenizer = new ByteTokenizer();
const specialByText = new Map(Object.values(specialTokens).map((id) => [tokenizer.decode([id]), id]));
/** A served token's id, from its text (the byte tokenizer: a byte, or a special token's name). */
const idOf = (token: { token: string; bytes?: number[] | null }) => specialByText.get(token.token) ?? token.bytes![0]!;

const messages = [{ role: "user" as const, content: "2+3=" }];

describe("serving through the OpenAI-compatible endpoints", () => {
  it("starts a job for a base nobody serves and answers a chat completion with usage", async () => {
    const first = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny-base", messages }),
    });
    expect(first.status).toBe(503);
    expect(first.headers.get("retry-after")).toBe("2");
    expect(((await first.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "model_loading",
      message: expect.stringMatching(/The model 'tiny-base' is loading: a worker is starting to serve 'tiny-base' \(run run_/),
    });

    const completion = await client.chat.completions.create({ model: "tiny-base", messages, max_tokens: 8, seed: 1 });
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]!.message.role).toBe("assistant");
    expect(["stop", "length"]).toContain(completion.choices[0]!.finish_reason);
    const promptTokens = tokenizer.encodeChat(messages, { addGenerationPrompt: true }).length;
    expect(completion.usage).toMatchObject({ prompt_tokens: promptTokens, total_tokens: promptTokens + completion.usage!.completion_tokens });
    expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
    expect(completion.usage!.completion_tokens).toBeLessThanOrEqual(8);

    // The job is a run of the project's "Serving" experiment.
    const status = (await (await fetch(`${server.url}/v1/serving`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as {
      data: { runId: string; base: string }[];
    };
    const serving = status.data.find((s) => s.base === "tiny-base")!;
    const run = await callerFor(handle).runs.byId({ id: serving.runId });
    expect(run).toMatchObject({ status: "running", experimentName: "Serving" });
  }, 120_000);

  it("streams the same answer as it sends whole, with usage at the end", async () => {
    const request = { model: "tiny-base", messages, max_tokens: 12, seed: 7, temperature: 1 };
    const whole = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.delta.content ?? "";
        finish = choice.finish_reason ?? finish;
      }
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
  }, 60_000);

  it("reports logprobs equal to the runtime's forward, reproduces a seeded request, and answers n choices", async () => {
    const request = { model: "tiny-base", messages, max_tokens: 10, seed: 42, temperature: 0.8, logprobs: true, top_logprobs: 3, n: 3 };
    const answer = await client.chat.completions.create(request);
    expect(answer.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(answer.usage!.completion_tokens).toBe(answer.choices.reduce((sum, c) => sum + c.logprobs!.content!.length, 0));
    const again = await client.chat.completions.create(request);
    expect(again.choices.map((c) => c.message.content)).toEqual(answer.choices.map((c) => c.message.content));
    expect(again.choices.map((c) => c.logprobs)).toEqual(answer.choices.map((c) => c.logprobs));

    const reference = new TrainingClient(BaseModel.load(path.join(basesDir, "tiny-base")));
    const prompt = tokenizer.encodeChat(messages, { addGenerationPrompt: true });
    for (const choice of answer.choices) {
      const served = choice.logprobs!.content!;
      const tokens = [...prompt, ...served.map(idOf)];
      const { logprobs } = await reference.forward({ tokens: [tokens] }, { temperature: 0.8 });
      served.forEach((token, i) => {
        expect(Math.abs(token.logprob - logprobs[0]![prompt.length + i]!)).toBeLessThan(1e-4);
        expect(token.top_logprobs).toHaveLength(3);
        expect(token.top_logprobs[0]!.logprob).toBeGreaterThanOrEqual(token.logprob - 1e-6);
      });
    }
  }, 60_000);

  it("answers a text completion of token ids with completion logprobs", async () => {
    const answer = await client.completions.create({ model: "tiny-base", prompt: "1+1=", max_tokens: 5, logprobs: 2, temperature: 0 });
    expect(answer.object).toBe("text_completion");
    const logprobs = answer.choices[0]!.logprobs!;
    expect(logprobs.tokens!.length).toBe(answer.usage!.completion_tokens);
    expect(Object.keys(logprobs.top_logprobs![0]!).length).toBeGreaterThanOrEqual(1);
    expect(answer.usage!.prompt_tokens).toBe(4);
  }, 60_000);

  it("holds a reply to a JSON schema, and to a choice list", async () => {
    const schema = {
      type: "object",
      properties: { ok: { type: "boolean" }, size: { enum: ["small", "large"] }, count: { type: "integer" } },
      required: ["ok", "size", "count"],
      additionalProperties: false,
    };
    const answer = await client.chat.completions.create({
      model: "tiny-base",
      messages: [{ role: "user", content: "json" }],
      seed: 3,
      response_format: { type: "json_schema", json_schema: { name: "reply", schema, strict: true } },
    });
    const parsed = JSON.parse(answer.choices[0]!.message.content!) as { ok: unknown; size: unknown; count: unknown };
    expect(typeof parsed.ok).toBe("boolean");
    expect(["small", "large"]).toContain(parsed.size);
    expect(Number.isInteger(parsed.count)).toBe(true);
    expect(answer.choices[0]!.finish_reason).toBe("stop");

    const choice = await client.chat.completions.create({
      model: "tiny-base",
      messages,
      seed: 4,
      guided_choice: ["yes", "no", "maybe"],
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(["yes", "no", "maybe"]).toContain(choice.choices[0]!.message.content);
  }, 60_000);

  it("refuses bad requests with OpenAI's error object and the right status, and goes on serving", async () => {
    const refusal = async (promise: Promise<unknown>) => {
      const error = await promise.then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OpenAI.APIError);
      return error as InstanceType<typeof OpenAI.APIError>;
    };
    const unknown = await refusal(client.chat.completions.create({ model: "no-such-model", messages }));
    expect(unknown.status).toBe(404);
    expect(unknown.code).toBe("model_not_found");
    expect(unknown.message).toMatch(/The model 'no-such-model' does not exist/);

    const long = await refusal(client.chat.completions.create({ model: "tiny-base", messages: [{ role: "user", content: "x".repeat(200) }] }));
    expect(long.status).toBe(400);
    expect(long.code).toBe("context_length_exceeded");
    expect(long.message).toMatch(/maximum context length is 48 tokens/);

    const tooMany = await refusal(client.chat.completions.create({ model: "tiny-base", messages, max_tokens: 100 }));
    expect(tooMany.status).toBe(400);
    expect(tooMany.param).toBe("max_tokens");

    const malformed = await refusal(client.chat.completions.create({ model: "tiny-base", messages: [{ role: "wizard", content: "hi" }] } as never));
    expect(malformed.status).toBe(400);
    expect(malformed.param).toBe("messages[0].role");

    const many = await refusal(client.chat.completions.create({ model: "tiny-base", messages, n: 99 }));
    expect(many.status).toBe(400);
    expect(many.message).toMatch(/n must be from 1 to 16/);

    const schema = await refusal(
      client.chat.completions.create({
        model: "tiny-base",
        messages,
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/definitions/a" } } },
      }),
    );
    expect(schema.status).toBe(400);
    expect(schema.message).toMatch(/'\$ref' is not supported/);

    const noKey = await fetch(`${server.url}/v1/models`, { headers: { authorization: "Bearer tl_not_a_key" } });
    expect(noKey.status).toBe(401);

    const fine = await client.chat.completions.create({ model: "tiny-base", messages, max_tokens: 3 });
    expect(fine.choices[0]!.message.content).toBeTypeOf("string");
  }, 60_000);

  it("frees the row of a client that leaves mid-stream", async () => {
    const before = await servedLoad("long-base");
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      // 1,000 letters and nothing shorter: the reply is still being written when the client leaves.
      { model: "long-base", messages, stream: true, guided_regex: "([a-z]{200}){5}" } as OpenAI.ChatCompletionCreateParamsStreaming,
      { signal: controller.signal },
    );
    let chunks = 0;
    try {
      for await (const _ of stream) if (++chunks === 3) controller.abort();
    } catch {
      // the abort ends the loop
    }
    expect(chunks).toBeGreaterThanOrEqual(3);
    let load = await servedLoad("long-base");
    for (let tries = 0; tries < 100 && (load.cancelled === (before?.cancelled ?? 0) || load.rows > 0); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      load = await servedLoad("long-base");
    }
    expect(load.cancelled).toBe((before?.cancelled ?? 0) + 1);
    expect(load.rows).toBe(0);
  }, 120_000);
});

type Load = { rows: number; cancelled: number; adapters: string[] };
async function servedLoad(base: string): Promise<Load> {
  const status = (await (await fetch(`${server.url}/v1/serving`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as {
    data: (Load & { base: string })[];
  };
  return status.data.find((s) => s.base === base) ?? { rows: 0, cancelled: 0, adapters: [] };
}

let callNumber = 0;
/** Calls a primitive of a remote session (its worker is this file's worker) and gives its result. */
async function invoke(sessionId: string, method: SessionMethod, args: Record<string, unknown>) {
  const answer = await callerFor(handle).sessions.invoke({ sessionId, callId: `serving-${method}-${++callNumber}-${sessionId}`, method, args, waitMs: 60_000 });
  if (answer.state !== "done") throw new Error(`${method}: ${answer.state} ${answer.error}`);
  return answer.result as { checkpointId?: string };
}

/** A LoRA session on tiny-base trained a few steps toward writing `text` after the chat prompt. */
async function trainedSession(seed: number, text: string, steps: number) {
  const { sessionId } = await callerFor(handle).sessions.create({ base: "tiny-base", seed, leaseSeconds: 120, lora: { rank: 4 } });
  await train(sessionId, text, steps);
  return sessionId;
}

async function train(sessionId: string, text: string, steps: number) {
  const prompt = tokenizer.encodeChat(messages, { addGenerationPrompt: true });
  const reply = tokenizer.encode(text);
  const tokens = [...prompt, ...reply];
  const weights = tokens.map((_, i) => (i >= prompt.length ? 1 : 0));
  for (let i = 0; i < steps; i++) {
    await invoke(sessionId, "forwardBackward", { batch: { tokens: [tokens], weights: [weights] }, loss: "cross_entropy" });
    await invoke(sessionId, "optimStep", { params: { lr: 0.05 } });
  }
}

describe("serving adapters of a base", () => {
  it("answers two adapters of one base at once, each with its own weights", async () => {
    const a = await trainedSession(11, "AAAA", 12);
    const b = await trainedSession(12, "BBBB", 12);
    const ckptA = (await invoke(a, "saveWeightsForSampler", {})).checkpointId!;
    const ckptB = (await invoke(b, "saveWeightsForSampler", {})).checkpointId!;
    const ask = (model: string) => client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
    await ask(ckptA); // the adapter's model loaded before the two go together
    const [answerA, answerB] = await Promise.all([ask(ckptA), ask(ckptB)]);
    // Each answers as its checkpoint does in the runtime, greedily: its own weights, not the other's.
    const own = async (checkpointId: string) => {
      const [row] = await handle.db.select({ path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.id, checkpointId));
      const reference = new TrainingClient(BaseModel.load(path.join(basesDir, "tiny-base")), { lora: { rank: 4 } });
      await reference.loadState(row!.path);
      const prompt = tokenizer.encodeChat(messages, { addGenerationPrompt: true });
      return (await reference.sample([prompt], 1, { maxTokens: 4, temperature: 0 })).samples[0]![0]!.text;
    };
    expect(answerA.choices[0]!.message.content).toBe(await own(ckptA));
    expect(answerB.choices[0]!.message.content).toBe(await own(ckptB));
    expect(answerA.choices[0]!.message.content).toMatch(/^AA/);
    expect(answerB.choices[0]!.message.content).toMatch(/^BB/);
    const load = await servedLoad("tiny-base");
    expect(load.adapters).toEqual(expect.arrayContaining([ckptA, ckptB]));
    await invoke(a, "close", {});
    await invoke(b, "close", {});
  }, 180_000);

  it("serves run_…:latest as the run saves newer checkpoints", async () => {
    const sessionId = await trainedSession(13, "CCCC", 0);
    const model = `${sessionId}:latest`;
    const ask = async () => (await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 })).choices[0]!.message.content;
    const untrained = await ask();
    await train(sessionId, "CCCC", 12);
    await invoke(sessionId, "saveWeightsForSampler", {});
    expect(await ask()).toBe("CCCC");
    expect(untrained).not.toBe("CCCC");
    await train(sessionId, "DDDD", 20);
    await invoke(sessionId, "saveWeightsForSampler", {});
    expect(await ask()).toBe("DDDD");
    await invoke(sessionId, "close", {});
  }, 180_000);
});

describe("an idle serving job", () => {
  it("ends paused, freeing its place, and the next request queues the same run again", async () => {
    await client.chat.completions.create({ model: "tiny-base", messages, max_tokens: 2 });
    const { runId } = (await servedStatus()).find((s) => s.base === "tiny-base")!;
    const caller = callerFor(handle);
    let run = await caller.runs.byId({ id: runId });
    for (let tries = 0; tries < 120 && run.status !== "paused"; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      run = await caller.runs.byId({ id: runId });
    }
    expect(run).toMatchObject({ status: "paused", reason: expect.stringMatching(/^idle for \d+ s; the next request starts it again$/) });
    expect((await servedStatus()).find((s) => s.base === "tiny-base")).toBeUndefined();
    // Its log says what it served and why it ended.
    const log = (await caller.runs.logs({ runId })).map((line) => line.message);
    expect(log).toContainEqual(expect.stringMatching(/^Served \d+ requests? and \d+ tokens in \d+ s \(\d+ tokens\/s\)\.$/));
    expect(log).toContainEqual(expect.stringMatching(/^Serving ended: idle for \d+ s; the next request starts it again\.$/));

    const again = await client.chat.completions.create({ model: "tiny-base", messages, max_tokens: 2 });
    expect(again.choices).toHaveLength(1);
    expect((await servedStatus()).find((s) => s.base === "tiny-base")!.runId).toBe(runId);
    expect(await caller.runs.byId({ id: runId })).toMatchObject({ status: "running" });
  }, 120_000);
});

async function servedStatus(): Promise<{ runId: string; base: string }[]> {
  return (
    (await (await fetch(`${server.url}/v1/serving`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as { data: { runId: string; base: string }[] }
  ).data;
}
