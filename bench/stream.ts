/**
 * `npm run bench:stream`: how fast metric points reach the people watching.
 *
 *  1. Latency: a worker (this process, through the real worker API) reports one point at a time; a subscriber on
 *     the run's server-sent event stream notes when each arrives. p50 and p95 of arrival − report.
 *  2. Step rate with 100 viewers: the same short training run on a real local worker, once with no viewer and
 *     with 100 SSE clients subscribed, in turn, after a warm-up run; the ratio of the median steps per second, timed
 *     by when steps 11 and 200 reach a probe subscriber (the worker's reports leave as it trains). Every viewer
 *     parses every event and checks it got each step once, in order; the bench fails otherwise.
 *  3. The run page with 100,000 points (10 series of 10,000, reported while nobody watched): Chromium opens it and
 *     we time until every headline chart holds all its points and has drawn its curve.
 *  4. The compare view of ten finished runs of 1,000 steps with four panels (against the step, wall time, tokens
 *     and another metric): Chromium opens it and we time until every panel has drawn all ten runs' curves.
 *
 * The server runs as a child process (`tinkerlab start`) on a fresh embedded database. Options: --viewers N,
 * --trials N (runs without and with viewers, in turn; default 3), --rate-only, --compare-only (part 4 alone),
 * --cpu-prof DIR (V8 CPU profiles of the server's processes, and DIR/trials.json with each trial's span on the
 * profiles' clock).
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import superjson from "superjson";
import { BaseModel, TrainingClient } from "../server/runtime";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { formatTable } from "./lib/measure";

const root = path.resolve(import.meta.dirname, "..");
const viewers = Number(process.argv[process.argv.indexOf("--viewers") + 1] || 100) || 100;
const TOKEN = "bench-stream-worker-token-0123456789";
/** --cpu-prof DIR: the server's processes (web server, workers) write V8 CPU profiles there when they exit. */
const cpuProfDir = process.argv.includes("--cpu-prof") ? path.resolve(process.argv[process.argv.indexOf("--cpu-prof") + 1]!) : null;

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });

async function startServer(localWorkers: number, basesDir: string) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bench-stream-"));
  const child = spawn(process.execPath, [path.join(root, "node_modules/tsx/dist/cli.mjs"), path.join(root, "bin/tinkerlab.ts"), "start"], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      PORT: String(port),
      PGLITE_DATA_DIR: path.join(dir, "db"),
      ARTIFACTS_DIR: path.join(dir, "artifacts"),
      TINKERLAB_BASES_DIR: basesDir,
      TINKERLAB_EXAMPLES: "off",
      TINKERLAB_LOCAL_WORKERS: String(localWorkers),
      TINKERLAB_WORKER_TOKEN: TOKEN,
      ...(cpuProfDir ? { NODE_OPTIONS: `--require ${path.join(root, "bench/lib/cpu-prof-preload.cjs")}`, BENCH_CPU_PROF_DIR: cpuProfDir } : {}),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      if (out.includes("Tinkerlab is ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`server exited (${code}):\n${out}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return { url, pid: child.pid!, stop: () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM"))) };
}

async function trpc<T>(url: string, procedure: string, input: unknown, worker = false): Promise<T> {
  const response = await fetch(`${url}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(worker ? { "x-tinkerlab-worker-token": TOKEN } : {}) },
    // superjson's envelope, so a Date (a point's wall time) arrives as one.
    body: JSON.stringify(superjson.serialize(input)),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${procedure}: ${body.error.json.message}`);
  return body.result.data.json as T;
}

/** One event of runs.metricStream as a viewer sees it: its id, and per series the steps it carries. */
type StreamEvent = { id: number; summary: boolean; series: { name: string; steps: number[] }[] };

/**
 * A raw SSE client of runs.metricStream; calls onEvent with each data event, parsed. It stands for a browser on
 * another machine, so it does what a client must (read the stream, split events, parse each event's JSON) and no
 * more: node:http and one string buffer, rather than fetch's web streams and a decoder stream per client, which
 * took two to three times the CPU for the same bytes on this machine (shared with the server under test).
 */
function subscribe(url: string, runId: string, onEvent: (event: StreamEvent) => void) {
  const input = encodeURIComponent(JSON.stringify({ json: { runId } }));
  let request: http.ClientRequest | null = null;
  const done = new Promise<void>((resolve) => {
    request = http.get(`${url}/api/trpc/runs.metricStream?input=${input}`, { headers: { accept: "text/event-stream" } }, (response) => {
      response.setEncoding("utf8");
      let buffer = "";
      response.on("data", (chunk: string) => {
        buffer += chunk;
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          // Data events are "id: N\ndata: {...}"; connected, ping and return events start with "event: ".
          if (!event.startsWith("id: ")) continue;
          const newline = event.indexOf("\n");
          const data = event.slice(newline + 1);
          if (!data.startsWith("data: ")) continue;
          const parsed = JSON.parse(data.slice(6));
          if (Array.isArray(parsed?.json?.series)) onEvent({ id: Number(event.slice(4, newline)), summary: !!parsed.json.summary, series: parsed.json.series });
        }
      });
      response.on("end", resolve);
      response.on("error", resolve);
      response.on("close", resolve);
    });
    request.on("error", () => resolve());
  });
  return { close: () => request?.destroy(), done };
}

/**
 * A viewer that checks what it gets: event ids only grow, each series' steps only grow (no duplicate), and the
 * series reported every training step (reward/mean) has no gap. A summary event (history before the viewer came)
 * is a downsample, so only its order is checked.
 */
function checkedViewer(url: string, runId: string, onEvent?: (event: StreamEvent) => void) {
  const lastStep = new Map<string, number>();
  let lastId = 0;
  const problems: string[] = [];
  const sub = subscribe(url, runId, (event) => {
    if (event.id <= lastId) problems.push(`event id ${event.id} after ${lastId}`);
    lastId = event.id;
    for (const { name, steps } of event.series) {
      let last = lastStep.get(name) ?? (name === EVERY_STEP ? 0 : -1);
      for (const step of steps) {
        if (step <= last) problems.push(`${name}: step ${step} again or out of order after ${last}`);
        else if (name === EVERY_STEP && !event.summary && step !== last + 1) problems.push(`${name}: steps ${last + 1}-${step - 1} missing`);
        last = step;
      }
      lastStep.set(name, last);
    }
    onEvent?.(event);
  });
  return { ...sub, problems, lastStep: (name: string) => lastStep.get(name) ?? 0 };
}

/** The series a training run reports once per step. */
const EVERY_STEP = "reward/mean";

async function createRun(url: string, steps: number, name: string) {
  const { id } = await trpc<{ id: string }>(url, "experiments.create", {
    name,
    config: {
      name,
      environment: "arithmetic",
      agent: { base: "bench-base", sampling: { maxTokens: 3 } },
      algorithm: { name: "grpo", steps, groupSize: 4, groupsPerStep: 4 },
      evaluation: { every: 0, episodes: 8 },
      checkpointEvery: 0,
    },
  });
  return (await trpc<{ runId: string }>(url, "runs.launch", { experimentId: id })).runId;
}

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function measureLatency(url: string) {
  const { workerId } = await trpc<{ workerId: string }>(
    url,
    "worker.register",
    { hostname: "bench", pid: process.pid, backend: "bench", devices: [{ kind: "cpu", name: "bench", memoryMb: 4096, computeSlots: 1 }] },
    true,
  );
  const runId = await createRun(url, 100_000, "latency");
  let jobId: string | undefined;
  for (let i = 0; i < 100 && !jobId; i++) {
    const beat = await trpc<{ assignments: string[] }>(url, "worker.heartbeat", { workerId, running: [] }, true);
    jobId = beat.assignments[0];
    if (!jobId) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  if (!jobId) throw new Error("the scheduler never placed the bench job");
  await trpc(url, "worker.claim", { workerId, jobId }, true);
  // A worker keeps its lease by heartbeat; without one the scheduler would hand the job to someone else.
  const heartbeat = setInterval(() => void trpc(url, "worker.heartbeat", { workerId, running: [{ jobId, step: 0 }] }, true).catch(() => {}), 2000);
  const sentAt = new Map<number, number>();
  const latencies: number[] = [];
  const sub = subscribe(url, runId, (event) => {
    const now = performance.now();
    for (const series of event.series) for (const step of series.steps) if (sentAt.has(step)) latencies.push(now - sentAt.get(step)!);
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (let step = 1; step <= 200; step++) {
    sentAt.set(step, performance.now());
    await trpc(url, "worker.report", { workerId, jobId, step, metrics: [{ step, name: "bench/latency", value: step }] }, true);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await new Promise((resolve) => setTimeout(resolve, 1500));
  sub.close();
  clearInterval(heartbeat);
  return { p50: percentile(latencies, 50), p95: percentile(latencies, 95), received: latencies.length };
}

/**
 * CPU seconds (user + system) used so far by the server's processes, from /proc: the web server, and the worker
 * processes it started (told apart by their command line).
 */
function cpuSeconds(root: number): { server: number; workers: number } {
  const out = { server: 0, workers: 0 };
  const visit = (pid: number) => {
    try {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      const seconds = (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in USER_HZ (100) ticks
      const command = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (/worker/.test(command)) out.workers += seconds;
      else out.server += seconds;
      for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
        for (const child of fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").split(" ").filter(Boolean)) visit(Number(child));
      }
    } catch {
      // the process ended meanwhile
    }
  };
  visit(root);
  return out;
}

/** Steps of each step-rate run; the rate is taken over steps 11 to the end. */
const RATE_STEPS = 200;

async function stepRate(url: string, watchers: number) {
  const runId = await createRun(url, RATE_STEPS, `rate-${watchers}`);
  const viewersOfRun = Array.from({ length: watchers }, () => checkedViewer(url, runId));
  let firstAt = 0;
  let lastAt = 0;
  let steps = 0;
  const probe = subscribe(url, runId, (event) => {
    for (const series of event.series) {
      if (series.name !== EVERY_STEP) continue;
      for (const step of series.steps) {
        if (step === 11) firstAt = performance.now();
        if (step > steps) (steps = step), (lastAt = performance.now());
      }
    }
  });
  await probe.done;
  // The run has ended: each viewer's stream ends too, once it has every point.
  const drained = await Promise.race([
    Promise.all(viewersOfRun.map((v) => v.done)).then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 10_000)),
  ]);
  viewersOfRun.forEach((v) => v.close());
  if (steps < 12) {
    const run = await (await fetch(`${url}/api/trpc/runs.byId?input=${encodeURIComponent(JSON.stringify({ json: { id: runId } }))}`)).json();
    throw new Error(`the step-rate run did not train: ${JSON.stringify(run.result?.data?.json ?? run).slice(0, 600)}`);
  }
  // Every viewer saw every step once, in order.
  const wrong = viewersOfRun.filter((v) => v.problems.length > 0 || v.lastStep(EVERY_STEP) !== steps);
  if (!drained || wrong.length) {
    const example = wrong[0]
      ? `${wrong[0].problems.slice(0, 3).join("; ") || `last step ${wrong[0].lastStep(EVERY_STEP)} of ${steps}`}`
      : "streams did not end";
    throw new Error(`${wrong.length} of ${watchers} viewers did not get every step exactly once (${example})`);
  }
  return (steps - 11) / ((lastAt - firstAt) / 1000); // steps/s after a 10-step warm-up
}

/** A run of `steps` launched and claimed by this process as its worker (one worker per run), heartbeating until `stop`. */
async function runForThisWorker(url: string, steps: number, name: string) {
  const { workerId } = await trpc<{ workerId: string }>(
    url,
    "worker.register",
    { hostname: "bench", pid: process.pid, backend: "bench", devices: [{ kind: "cpu", name: "bench-2", memoryMb: 4096, computeSlots: 1 }] },
    true,
  );
  const runId = await createRun(url, steps, name);
  let jobId: string | undefined;
  for (let i = 0; i < 100 && !jobId; i++) {
    jobId = (await trpc<{ assignments: string[] }>(url, "worker.heartbeat", { workerId, running: [] }, true)).assignments[0];
    if (!jobId) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await trpc(url, "worker.claim", { workerId, jobId }, true);
  const heartbeat = setInterval(() => void trpc(url, "worker.heartbeat", { workerId, running: [{ jobId, step: 0 }] }, true).catch(() => {}), 2000);
  return { runId, workerId, jobId, stop: () => clearInterval(heartbeat) };
}

function launchChromium() {
  return chromium.launchPersistentContext(fs.mkdtempSync(path.join(os.tmpdir(), "bench-chromium-")), {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

async function pageWith100kPoints(url: string) {
  const { runId, workerId, jobId, stop } = await runForThisWorker(url, 10_000, "page-100k");
  const names = [
    "reward/mean",
    "eval/score",
    "loss/policy",
    "entropy",
    "kl",
    "train/clip_frac",
    "episode/length",
    "perf/tokens_per_s",
    "reward/std",
    "train/grad_norm",
  ];
  for (let start = 1; start <= 10_000; start += 1000) {
    const metrics = [];
    for (let step = start; step < start + 1000; step++)
      for (const name of names) metrics.push({ step, name, value: Math.sin(step / 500) + Math.random() * 0.1 });
    await trpc(url, "worker.report", { workerId, jobId, step: start + 999, metrics }, true);
  }
  const context = await launchChromium();
  const page = await context.newPage();
  const started = performance.now();
  await page.goto(`${url}/runs/${runId}`, { waitUntil: "domcontentloaded" });
  const documentMs = performance.now() - started;
  // Interactive: every headline chart says it holds its 10,000 points and has drawn its curve.
  await page.waitForFunction(
    () => {
      const charts = [...document.querySelectorAll('section[aria-label="Charts"] figure[data-points]')];
      return (
        charts.length >= 8 && charts.every((figure) => figure.getAttribute("data-points") === "10000" && figure.querySelector("path.recharts-line-curve[d]"))
      );
    },
    null,
    { timeout: 120_000, polling: 50 },
  );
  const ms = performance.now() - started;
  const screenshots = path.join(root, "test-results", "screenshots");
  fs.mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: path.join(screenshots, "run-page-100k-points.png"), fullPage: true });
  stop();
  await context.close();
  return { ms, documentMs };
}

/** The compare view's panels: four metrics against the step, wall time, tokens and another metric. */
const COMPARE_PANELS = "reward/mean~step~0.6;loss/policy~time~0.6;loss/kl~tokens~0.6;reward/std~metric:reward/mean~0.6";
const COMPARE_RUNS = 10;
const COMPARE_STEPS = 1000;

/**
 * Ten finished runs of 1,000 steps, opened in the compare view with four panels (one per x-axis kind) in a fresh
 * Chromium: the time until every panel has drawn all ten runs' curves.
 */
async function compareTenRuns(url: string) {
  const runIds: string[] = [];
  for (let r = 0; r < COMPARE_RUNS; r++) {
    const { runId, workerId, jobId, stop } = await runForThisWorker(url, COMPARE_STEPS, `compare-${r}`);
    const metrics = [];
    const start = Date.now() - COMPARE_STEPS * 1000;
    for (let step = 1; step <= COMPARE_STEPS; step++) {
      const progress = step / COMPARE_STEPS + r * 0.01;
      // A step every second or so, as a real run's wall times.
      const wallTime = new Date(start + step * (900 + 20 * r));
      metrics.push(
        { step, wallTime, name: "reward/mean", value: progress + Math.random() * 0.1 },
        { step, wallTime, name: "reward/std", value: 0.3 - progress * 0.1 + Math.random() * 0.02 },
        { step, wallTime, name: "loss/policy", value: 1 / (1 + step) + Math.random() * 0.01 },
        { step, wallTime, name: "loss/kl", value: progress * 0.02 + Math.random() * 0.002 },
        { step, wallTime, name: "train/tokens", value: 512 + r },
      );
    }
    await trpc(url, "worker.report", { workerId, jobId, step: COMPARE_STEPS, metrics }, true);
    await trpc(url, "worker.finish", { workerId, jobId, outcome: "completed", reason: null }, true);
    stop();
    runIds.push(runId);
  }
  const context = await launchChromium();
  const page = await context.newPage();
  const started = performance.now();
  await page.goto(`${url}/compare?runs=${runIds.join(",")}&panels=${COMPARE_PANELS}`, { waitUntil: "domcontentloaded" });
  // Interactive: every panel draws a line for each of the ten runs.
  await page.waitForFunction(
    (runs) => {
      const figures = [...document.querySelectorAll("figure[data-lines]")];
      return (
        figures.length === 4 && figures.every((f) => f.getAttribute("data-lines") === String(runs) && f.querySelectorAll("path.compare-line[d]").length >= runs)
      );
    },
    COMPARE_RUNS,
    { timeout: 120_000, polling: 50 },
  );
  const ms = performance.now() - started;
  // The page reads its data as it renders (app/compare/page.tsx): its HTML's arrival is the server's share.
  const htmlMs = await page.evaluate(() => (performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming).responseEnd);
  await page.screenshot({ path: path.join(root, "test-results", "screenshots", "compare-10-runs.png"), fullPage: true });
  await context.close();
  return { ms, htmlMs };
}

buildIfStale(root);
const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bench-bases-"));
await new TrainingClient(BaseModel.create({ vocabSize: 262, contextLength: 48, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 1 })).saveWeightsForSampler(
  path.join(basesDir, "bench-base"),
);

const rateOnly = process.argv.includes("--rate-only");
if (process.argv.includes("--compare-only")) {
  const server = await startServer(0, basesDir);
  const { ms, htmlMs } = await compareTenRuns(server.url);
  await server.stop();
  console.log(`HTML with the data received at ${Math.round(htmlMs)} ms; load average (1 min) at the end: ${os.loadavg()[0]!.toFixed(2)}`);
  console.log(JSON.stringify({ compare_10_runs_ms: Math.round(ms) }));
  process.exit(0);
}
const quiet = rateOnly ? null : await startServer(0, basesDir);
const latency = quiet ? await measureLatency(quiet.url) : { p50: NaN, p95: NaN, received: 0 };
const { ms: interactiveMs, documentMs } = quiet ? await pageWith100kPoints(quiet.url) : { ms: NaN, documentMs: NaN };
const compare = quiet ? await compareTenRuns(quiet.url) : { ms: NaN, htmlMs: NaN };
await quiet?.stop();

const training = await startServer(1, basesDir);
// A warm-up run (the worker compiles its kernels), then runs without and with viewers in turn, so that a change in
// the machine's other load falls on both; the figures are medians.
await stepRate(training.url, 0);
const trials = Number(process.argv[process.argv.indexOf("--trials") + 1] || 3) || 3;
const rates: Record<"alone" | "watched", number[]> = { alone: [], watched: [] };
const trialTimes: { kind: string; startUs: number; endUs: number }[] = [];
const cpu = { alone: { server: 0, workers: 0, bench: 0 }, watched: { server: 0, workers: 0, bench: 0 } };
for (let trial = 0; trial < trials; trial++) {
  for (const kind of ["alone", "watched"] as const) {
    const before = cpuSeconds(training.pid);
    const benchBefore = process.cpuUsage();
    const startUs = Number(process.hrtime.bigint() / 1000n);
    rates[kind].push(await stepRate(training.url, kind === "alone" ? 0 : viewers));
    // The profiles' timestamps are the same monotonic clock, so a profile can be cut to each trial.
    if (cpuProfDir) trialTimes.push({ kind, startUs, endUs: Number(process.hrtime.bigint() / 1000n) });
    const benchUsed = process.cpuUsage(benchBefore);
    cpu[kind].bench += (benchUsed.user + benchUsed.system) / 1e6 / trials;
    const after = cpuSeconds(training.pid);
    cpu[kind].server += (after.server - before.server) / trials;
    cpu[kind].workers += (after.workers - before.workers) / trials;
  }
}
await training.stop();
if (cpuProfDir) fs.writeFileSync(path.join(cpuProfDir, "trials.json"), JSON.stringify(trialTimes));
const median = (xs: number[]) => percentile(xs, 50);
const alone = median(rates.alone);
const watched = median(rates.watched);

console.log(
  formatTable(
    ["measure", "value"],
    [
      ["point → subscriber latency p50 (ms)", latency.p50],
      ["point → subscriber latency p95 (ms)", latency.p95],
      ["points received", latency.received],
      ["training steps/s, no viewer", alone],
      [`training steps/s, ${viewers} SSE viewers`, watched],
      ["step-rate ratio", watched / alone],
      ["training steps/s per trial, no viewer", rates.alone.map((r) => r.toFixed(1)).join(" ")],
      [`training steps/s per trial, ${viewers} viewers`, rates.watched.map((r) => r.toFixed(1)).join(" ")],
      [`web server CPU s per ${RATE_STEPS}-step run, no viewer`, cpu.alone.server],
      [`web server CPU s per ${RATE_STEPS}-step run, ${viewers} viewers`, cpu.watched.server],
      [`worker CPU s per ${RATE_STEPS}-step run, no viewer`, cpu.alone.workers],
      [`worker CPU s per ${RATE_STEPS}-step run, ${viewers} viewers`, cpu.watched.workers],
      [`SSE clients' CPU s per ${RATE_STEPS}-step run (this process), no viewer`, cpu.alone.bench],
      [`SSE clients' CPU s per ${RATE_STEPS}-step run (this process), ${viewers} viewers`, cpu.watched.bench],
      ["load average (1 min) at the end", os.loadavg()[0]!.toFixed(2)],
      ["run page with 100,000 points: HTML parsed (ms)", documentMs],
      ["run page with 100,000 points: all charts full (ms)", interactiveMs],
      [`compare view, ${COMPARE_RUNS} runs × 4 panels of ${COMPARE_STEPS} steps: HTML with the data received (ms)`, compare.htmlMs],
      [`compare view, ${COMPARE_RUNS} runs × 4 panels of ${COMPARE_STEPS} steps: every curve drawn (ms)`, compare.ms],
    ],
  ),
);
console.log(
  JSON.stringify({
    p50_ms: Math.round(latency.p50 * 10) / 10,
    p95_ms: Math.round(latency.p95 * 10) / 10,
    step_rate_ratio_100_viewers: Math.round((watched / alone) * 1000) / 1000,
    run_page_interactive_ms_100k_points: Math.round(interactiveMs),
    compare_10_runs_ms: Math.round(compare.ms),
  }),
);
process.exit(0);
