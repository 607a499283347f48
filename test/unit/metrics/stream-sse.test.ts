/**
 * The metric stream over HTTP (server/metrics/stream-sse.ts) as the web server serves it, straight from the run's
 * feed to each socket: many viewers share one read and one serialisation per batch and each still gets every point
 * once, a viewer that reconnects with Last-Event-ID resumes without gap or duplicate, and the Next.js route's
 * web Response gives the same bytes.
 */
import { testRunConfig } from "../../support/run-config";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { eq } from "drizzle-orm";
import superjson from "superjson";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCaller } from "@/server/api/root";
import { createContextInner } from "@/server/api/trpc";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { LOCAL_USER, openDatabase, setDatabase, type DatabaseHandle } from "@/server/db";
import { newId } from "@/server/db/ids";
import { metricPoints, runs } from "@/server/db/schema";
import { runFeed } from "@/server/metrics/feed";
import { isMetricStreamRequest, metricStreamResponse, serveMetricStream } from "@/server/metrics/stream-sse";
import { announceRunData } from "@/server/metrics/run-events";

let handle: DatabaseHandle;
let server: http.Server;
let base: string;
let experimentId: string;
let versionId: string;

beforeAll(async () => {
  handle = await openDatabase({ pgliteDir: "memory" });
  setDatabase(handle);
  const created = await createCaller(createContextInner({ database: handle, principal: { kind: "local", user: LOCAL_USER } })).experiments.create({
    name: "sse",
  });
  experimentId = created.id;
  versionId = created.versionId;
  server = http.createServer((req, res) => {
    if (isMetricStreamRequest(req.method, req.url)) void serveMetricStream(req, res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await handle.close();
});

async function newRun() {
  const id = newId("run");
  await handle.db.insert(runs).values({
    id,
    projectId: DEFAULT_PROJECT,
    experimentId,
    experimentVersionId: versionId,
    createdBy: LOCAL_USER.id,
    name: id,
    status: "running",
    config: testRunConfig(),
    seed: 1,
    totalSteps: 1000,
  });
  return id;
}

async function report(runId: string, steps: number[]) {
  await handle.db.insert(metricPoints).values(steps.flatMap((step) => ["loss", "reward/mean"].map((name) => ({ runId, name, step, value: step / 2 }))));
  announceRunData(runId);
}

type Event = { type: string; id?: string; data: string };

/** An SSE client on a socket: every event as sent, and the loss steps of its data events. */
function viewer(runId: string, lastEventId?: string) {
  const events: Event[] = [];
  let ended = false;
  const url = `${base}/api/trpc/runs.metricStream?input=${encodeURIComponent(JSON.stringify({ json: { runId } }))}`;
  const request = http.get(url, { headers: lastEventId ? { "last-event-id": lastEventId } : {} }, (response) => {
    response.setEncoding("utf8");
    let buffer = "";
    response.on("data", (chunk: string) => {
      buffer += chunk;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const lines = buffer.slice(0, cut).split("\n");
        buffer = buffer.slice(cut + 2);
        const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
        events.push({ type: field("event") ?? "message", id: field("id"), data: field("data") ?? "" });
      }
    });
    response.on("end", () => (ended = true));
  });
  request.on("error", () => {});
  const data = () =>
    events
      .filter((e) => e.type === "message")
      .map((e) => ({ id: e.id!, ...(superjson.deserialize(JSON.parse(e.data)) as { series: { name: string; steps: number[] }[]; summary?: unknown }) }));
  const steps = (name = "loss") => data().flatMap((d) => d.series.filter((s) => s.name === name).flatMap((s) => s.steps));
  return {
    events,
    data,
    steps,
    close: () => request.destroy(),
    get ended() {
      return ended;
    },
  };
}

const until = async (check: () => boolean, ms = 15_000) => {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("metric stream over HTTP", () => {
  it("is the request the web server serves itself", () => {
    expect(isMetricStreamRequest("GET", "/api/trpc/runs.metricStream?input=%7B%7D")).toBe(true);
    expect(isMetricStreamRequest("GET", "/api/trpc/runs.metricStream")).toBe(true);
    expect(isMetricStreamRequest("POST", "/api/trpc/runs.metricStream")).toBe(false);
    expect(isMetricStreamRequest("GET", "/api/trpc/runs.metricStreamX")).toBe(false);
    expect(isMetricStreamRequest("GET", "/api/trpc/runs.metricSummary?input=%7B%7D")).toBe(false);
  });

  it("gives 40 viewers the same events from one read per batch, and a viewer that reconnects exactly the points after its last event", async () => {
    const runId = await newRun();
    await report(runId, [1, 2, 3]);
    const viewers = Array.from({ length: 40 }, () => viewer(runId));
    await until(() => viewers.every((v) => v.steps().length === 3));
    expect(viewers[0]!.events[0]!.type).toBe("connected");
    expect(viewers[0]!.data()[0]!.summary).toBeTruthy();

    const feed = runFeed(handle.db, runId);
    const readsBefore = feed.reads;
    const leaving = viewers[5]!;
    for (let step = 4; step <= 20; step++) {
      await report(runId, [step]);
      await new Promise((resolve) => setTimeout(resolve, 15));
      if (step === 9) leaving.close();
    }
    await until(() => viewers.every((v) => v === leaving || v.steps().at(-1) === 20));
    // Batches are read once for everyone (a few reports coalesce into one read), and everyone got the same events.
    expect(feed.reads - readsBefore).toBeLessThanOrEqual(17);
    const others = viewers.filter((v) => v !== leaving);
    for (const v of others) {
      expect(v.steps()).toEqual(range(1, 20));
      expect(v.steps("reward/mean")).toEqual(range(1, 20));
      expect(v.events.filter((e) => e.type === "message").map((e) => e.data)).toEqual(others[0]!.events.filter((e) => e.type === "message").map((e) => e.data));
    }

    // The one that left comes back with the last id it saw, while points keep coming.
    const seen = leaving.steps();
    const lastId = leaving.data().at(-1)!.id;
    const back = viewer(runId, lastId);
    for (let step = 21; step <= 30; step++) await report(runId, [step]);
    await until(() => back.steps().at(-1) === 30);
    expect([...seen, ...back.steps()]).toEqual(range(1, 30));
    const ids = back.data().map((d) => Number(d.id));
    expect(ids.every((id, i) => id > (i === 0 ? Number(lastId) : ids[i - 1]!))).toBe(true);

    // The run ends: every stream says so and closes.
    await handle.db.update(runs).set({ status: "completed" }).where(eq(runs.id, runId));
    announceRunData(runId);
    await until(() => [...others, back].every((v) => v.ended));
    expect(back.events.at(-1)!.type).toBe("return");
    expect(others[0]!.steps().at(-1)).toBe(30);
  });

  it("answers bad input and unknown runs with tRPC's error event, and the web Response with the same bytes as the socket", async () => {
    const bad = viewer("");
    await until(() => bad.ended);
    expect(bad.events.map((e) => e.type)).toEqual(["connected", "serialized-error"]);
    expect(bad.events[1]!.data).toContain("BAD_REQUEST");

    const missing = viewer("run_missing");
    await until(() => missing.ended);
    expect(missing.events[1]!.type).toBe("serialized-error");
    expect(missing.events[1]!.data).toContain("No run with id 'run_missing'");

    const runId = await newRun();
    await report(runId, [1, 2]);
    await handle.db.update(runs).set({ status: "completed" }).where(eq(runs.id, runId));
    const overSocket = viewer(runId);
    await until(() => overSocket.ended);
    const url = `${base}/api/trpc/runs.metricStream?input=${encodeURIComponent(JSON.stringify({ json: { runId } }))}`;
    const fromRoute = await (await metricStreamResponse(new Request(url))).text();
    const socketText = overSocket.events
      .map((e) => `${e.type === "message" ? "" : `event: ${e.type}\n`}${e.id ? `id: ${e.id}\n` : ""}data: ${e.data}\n\n`)
      .join("");
    expect(fromRoute).toBe(socketText);
    expect(overSocket.events.map((e) => e.type)).toEqual(["connected", "message", "return"]);
  });
});
