/**
 * One in-memory feed per watched run, in the web server's process. Its single reader asks the database for the
 * run's new metric points once per wake-up (a worker's report, see run-events, or a poll each second), serialises
 * each batch once, and hands the same bytes to every subscriber. A subscriber that starts fresh gets the run's
 * history as a summary (a min/max downsample per series, kept by the feed and extended as points arrive) and then
 * every new point; one that resumes after event id N gets exactly the points after N, then the live tail: no
 * gap, no duplicate. Event ids are metric point sequence numbers.
 *
 * The web server follows every run that reports (followLiveRuns), watched or not, so the summary of a live run is
 * in memory before anyone opens its page; a run nobody has watched or reported for a while is dropped.
 */
import { eq, sql } from "drizzle-orm";
import superjson from "superjson";
import { z } from "zod";
import { type Database, runs } from "../db";
import { onAnyRunData, onRunData } from "./run-events";

/** What a metric stream is asked for: the run, and the id of the last event the client has (to resume after). */
export const metricStreamInput = z.object({
  runId: z.string().min(1),
  lastEventId: z.string().nullish(),
});

import type { FeedEvent, SeriesBatch } from "@/lib/series";
export type { FeedEvent, SeriesBatch };

/** A frame: one event, its id, and its SSE bytes, made on first use and shared by every subscriber that gets it. */
export type FeedFrame = { id: string; data: FeedEvent; bytes(): Uint8Array };

export type FeedSubscriber = {
  frame(frame: FeedFrame): void;
  /** The run has ended and everything was sent. */
  end(): void;
  error(error: Error): void;
};

export type FeedOptions = {
  /** Least time between two reads of one run (coalesces reports that come faster). */
  minReadGapMs?: number;
  /** Poll interval while someone watches: a replica that did not take the report still delivers. */
  pollMs?: number;
  /** A feed nobody watches is dropped after this long. */
  idleMs?: number;
  /** Buckets kept per series for the summary (each gives its minimum and maximum point). */
  buckets?: number;
};

const DEFAULTS: Required<FeedOptions> = { minReadGapMs: 200, pollMs: 1000, idleMs: 120_000, buckets: 256 };
const ENDED = new Set(["completed", "failed", "cancelled"]);
const encoder = new TextEncoder();

export class RunNotFoundError extends Error {}

/** A point of a downsample: index in the series, step, value, wall time (ms). */
type Point = [index: number, step: number, value: number, wall: number];
type Bucket = { n: number; min: Point; max: Point };

/**
 * A min/max downsample that grows with the series: consecutive points fall into buckets of `width` points; each
 * bucket keeps its lowest and highest point. When there are more than `limit` buckets, neighbours merge and the
 * width doubles, so the summary stays between limit/2 and limit buckets however long the series gets.
 */
export class MinMaxDownsample {
  private buckets: Bucket[] = [];
  private width = 1;
  private first: Point | null = null;
  private last: Point | null = null;
  count = 0;

  constructor(private readonly limit: number) {}

  push(step: number, value: number, wall: number) {
    const point: Point = [this.count++, step, value, wall];
    this.first ??= point;
    this.last = point;
    const open = this.buckets.at(-1);
    if (open && open.n < this.width) {
      open.n++;
      if (value < open.min[2]) open.min = point;
      if (value > open.max[2]) open.max = point;
      return;
    }
    this.buckets.push({ n: 1, min: point, max: point });
    if (this.buckets.length > this.limit) this.merge();
  }

  private merge() {
    const merged: Bucket[] = [];
    for (let i = 0; i < this.buckets.length; i += 2) {
      const a = this.buckets[i]!;
      const b = this.buckets[i + 1];
      merged.push(b ? { n: a.n + b.n, min: b.min[2] < a.min[2] ? b.min : a.min, max: b.max[2] > a.max[2] ? b.max : a.max } : a);
    }
    this.buckets = merged;
    this.width *= 2;
  }

  /** The summary in series order: each bucket's extremes, and the first and last points. */
  columns(): { steps: number[]; values: number[]; wallTimes: number[] } {
    const points: Point[] = [];
    const add = (p: Point | null) => {
      if (p && (points.length === 0 || points.at(-1)![0] < p[0])) points.push(p);
    };
    add(this.first);
    for (const b of this.buckets) {
      const [lo, hi] = b.min[0] <= b.max[0] ? [b.min, b.max] : [b.max, b.min];
      add(lo);
      add(hi);
    }
    add(this.last);
    return { steps: points.map((p) => p[1]), values: points.map((p) => p[2]), wallTimes: points.map((p) => p[3]) };
  }
}

/** Points read from the database: columns per name, with each point's sequence number. */
type Read = { series: (SeriesBatch[number] & { seqs: number[] })[]; lastSeq: number };

/**
 * Points after `after` (and up to `upTo` when given), one column set per metric name: a read of 100,000 points is
 * ten arrays of numbers rather than 100,000 objects.
 */
async function readSeries(db: Database, runId: string, after: number, upTo?: number): Promise<Read> {
  const result = await db.execute(sql`
    select name,
           array_agg(step order by seq) as steps,
           array_agg(value order by seq) as vals,
           array_agg((extract(epoch from wall_time) * 1000)::float8 order by seq) as walls,
           array_agg(seq order by seq) as seqs
    from metric_points
    where run_id = ${runId} and seq > ${after} ${upTo === undefined ? sql`` : sql`and seq <= ${upTo}`}
    group by name
    order by name`);
  const rows = (result as unknown as { rows: { name: string; steps: number[]; vals: number[]; walls: number[]; seqs: (string | number)[] }[] }).rows;
  let lastSeq = after;
  const series = rows.map((row) => {
    const seqs = row.seqs.map(Number);
    lastSeq = Math.max(lastSeq, seqs.at(-1) ?? after);
    return { name: row.name, steps: row.steps.map(Number), values: row.vals.map(Number), wallTimes: row.walls.map(Number), seqs };
  });
  return { series, lastSeq };
}

function makeFrame(id: number, data: FeedEvent): FeedFrame {
  let bytes: Uint8Array | null = null;
  return {
    id: String(id),
    data,
    bytes: () => (bytes ??= encoder.encode(`id: ${id}\ndata: ${JSON.stringify(superjson.serialize(data))}\n\n`)),
  };
}

/** The points of a read after sequence number `after`, as an event (null when none is left). */
function pointsAfter(read: Read, after: number): FeedEvent | null {
  const series: SeriesBatch = [];
  for (const s of read.series) {
    let from = 0;
    while (from < s.seqs.length && s.seqs[from]! <= after) from++;
    if (from === s.seqs.length) continue;
    series.push({ name: s.name, steps: s.steps.slice(from), values: s.values.slice(from), wallTimes: s.wallTimes.slice(from) });
  }
  return series.length ? { series } : null;
}

const stripSeqs = (read: Read): SeriesBatch => read.series.map(({ name, steps, values, wallTimes }) => ({ name, steps, values, wallTimes }));

type Subscription = {
  sink: FeedSubscriber;
  /** The last sequence number this subscriber has (or is being sent). */
  after: number;
  /** Frames that came while this subscriber's own history was being read; sent after it, in order. */
  queue: { read: Read; from: number; frame: FeedFrame }[] | null;
};

export class RunFeed {
  private readonly options: Required<FeedOptions>;
  private readonly series = new Map<string, MinMaxDownsample>();
  private readonly subscriptions = new Set<Subscription>();
  private lastSeq = 0;
  private loaded: Promise<void> | null = null;
  private ended = false;
  private failure: Error | null = null;
  private reading = false;
  /** Kept up to date as reports come, whether or not anyone watches (see followLiveRuns). */
  private followed = false;
  private again = false;
  private lastReadAt = 0;
  private summaryCache: FeedFrame | null = null;
  private poll: ReturnType<typeof setInterval> | null = null;
  private idle: ReturnType<typeof setTimeout> | null = null;
  private stopListening: (() => void) | null = null;
  /** Reads of the database this feed made (for tests and the bench). */
  reads = 0;

  constructor(
    private readonly db: Database,
    readonly runId: string,
    options: FeedOptions,
    private readonly onDrop: () => void,
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  get subscriberCount() {
    return this.subscriptions.size;
  }

  /**
   * Adds a subscriber that has every point up to sequence number `after` (0: none, send the history as a
   * summary). Returns the function that removes it.
   */
  subscribe(sink: FeedSubscriber, after = 0): () => void {
    const sub: Subscription = { sink, after, queue: [] };
    this.subscriptions.add(sub);
    if (this.idle) clearTimeout(this.idle), (this.idle = null);
    this.start();
    void this.attach(sub);
    return () => this.remove(sub);
  }

  /** Keeps the feed up to date from the run's reports even while nobody watches. */
  follow() {
    this.followed = true;
    if (this.subscriptions.size === 0) this.dropWhenIdle();
    if (this.ended) return;
    if (!this.loaded) this.load().catch(() => this.dropWhenIdle());
    else void this.pump();
  }

  private remove(sub: Subscription) {
    if (!this.subscriptions.delete(sub) || this.subscriptions.size > 0) return;
    if (this.poll) clearInterval(this.poll), (this.poll = null);
    this.stopListening?.();
    this.stopListening = null;
    this.dropWhenIdle();
  }

  /** Drops the feed once nobody has watched it, nor has the run reported, for a while (sooner once it ended). */
  private dropWhenIdle() {
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(
      () => this.subscriptions.size === 0 && this.onDrop(),
      this.ended || this.failure ? Math.min(this.options.idleMs, 30_000) : this.options.idleMs,
    );
    this.idle.unref?.();
  }

  private start() {
    if (!this.stopListening && !this.ended) this.stopListening = onRunData(this.runId, () => void this.pump());
    if (!this.poll && !this.ended) {
      this.poll = setInterval(() => void this.pump(), this.options.pollMs);
      this.poll.unref?.();
    }
  }

  /** The first read: the run's whole history, folded into the downsample. */
  private load(): Promise<void> {
    return (this.loaded ??= (async () => {
      const status = await this.status();
      if (status === null) throw new RunNotFoundError(`No run with id '${this.runId}'`);
      const read = await readSeries(this.db, this.runId, 0);
      this.reads++;
      this.apply(read);
      if (ENDED.has(status)) this.ended = true;
    })().catch((error) => {
      this.failure = error instanceof Error ? error : new Error(String(error));
      this.loaded = null;
      throw this.failure;
    }));
  }

  /**
   * The run's history as one summary event, as a fresh subscriber would get it (null while the run has no
   * points): pages render it with their HTML, then subscribe after its id.
   */
  async summary(): Promise<FeedFrame | null> {
    if (this.subscriptions.size === 0) this.dropWhenIdle();
    await this.load();
    return this.lastSeq > 0 ? this.summaryFrame() : null;
  }

  private async attach(sub: Subscription) {
    try {
      await this.load();
    } catch (error) {
      sub.sink.error(error as Error);
      this.remove(sub);
      return;
    }
    if (!this.subscriptions.has(sub)) return;
    if (sub.after === 0) {
      // A fresh viewer: the history as one summary event (shared by everyone who opens at the same point).
      if (this.lastSeq > 0) sub.sink.frame(this.summaryFrame());
      sub.after = this.lastSeq;
    } else if (sub.after < this.lastSeq) {
      // A viewer resuming: exactly the points after its last event, up to where the feed stands; frames that come
      // meanwhile wait in its queue.
      try {
        const read = await readSeries(this.db, this.runId, sub.after, this.lastSeq);
        this.reads++;
        if (!this.subscriptions.has(sub)) return;
        if (read.series.length) sub.sink.frame(makeFrame(read.lastSeq, { series: stripSeqs(read) }));
        sub.after = Math.max(sub.after, read.lastSeq);
      } catch (error) {
        sub.sink.error(error as Error);
        this.remove(sub);
        return;
      }
    }
    const queued = sub.queue ?? [];
    sub.queue = null;
    for (const item of queued) this.deliver(sub, item.read, item.from, item.frame);
    if (this.ended && this.subscriptions.has(sub)) {
      sub.sink.end();
      this.remove(sub);
    } else if (!this.followed) {
      void this.pump(); // a followed feed is already as fresh as the last report
    }
  }

  private summaryFrame(): FeedFrame {
    if (this.summaryCache && this.summaryCache.id === String(this.lastSeq)) return this.summaryCache;
    const counts: Record<string, number> = {};
    const series: SeriesBatch = [];
    for (const [name, d] of [...this.series].sort(([a], [b]) => (a < b ? -1 : 1))) {
      counts[name] = d.count;
      series.push({ name, ...d.columns() });
    }
    return (this.summaryCache = makeFrame(this.lastSeq, { series, summary: { counts } }));
  }

  private apply(read: Read) {
    for (const s of read.series) {
      let d = this.series.get(s.name);
      if (!d) this.series.set(s.name, (d = new MinMaxDownsample(this.options.buckets)));
      for (let i = 0; i < s.steps.length; i++) d.push(s.steps[i]!, s.values[i]!, s.wallTimes[i]!);
    }
    this.lastSeq = Math.max(this.lastSeq, read.lastSeq);
  }

  private status(): Promise<string | null> {
    return this.db
      .select({ status: runs.status })
      .from(runs)
      .where(eq(runs.id, this.runId))
      .then(([row]) => row?.status ?? null);
  }

  /** Reads what is new, once for everyone; a wake-up during a read makes one more read after it. */
  private async pump(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return;
    }
    if (!this.loaded || this.ended || (this.subscriptions.size === 0 && !this.followed)) return;
    this.reading = true;
    try {
      await this.loaded;
      do {
        this.again = false;
        const wait = this.lastReadAt + this.options.minReadGapMs - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        this.lastReadAt = Date.now();
        let read = await readSeries(this.db, this.runId, this.lastSeq);
        this.reads++;
        if (read.series.length === 0) {
          const status = await this.status();
          if (status === null || ENDED.has(status)) {
            // One last look: points written between the read above and the status read.
            read = await readSeries(this.db, this.runId, this.lastSeq);
            this.reads++;
            if (read.series.length === 0) {
              this.finish();
              return;
            }
          }
        }
        if (read.series.length) this.broadcast(read);
      } while (this.again && (this.subscriptions.size > 0 || this.followed));
    } catch (error) {
      console.error(`metric feed of run ${this.runId}: read failed (the next wake-up retries):`, error);
    } finally {
      this.reading = false;
    }
  }

  private broadcast(read: Read) {
    const from = this.lastSeq;
    this.apply(read);
    const frame = makeFrame(read.lastSeq, { series: stripSeqs(read) });
    for (const sub of this.subscriptions) {
      if (sub.queue) sub.queue.push({ read, from, frame });
      else this.deliver(sub, read, from, frame);
    }
  }

  /** A frame to one subscriber: the shared one when it continues right where the subscriber stands. */
  private deliver(sub: Subscription, read: Read, from: number, frame: FeedFrame) {
    if (sub.after >= read.lastSeq) return;
    if (sub.after <= from) sub.sink.frame(frame);
    else {
      const rest = pointsAfter(read, sub.after);
      if (rest) sub.sink.frame(makeFrame(read.lastSeq, rest));
    }
    sub.after = read.lastSeq;
  }

  private finish() {
    this.ended = true;
    if (this.subscriptions.size === 0) this.dropWhenIdle();
    if (this.poll) clearInterval(this.poll), (this.poll = null);
    this.stopListening?.();
    this.stopListening = null;
    for (const sub of [...this.subscriptions]) {
      if (sub.queue) continue; // attach() ends it once its history is sent
      sub.sink.end();
      this.remove(sub);
    }
  }
}

const holder = globalThis as typeof globalThis & { __tinkerlabFeeds?: WeakMap<Database, Map<string, RunFeed>> };
const feeds = (holder.__tinkerlabFeeds ??= new WeakMap());

/** The feed of a run on `db`, made on first use; the same object for every viewer in this process. */
export function runFeed(db: Database, runId: string, options: FeedOptions = {}): RunFeed {
  let byRun = feeds.get(db);
  if (!byRun) feeds.set(db, (byRun = new Map()));
  let feed = byRun.get(runId);
  if (!feed) {
    const map = byRun;
    feed = new RunFeed(db, runId, options, () => {
      if (map.get(runId) === feed) map.delete(runId);
    });
    byRun.set(runId, feed);
  }
  return feed;
}

const followed = new WeakSet<Database>();

/**
 * Keeps a feed for every run that reports new data on `db`, watched or not (the web server calls this once): the
 * first load of a live run's page then finds its summary ready instead of reading the run's whole history.
 */
export function followLiveRuns(db: Database, options: FeedOptions = {}): () => void {
  if (followed.has(db)) return () => {};
  followed.add(db);
  const stop = onAnyRunData((runId) => runFeed(db, runId, options).follow());
  return () => (followed.delete(db), stop());
}

/**
 * A run's stream as an async iterable of frames, for in-process consumers (the tRPC procedure): ends when the run
 * has ended and everything is sent, or when `signal` aborts.
 */
export async function* feedFrames(db: Database, runId: string, after: number, signal?: AbortSignal): AsyncGenerator<FeedFrame> {
  const queue: FeedFrame[] = [];
  let done = false;
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  const notify = () => (wake?.(), (wake = null));
  const unsubscribe = runFeed(db, runId).subscribe(
    {
      frame: (frame) => (queue.push(frame), notify()),
      end: () => ((done = true), notify()),
      error: (error) => ((failure = error), notify()),
    },
    after,
  );
  const onAbort = () => ((done = true), notify());
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      while (queue.length) yield queue.shift()!;
      if (failure) throw failure;
      if (done || signal?.aborted) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    unsubscribe();
  }
}
