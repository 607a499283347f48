/**
 * The request limits' table and how a request's URL maps to it (server/api/limits.ts), and the check for text
 * PostgreSQL cannot store (NUL, lone surrogates) that every procedure's input passes (server/api/trpc.ts). Over HTTP: test/integration/request-limits.test.ts and
 * test/integration/api-errors.test.ts.
 */
import superjson from "superjson";
import { describe, expect, it } from "vitest";
import { DEFAULT_REQUEST_LIMIT, formatBytes, REQUEST_LIMITS, requestLimit, trpcCallOf } from "@/server/api/limits";
import { findUnstorable, makeStorable } from "@/server/api/trpc";
import { MAX_DATASET_BYTES } from "@/server/datasets";

const MiB = 1024 * 1024;

describe("request limits", () => {
  it("reads the procedures a request calls from its URL", () => {
    const procedures = (url: string) => trpcCallOf(url)?.procedures ?? null;
    expect(trpcCallOf("/api/trpc/experiments.save")).toEqual({ procedures: ["experiments.save"], batch: false });
    expect(trpcCallOf("/api/trpc/worker.heartbeat,worker.report?batch=1")).toEqual({ procedures: ["worker.heartbeat", "worker.report"], batch: true });
    expect(procedures("/api/trpc/worker.heartbeat%2Cworker.report?batch=1")).toEqual(["worker.heartbeat", "worker.report"]);
    expect(procedures("/api//trpc/datasets.upload")).toEqual(["datasets.upload"]);
    expect(procedures("/runs/../api/trpc/datasets.upload")).toEqual(["datasets.upload"]);
    expect(trpcCallOf("/runs/run_1")).toBeNull();
    expect(trpcCallOf("/api/trpcx/datasets.upload")).toBeNull();
  });

  it("gives a batch the largest limit among its procedures, and anything else the default", () => {
    expect(requestLimit(["runs.control"], { worker: false })).toMatchObject({ bytes: 256 * 1024, procedure: "runs.control" });
    expect(requestLimit(["experiments.rename", "experiments.save"], { worker: false })).toMatchObject({ bytes: 2 * MiB, procedure: "experiments.save" });
    expect(requestLimit(["experiments.validate"], { worker: false }).bytes).toBe(2 * MiB);
    expect(requestLimit(null, { worker: false }).bytes).toBe(DEFAULT_REQUEST_LIMIT.bytes);
    expect(requestLimit(["no.such"], { worker: false }).bytes).toBe(DEFAULT_REQUEST_LIMIT.bytes);
    // Repeating a procedure buys nothing.
    expect(requestLimit(Array(100).fill("experiments.save"), { worker: false }).bytes).toBe(2 * MiB);
  });

  it("gives worker.report its limit only with the worker token", () => {
    expect(requestLimit(["worker.heartbeat", "worker.report"], { worker: true })).toMatchObject({ bytes: 64 * MiB, procedure: "worker.report" });
    expect(requestLimit(["worker.report"], { worker: false })).toMatchObject({
      bytes: DEFAULT_REQUEST_LIMIT.bytes,
      advice: expect.stringContaining("worker token (x-tinkerlab-worker-token) may send up to 64 MiB"),
    });
  });

  it("lets the largest dataset through, even one whose every character JSON escapes", () => {
    const limit = requestLimit(["datasets.upload"], { worker: false }).bytes;
    const row = `${JSON.stringify({
      messages: [
        { role: "user", content: 'Say "hi"\n\tplease' },
        { role: "assistant", content: "hi" },
      ],
    })}\n`;
    const worst = '"'.repeat(MAX_DATASET_BYTES);
    for (const text of [row.repeat(Math.floor(MAX_DATASET_BYTES / row.length)), worst]) {
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_DATASET_BYTES);
      const input = { name: "chat", description: "d".repeat(2000), format: "jsonl", text, testShare: 0.2 };
      const body = JSON.stringify({ 0: superjson.serialize(input) });
      expect(Buffer.byteLength(body)).toBeLessThanOrEqual(limit);
    }
  });

  it("says every limit in bytes a person reads", () => {
    expect(formatBytes(256 * 1024)).toBe("256 KiB");
    expect(formatBytes(2 * MiB)).toBe("2 MiB");
    expect(formatBytes(3_000_000)).toBe("2.9 MiB");
    expect(formatBytes(900)).toBe("900 bytes");
    for (const limit of Object.values(REQUEST_LIMITS)) expect(limit.bytes).toBeGreaterThan(DEFAULT_REQUEST_LIMIT.bytes);
  });
});

describe("text PostgreSQL cannot store, in inputs", () => {
  const where = (input: unknown) => findUnstorable(input)?.path ?? null;

  it("names where the first NUL or lone surrogate is, and why", () => {
    expect(findUnstorable({ id: "exp_1", files: { "environment.ts": "a\u0000b" }, config: {} })).toEqual({
      path: 'files["environment.ts"]',
      problem: "NUL characters (\\u0000) are not accepted",
    });
    expect(where({ config: { agent: { name: "x\u0000" } } })).toBe("config.agent.name");
    expect(where({ rollouts: [{ prompt: "ok" }, { prompt: "\u0000" }] })).toBe("rollouts[1].prompt");
    expect(where({ config: { "a\u0000b": 1 } })).toBe('config["a\\u0000b"] (a key)');
    expect(where("\u0000")).toBe("input");
    expect(where({ tags: new Set(["ok", "n\u0000"]) })).toBe("tags[1]");
    expect(findUnstorable({ config: { title: "half an emoji \ud83d" } })).toEqual({
      path: "config.title",
      problem: "lone UTF-16 surrogates (text that is not valid Unicode) are not accepted",
    });
    expect(findUnstorable({ id: "exp_1", n: 3, when: new Date(), nothing: null, files: { "a.ts": "fine 😀" } })).toBeNull();
  });

  it("walks a deeply nested input without overflowing the stack", () => {
    let deep: unknown = "\u0000";
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(where(deep)).toMatch(/^\[0\]/);
  });

  it("replaces them with U+FFFD in what workers send", () => {
    const report = { logs: [{ message: "a\u0000b" }], rollouts: [{ turns: [{ observation: "\u0000\ud800", info: { "k\u0000": "v" } }] }], step: 1 };
    expect(makeStorable(report)).toBe(3);
    expect(report).toEqual({ logs: [{ message: "a\uFFFDb" }], rollouts: [{ turns: [{ observation: "\uFFFD\uFFFD", info: { "k\uFFFD": "v" } }] }], step: 1 });
    expect(findUnstorable(report)).toBeNull();
  });
});
