/**
 * Request limits (server/api/limits.ts, docs/RUNTIME.md "Request limits"), over real HTTP: the web server's gate
 * answers a call over its procedure's limit with 413 before any of it reaches tRPC, cuts off a streamed body as soon
 * as it passes the limit, refuses a batch of more calls than the cap with 400, and the tRPC route holds the same
 * limits when Next.js runs without the gate; our clients split their batches at the cap.
 */
import http from "node:http";
import { TRPCClientError } from "@trpc/client";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST } from "@/app/api/trpc/[trpc]/route";
import { MAX_BATCH_CALLS } from "@/lib/trpc/limits";
import { setWorkerToken } from "@/server/api/routers/worker";
import { setDatabase } from "@/server/db";
import { experiments, experimentVersions } from "@/server/db/schema";
import { createWorkerApi } from "@/server/worker/worker-api";
import { type ApiServer, startApiServer } from "./support/api-server";
import { openTestDatabase } from "./support/database";

const MiB = 1024 * 1024;
const SAVE_LIMIT = 2 * MiB;

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let server: ApiServer;
beforeAll(async () => {
  db = await openTestDatabase();
  setDatabase(db.handle);
  server = await startApiServer();
});
afterAll(async () => {
  await server?.close();
  await db?.close();
});

const versionsOf = async (id: string) =>
  (await db.handle.db.select({ version: experimentVersions.version }).from(experimentVersions).where(eq(experimentVersions.experimentId, id))).length;

/** Source files of about `bytes` in all, each under the 256 KiB a file may hold. */
function sourceOf(bytes: number): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; bytes > 0; i++, bytes -= 250_000) files[`part${i}.ts`] = `// ${"x".repeat(Math.min(bytes, 250_000))}\n`;
  return files;
}

/** A tRPC batch body of one call, as httpBatchLink sends it with superjson. */
const batchBody = (input: unknown) => JSON.stringify({ 0: { json: input } });

const testConfig = { name: "big", environment: "custom", agent: { base: "generalist-base" } };

describe("request limits", () => {
  it("answers a 3 MB experiments.save with 413 naming the 2 MiB limit, and stores nothing", async () => {
    const client = server.client();
    const { id } = await client.experiments.create.mutate({ name: "too-big", files: { "environment.ts": "export default 1;" } });
    const routed = server.stats.routed;
    const error = await client.experiments.save.mutate({ id, files: sourceOf(3_000_000), config: testConfig }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TRPCClientError);
    const clientError = error as { message: string; data: unknown };
    expect(clientError.data).toMatchObject({ code: "PAYLOAD_TOO_LARGE", httpStatus: 413, path: "experiments.save", limitBytes: SAVE_LIMIT, limit: "2 MiB" });
    expect(clientError.message).toContain("experiments.save accepts at most 2 MiB (2097152 bytes) in one request");
    expect(clientError.message).toContain("put large data in a dataset");
    expect(server.stats.routed).toBe(routed);
    expect(await versionsOf(id)).toBe(1);

    // The same answer to any HTTP client: JSON, status 413.
    const response = await fetch(`${server.url}/api/trpc/experiments.save`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: batchBody({ id, files: sourceOf(3_000_000), config: {} }),
    });
    expect(response.status).toBe(413);
    const body = (await response.json()) as { error: { json: { message: string; data: { limitBytes: number; requestBytes: number } } } };
    expect(body.error.json.data).toMatchObject({ limitBytes: SAVE_LIMIT });
    expect(body.error.json.data.requestBytes).toBeGreaterThan(3_000_000);
    expect(await versionsOf(id)).toBe(1);
  });

  it("lets a 1.5 MB save through, sent with a length or streamed in chunks", async () => {
    const client = server.client();
    const { id } = await client.experiments.create.mutate({ name: "large-but-fine" });
    expect(await client.experiments.save.mutate({ id, files: sourceOf(1_500_000), config: { ...testConfig, algorithm: { steps: 3 } } })).toMatchObject({
      version: 2,
    });

    // Chunked (no Content-Length): the gate counts it as it arrives and hands it on whole.
    const payload = batchBody({ id, files: sourceOf(1_500_000), config: { ...testConfig, algorithm: { steps: 4 } } });
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(`${server.url}/api/trpc/experiments.save?batch=1`, { method: "POST", headers: { "content-type": "application/json" } });
      request.on("error", reject);
      request.on("response", (response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (body += chunk));
        response.on("end", () => resolve({ status: response.statusCode!, body }));
      });
      for (let at = 0; at < payload.length; at += 100_000) request.write(payload.slice(at, at + 100_000));
      request.end();
    });
    expect(answer.status, answer.body).toBe(200);
    expect(await versionsOf(id)).toBe(3);
  });

  it("cuts off a body streamed past the limit: answers 413 before the client has sent it, reading little more than the limit", async () => {
    const total = 50 * MiB;
    const chunk = Buffer.alloc(64 * 1024, "x");
    const routed = server.stats.routed;
    let port = 0;
    const result = await new Promise<{ status: number; body: string; sentWhenAnswered: number }>((resolve, reject) => {
      const request = http.request(`${server.url}/api/trpc/experiments.save?batch=1`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        agent: false, // a connection of its own, whose bytes the server counts
      });
      let sent = 0;
      let answered = false;
      request.on("socket", (socket) => socket.once("connect", () => (port = socket.localPort!)));
      request.on("error", () => {}); // the server closes the connection after answering; the write side may see a reset
      request.on("response", (response) => {
        answered = true;
        const sentWhenAnswered = sent;
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (piece: string) => (body += piece));
        response.on("end", () => (resolve({ status: response.statusCode!, body, sentWhenAnswered }), request.destroy()));
        response.on("error", reject);
      });
      // Slowly: a piece, then a pause, so the answer can arrive while the client is still sending.
      const send = () => {
        if (answered || request.destroyed) return;
        if (sent >= total) {
          request.end();
          return;
        }
        sent += chunk.length;
        request.write(chunk, () => setTimeout(send, 2));
      };
      send();
    });
    expect(result.status).toBe(413);
    expect(JSON.parse(result.body)).toMatchObject([
      { error: { json: { data: { code: "PAYLOAD_TOO_LARGE", path: "experiments.save", limitBytes: SAVE_LIMIT } } } },
    ]);
    expect(result.sentWhenAnswered).toBeLessThan(total / 4);
    expect(server.stats.routed).toBe(routed);
    // The server closed the connection: what it read from the socket stays near the limit.
    await expect.poll(() => server.stats.closed.find((c) => c.port === port), { timeout: 5000 }).toBeDefined();
    expect(server.stats.closed.find((c) => c.port === port)!.bytesRead).toBeLessThan(SAVE_LIMIT + MiB);
  });

  it("gives worker.report its 64 MiB only with the worker token", async () => {
    setWorkerToken("request-limits-test-token");
    const logs = Array.from({ length: 200 }, () => ({ level: "info", message: "y".repeat(5000) }));
    const body = batchBody({ workerId: "wkr_none", jobId: "job_none", logs });
    const post = (headers: Record<string, string>) =>
      fetch(`${server.url}/api/trpc/worker.report?batch=1`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
    const anonymous = await post({});
    expect(anonymous.status).toBe(413);
    expect(await anonymous.json()).toMatchObject([{ error: { json: { data: { limit: "256 KiB" } } } }]);
    const worker = await post({ "x-tinkerlab-worker-token": "request-limits-test-token" });
    expect(worker.status).not.toBe(413); // past the gate: the job is unknown, which the worker API says itself
    await worker.arrayBuffer();
  });

  it("takes the largest limit of a batch's procedures", async () => {
    const response = await fetch(`${server.url}/api/trpc/experiments.rename,experiments.save?batch=1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ 0: { json: { id: "exp_none", name: "x" } }, 1: { json: { id: "exp_none", files: sourceOf(3_000_000), config: {} } } }),
    });
    expect(response.status).toBe(413);
    const body = (await response.json()) as { error: { json: { data: { path: string; limitBytes: number } } } }[];
    expect(body.map((call) => [call.error.json.data.path, call.error.json.data.limitBytes])).toEqual([
      ["experiments.rename", SAVE_LIMIT],
      ["experiments.save", SAVE_LIMIT],
    ]);
  });
});

/** `/api/trpc/p,p,…?batch=1` calling `procedure` `count` times. */
const batchPath = (procedure: string, count: number) => `/api/trpc/${Array.from({ length: count }, () => procedure).join(",")}?batch=1`;

type Envelope = { error: { json: { message: string; data: Record<string, unknown> } } };

describe("calls per batch", () => {
  it("answers a batch of 1,000 calls with one 400 naming the cap, before anything of it runs", async () => {
    const routed = server.stats.routed;
    const response = await fetch(`${server.url}${batchPath("health.check", 1000)}`);
    expect(response.status).toBe(400);
    const body = (await response.json()) as Envelope;
    expect(body.error.json.message).toBe(
      `a batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds 1000: split it into requests of ${MAX_BATCH_CALLS} calls or fewer`,
    );
    expect(body.error.json.data).toMatchObject({ code: "BAD_REQUEST", httpStatus: 400, maxBatchCalls: MAX_BATCH_CALLS, batchCalls: 1000 });
    expect(server.stats.routed).toBe(routed);
  });

  it("runs none of a mutation batch one call over the cap, and all of one at the cap", async () => {
    const count = async () => (await db.handle.db.select({ id: experiments.id }).from(experiments)).length;
    const before = await count();
    const post = (calls: number) =>
      fetch(`${server.url}${batchPath("experiments.create", calls)}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(Object.fromEntries(Array.from({ length: calls }, (_, i) => [i, { json: { name: `batched ${i}` } }]))),
      });
    const over = await post(MAX_BATCH_CALLS + 1);
    expect(over.status).toBe(400);
    expect(((await over.json()) as Envelope).error.json.message).toContain(`this one holds ${MAX_BATCH_CALLS + 1}`);
    expect(await count()).toBe(before);
    const at = await post(MAX_BATCH_CALLS);
    expect(at.status, await at.clone().text()).toBe(200);
    expect(((await at.json()) as unknown[]).length).toBe(MAX_BATCH_CALLS);
    expect(await count()).toBe(before + MAX_BATCH_CALLS);
  });

  it("holds the cap without the gate too (Next.js on its own)", async () => {
    const bare = await startApiServer({ gate: false });
    try {
      const response = await fetch(`${bare.url}${batchPath("health.check", MAX_BATCH_CALLS + 1)}`);
      expect(response.status).toBe(400);
      expect(((await response.json()) as Envelope).error.json.data).toMatchObject({ code: "BAD_REQUEST", maxBatchCalls: MAX_BATCH_CALLS });
    } finally {
      await bare.close();
    }
  });

  it("lets a worker make more calls at once than a batch holds: its client splits them", async () => {
    setWorkerToken("request-limits-test-token");
    const api = createWorkerApi(server.url, "request-limits-test-token");
    const calls = 3 * MAX_BATCH_CALLS + 7;
    const answers = await Promise.allSettled(Array.from({ length: calls }, () => api.worker.heartbeat.mutate({ workerId: "wkr_none" })));
    // Each call reaches the worker API, which answers for itself (no such worker), none the gate's batch refusal.
    const reasons = answers.map((answer) => (answer.status === "rejected" ? (answer.reason as Error).message : "ok"));
    expect(reasons.filter((reason) => reason.includes("a batch may hold"))).toEqual([]);
    expect(reasons).toHaveLength(calls);
  });
});

describe("request limits without the web server's gate (Next.js on its own)", () => {
  it("answers a declared length over the limit with 413 at once", async () => {
    const bare = await startApiServer({ gate: false });
    try {
      const response = await fetch(`${bare.url}/api/trpc/experiments.save?batch=1`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: batchBody({ id: "exp_none", files: sourceOf(3_000_000), config: {} }),
      });
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject([{ error: { json: { data: { code: "PAYLOAD_TOO_LARGE", limit: "2 MiB" } } } }]);
    } finally {
      await bare.close();
    }
  });

  it("counts a body without a length and stops reading it once past the limit", async () => {
    const piece = new Uint8Array(64 * 1024).fill(120);
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= 50 * MiB) return controller.close();
        pulled += piece.byteLength;
        controller.enqueue(piece);
      },
    });
    const response = await POST(
      new Request("http://localhost/api/trpc/experiments.save?batch=1", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        duplex: "half",
      } as RequestInit & { duplex: "half" }),
    );
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject([{ error: { json: { data: { path: "experiments.save", limitBytes: SAVE_LIMIT } } } }]);
    expect(pulled).toBeLessThan(SAVE_LIMIT + 256 * 1024);
  });
});
