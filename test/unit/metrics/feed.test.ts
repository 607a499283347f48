import { testRunConfig } from "../../support/run-config";
import { eq } from "drizzle-orm";
import superjson from "superjson";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCaller } from "@/server/api/root";
import { createContextInner } from "@/server/api/trpc";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { LOCAL_USER, openDatabase, type DatabaseHandle } from "@/server/db";
import { newId } from "@/server/db/ids";
import { metricPoints, runs } from "@/server/db/schema";
import { followLiveRuns, MinMaxDownsample, runFeed, type FeedFrame, type FeedSubscriber } from "@/server/metrics/feed";
import { announceRunData } from "@/server/metrics/run-events";

let handle: DatabaseHandle;
let experimentId: string;
let versionId: string;

beforeAll(async () => {
  handle = await openDatabase({ pgliteDir: "memory" });
  const created = await createCaller(createContextInner({ database: handle, principal: { kind: "local", user: LOCAL_USER } })).experiments.create({
    name: "feed",
  });
  experimentId = created.id;
  versionId = created.versionId;
}, 120_000);
afterAll(() => handle.close());

async function newRun(status: "running" | "completed" = "running") {
  const id = newId("run");
  await handle.db.insert(runs).values({
    id,
    projectId: DEFAULT_PROJECT,
    experimentId,
    experimentVersionId: versionId,
    createdBy: LOCAL_USER.id,
    name: id,
    status,
    config: testRunConfig(),
    seed: 1,
    totalSteps: 1000,
  });
  return id;
}

/** What a worker's report does: store points, then announce them. */
async function report(runId: string, steps: number[], names = ["reward/mean", "loss"]) {
  await handle.db.insert(metricPoints).values(steps.flatMap((step) => names.map((name) => ({ runId, name, step, value: step * 0.5 }))));
  announceRunData(runId);
}

/** A subscriber that records frames, decoding the bytes a browser would get. */
function recorder() {
  const frames: FeedFrame[] = [];
  const texts: string[] = [];
  let ended = false;
  let failed: Error | null = null;
  const sink: FeedSubscriber = {
    frame: (frame) => (frames.push(frame), texts.push(new TextDecoder().decode(frame.bytes()))),
    end: () => (ended = true),
    error: (error) => (failed = error),
  };
  // Every step received, a summary's included (a short series' summary holds all of its points).
  const steps = (name: string) => frames.flatMap((f) => f.data.series.filter((s) => s.name === name).flatMap((s) => s.steps));
  return {
    sink,
    frames,
    texts,
    steps,
    get ended() {
      return ended;
    },
    get failed() {
      return failed;
    },
  };
}

const until = async (check: () => boolean, ms = 10_000) => {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe("MinMaxDownsample", () => {
  it("keeps every point of a short series and at most twice its bucket limit (plus ends) of a long one, spikes included", () => {
    const short = new MinMaxDownsample(8);
    for (let i = 0; i < 5; i++) short.push(i, i * 2, 1000 + i);
    expect(short.columns()).toEqual({ steps: [0, 1, 2, 3, 4], values: [0, 2, 4, 6, 8], wallTimes: [1000, 1001, 1002, 1003, 1004] });

    const long = new MinMaxDownsample(64);
    for (let i = 0; i < 100_000; i++) long.push(i, i === 54_321 ? 99 : Math.sin(i / 1000), i);
    const { steps, values } = long.columns();
    expect(long.count).toBe(100_000);
    expect(steps.length).toBeLessThanOrEqual(2 * 64 + 2);
    expect(steps.length).toBeGreaterThan(64);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(steps[0]).toBe(0);
    expect(steps.at(-1)).toBe(99_999);
    expect(values).toContain(99);
    expect(Math.min(...values)).toBeCloseTo(-1, 3);
  });
});

describe("run feed", () => {
  it("fans one read and one set of bytes out to every subscriber", async () => {
    const runId = await newRun();
    await report(runId, [1, 2, 3]);
    const feed = runFeed(handle.db, runId, { minReadGapMs: 0 });
    const viewers = Array.from({ length: 20 }, () => recorder());
    const stops = viewers.map((v) => feed.subscribe(v.sink));
    await until(() => viewers.every((v) => v.frames.length === 1));
    // The history: one summary, the same object for all 20 (made once).
    expect(new Set(viewers.map((v) => v.frames[0]))).toHaveProperty("size", 1);
    expect(viewers[0]!.frames[0]!.data.summary?.counts).toEqual({ loss: 3, "reward/mean": 3 });

    const readsBefore = feed.reads;
    await report(runId, [4, 5]);
    await until(() => viewers.every((v) => v.frames.length === 2));
    expect(feed.reads - readsBefore).toBe(1);
    const live = viewers.map((v) => v.frames[1]!);
    expect(new Set(live)).toHaveProperty("size", 1);
    expect(new Set(viewers.map((v) => v.frames[1]!.bytes()))).toHaveProperty("size", 1);
    expect(viewers[3]!.steps("reward/mean")).toEqual([1, 2, 3, 4, 5]);
    // The bytes are a tRPC SSE event: the id, then the superjson-serialised data.
    const text = viewers[7]!.texts[1]!;
    const [, id, data] = text.match(/^id: (\d+)\ndata: (.*)\n\n$/)!;
    expect(id).toBe(live[0]!.id);
    expect(superjson.deserialize(JSON.parse(data!))).toEqual(live[0]!.data);
    stops.forEach((stop) => stop());
  });

  it("resumes after any event id with exactly the points after it: no gap, no duplicate", async () => {
    const runId = await newRun();
    const feed = runFeed(handle.db, runId, { minReadGapMs: 0 });
    const first = recorder();
    const stop = feed.subscribe(first.sink);
    for (let step = 1; step <= 30; step++) await report(runId, [step]);
    await until(() => first.steps("loss").length === 30);
    expect(first.steps("loss")).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));

    // A viewer that dropped after the 12th event comes back while points keep arriving.
    const dropAt = first.frames.find((f) => f.data.series.some((s) => s.name === "loss" && s.steps.includes(12)))!;
    const seen = first.frames.slice(0, first.frames.indexOf(dropAt) + 1).flatMap((f) => f.data.series.filter((s) => s.name === "loss").flatMap((s) => s.steps));
    const resumed = recorder();
    const stopResumed = feed.subscribe(resumed.sink, Number(dropAt.id));
    const writing = (async () => {
      for (let step = 31; step <= 45; step++) await report(runId, [step]);
    })();
    await writing;
    await until(() => resumed.steps("loss").at(-1) === 45 && first.steps("loss").at(-1) === 45);
    expect([...seen, ...resumed.steps("loss")]).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));
    expect([...seen, ...resumed.steps("reward/mean")].length).toBe(45);
    // Event ids only grow.
    const ids = resumed.frames.map((f) => Number(f.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    stop();
    stopResumed();
  });

  it("gives a late subscriber the history, then the live tail", async () => {
    const runId = await newRun();
    await report(
      runId,
      Array.from({ length: 5000 }, (_, i) => i + 1),
      ["reward/mean"],
    );
    const feed = runFeed(handle.db, runId, { minReadGapMs: 0, buckets: 100 });
    const early = recorder();
    const stopEarly = feed.subscribe(early.sink);
    await until(() => early.frames.length === 1);
    const late = recorder();
    const stopLate = feed.subscribe(late.sink);
    await until(() => late.frames.length === 1);
    const summary = late.frames[0]!.data;
    expect(summary.summary?.counts["reward/mean"]).toBe(5000);
    const steps = summary.series[0]!.steps;
    expect(steps.length).toBeLessThanOrEqual(202);
    expect([steps[0], steps.at(-1)]).toEqual([1, 5000]);
    await report(runId, [5001, 5002], ["reward/mean"]);
    await until(() => late.frames.length === 2);
    expect(late.frames[1]!.data.series[0]!.steps).toEqual([5001, 5002]);
    expect(late.frames[1]).toBe(early.frames[1]);
    stopEarly();
    stopLate();
  });

  it("follows a reporting run nobody watches, so its first viewer gets the summary without a read", async () => {
    const stop = followLiveRuns(handle.db, { minReadGapMs: 0 });
    try {
      const runId = await newRun();
      await report(runId, [1, 2]);
      const feed = runFeed(handle.db, runId);
      await until(() => feed.reads >= 1);
      await report(runId, [3]);
      await until(() => feed.reads >= 2);
      const reads = feed.reads;
      const viewer = recorder();
      const unsubscribe = feed.subscribe(viewer.sink);
      await until(() => viewer.frames.length === 1);
      expect(feed.reads).toBe(reads);
      expect(viewer.frames[0]!.data.summary?.counts).toEqual({ loss: 3, "reward/mean": 3 });
      unsubscribe();
    } finally {
      stop();
    }
  });

  it("ends the stream once the run has ended and every point is sent; names an unknown run", async () => {
    const runId = await newRun();
    await report(runId, [1]);
    const viewer = recorder();
    const feed = runFeed(handle.db, runId, { minReadGapMs: 0, pollMs: 50 });
    feed.subscribe(viewer.sink);
    await until(() => viewer.frames.length === 1);
    await handle.db.insert(metricPoints).values({ runId, name: "loss", step: 2, value: 1 });
    await handle.db.update(runs).set({ status: "completed" }).where(eq(runs.id, runId));
    await until(() => viewer.ended);
    expect(viewer.steps("loss")).toEqual([1, 2]);

    // Someone opening the finished run gets its history and the end.
    const later = recorder();
    feed.subscribe(later.sink);
    await until(() => later.ended);
    expect(later.frames[0]!.data.summary?.counts).toEqual({ loss: 2, "reward/mean": 1 });

    const lost = recorder();
    runFeed(handle.db, "run_missing").subscribe(lost.sink);
    await until(() => lost.failed !== null);
    expect(String(lost.failed)).toContain("No run with id 'run_missing'");
  });

  it("serves the tRPC procedure from the same feed, resumable by lastEventId", async () => {
    const runId = await newRun();
    await report(runId, [1, 2]);
    const caller = createCaller(createContextInner({ database: handle, principal: { kind: "local", user: LOCAL_USER } }));
    const stream = await caller.runs.metricStream({ runId });
    const iterator = stream[Symbol.asyncIterator]();
    const first = (await iterator.next()).value as unknown as [string, { summary?: unknown; series: { name: string; steps: number[] }[] }];
    expect(first[1].summary).toBeTruthy();
    await iterator.return?.(undefined);
    await report(runId, [3]);
    const resumed = await caller.runs.metricStream({ runId, lastEventId: first[0] });
    const next = (await resumed[Symbol.asyncIterator]().next()).value as unknown as [string, { series: { name: string; steps: number[] }[] }];
    expect(next[1].series.map((s) => [s.name, s.steps])).toEqual([
      ["loss", [3]],
      ["reward/mean", [3]],
    ]);
    await expect((await caller.runs.metricStream({ runId, lastEventId: "x" }))[Symbol.asyncIterator]().next()).rejects.toThrow(
      "lastEventId: 'x' is not an event id",
    );
  });
});
