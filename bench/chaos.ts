/**
 * `npm run bench:chaos`: do runs survive their processes being killed? Three runs train at once on the real
 * server (`tinkerlab start`, two local workers, the embedded database): two LoRA runs on one base and one
 * full-parameter run. Meanwhile the bench SIGKILLs a worker, then the web server, then a worker again, at random
 * moments, for 10 rounds; after the web server's kill it starts it again on the same database and artifacts.
 * Once every run has ended it reads each run's metric points and prints a table, then one JSON line:
 *
 *   {"runs_completed":…,"points_lost":…,"steps_redone":…,"values_compared":…,"values_differing":…,…}
 *
 *   npm run bench:chaos [-- --rounds 10] [--steps 2000] [--seed 1] [--max-losses 3] [--checkpoint-every 5]
 *
 * Target (issues #27, #39): every run completes, no point lost, and every step trained again reports the values
 * the server stored for it.
 *
 * - A random moment: after each kill the bench waits until some run reports a new step (so each kill meets work in
 *   flight, not a machine still waiting for a lease to run out), then 0.5 to 5 s more (seeded, --seed).
 * - The worker killed is one that holds a job, when one does. Worker PIDs come from the "[worker PID] registered"
 *   lines the server prints; the web server is the child of the tsx process the bench starts (tsx runs the script
 *   in a child process).
 * - Points lost: of the series an RL run reports at every training step (PER_STEP below), the steps 1..N a run
 *   lacks, plus eval/score at steps 0 and N. (A point is never stored twice: (run, name, step) is unique, and the
 *   first write wins.)
 * - Steps redone: for each resume (a worker's "job … started from step S" after a loss), the steps from S up to the
 *   highest step the run had stored before it (the run's step, read every 500 ms and right after each kill), i.e.
 *   training steps whose results the server already had and that were trained again.
 * - Values differing: the server keeps the first value of a (run, name, step) and drops the rest, so the bench
 *   records what each worker sends (bench/lib/report-tap.cjs, preloaded into the server's processes). A point sent
 *   by two lives of a run's job (a life: one worker's hold of it, between a start and a loss) was computed twice;
 *   each such point is compared with the stored value, except the perf/* series, which time the step. A checkpoint
 *   holds the weights, AdamW's moments and the client's generator, and a step's episodes are drawn from its number,
 *   so a step trained again should repeat its values exactly.
 * - The web server's peak RSS: the largest VmHWM (and VmRSS) of /proc/PID/status, read every 500 ms, over all the
 *   web server's incarnations.
 *
 * TINKERLAB_MAX_WORKER_LOSSES is the product's default, 3 (--max-losses changes it): random kills must not fail a
 * run that makes progress. The table says how many losses in a row a job actually had.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { Rng } from "../lib/model/rng";
import { saveTinyBase, tinyExperiment } from "../test/support/tiny-run";
import { formatTable } from "./lib/measure";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "10" },
    steps: { type: "string", default: "2000" },
    seed: { type: "string", default: "1" },
    "max-losses": { type: "string", default: "3" },
    "checkpoint-every": { type: "string", default: "5" },
  },
});
const ROUNDS = positiveInt("rounds");
const STEPS = positiveInt("steps");
const SEED = positiveInt("seed");
const MAX_LOSSES = positiveInt("max-losses");
const CHECKPOINT_EVERY = positiveInt("checkpoint-every");

function positiveInt(name: keyof typeof args): number {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`--${name} must be a whole number of 1 or more; got ${args[name]}`);
    process.exit(2);
  }
  return value;
}

const root = path.resolve(import.meta.dirname, "..");
const TOKEN = "bench-chaos-worker-token-0123456789";
const rng = new Rng(SEED);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s`;
const note = (line: string) => console.log(`[chaos ${elapsed()}] ${line}`);

// ---------------------------------------------------------------------------------------------------------------
// The server: one `tinkerlab start` at a time, on a fixed port, database and artifacts, so a restart reopens them.

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bench-chaos-"));
const basesDir = path.join(dir, "bases");
const logFile = path.join(dir, "server-output.log");
const tapDir = path.join(dir, "reports");
fs.mkdirSync(tapDir);
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const serverEnv: NodeJS.ProcessEnv = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  NODE_ENV: "production",
  NEXT_TELEMETRY_DISABLED: "1",
  PORT: String(port),
  PGLITE_DATA_DIR: path.join(dir, "db"),
  ARTIFACTS_DIR: path.join(dir, "artifacts"),
  TINKERLAB_BASES_DIR: basesDir,
  TINKERLAB_EXAMPLES: "off",
  TINKERLAB_LOCAL_WORKERS: "2",
  TINKERLAB_WORKER_TOKEN: TOKEN,
  TINKERLAB_MAX_WORKER_LOSSES: String(MAX_LOSSES),
  NODE_OPTIONS: `--require ${path.join(root, "bench/lib/report-tap.cjs")}`,
  BENCH_REPORT_TAP_DIR: tapDir,
};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

type Incarnation = { wrapper: ChildProcess; serverPid: number; serverStart: string | null; exited: Promise<void> };
let current: Incarnation | null = null;
/**
 * The workers the servers started, by PID: when each started (so a PID the system has since given to another
 * process is never taken for ours) and the jobs it holds (job id to run id).
 */
const workers = new Map<number, { startTime: string; jobs: Map<string, string> }>();
/** Each job's run, from the workers' "job … (run …) started" lines (a resumed job keeps its id). */
const jobRuns = new Map<string, string>();

/** The start time of a process (field 22 of /proc/PID/stat), or null when there is no such process (or a zombie). */
function startTimeOf(pid: number): string | null {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return fields[0] === "Z" ? null : fields[19]!;
  } catch {
    return null;
  }
}
/** Workers of ours that are still running. */
const liveWorkers = () => [...workers.entries()].filter(([pid, w]) => startTimeOf(pid) === w.startTime).map(([pid]) => pid);

/** What the server prints, line by line (its workers print to the same stream): kept in the log, parsed for PIDs. */
function onServerLine(line: string) {
  fs.appendFileSync(logFile, `${line}\n`);
  let m = /\[worker (\d+)\] registered as/.exec(line);
  if (m) {
    const startTime = startTimeOf(Number(m[1]));
    if (startTime) workers.set(Number(m[1]), { startTime, jobs: new Map() });
  }
  m = /\[worker (\d+)\] job (job_\w+) \(run (run_\w+)\) started(?: from step (\d+))?/.exec(line);
  if (m) {
    const [, pid, jobId, runId, from] = m;
    workers.get(Number(pid))?.jobs.set(jobId!, runId!);
    jobRuns.set(jobId!, runId!);
    runStarted(runId!, from === undefined ? 0 : Number(from));
  }
  m = /\[worker (\d+)\] job (job_\w+) (completed|failed|cancelled|paused|preempted)/.exec(line);
  if (m) workers.get(Number(m[1]))?.jobs.delete(m[2]!);
}

function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void) {
  let buffer = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    buffer += chunk;
    let cut: number;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      onLine(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 1);
    }
  });
  stream.on("end", () => buffer && onLine(buffer));
}

/** Starts `tinkerlab start` and resolves once it is ready (or rejects with what it printed). */
async function startServer(): Promise<Incarnation> {
  const wrapper = spawn(process.execPath, [path.join(root, "node_modules/tsx/dist/cli.mjs"), path.join(root, "bin/tinkerlab.ts"), "start"], {
    cwd: root,
    env: serverEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => wrapper.once("exit", () => resolve()));
  let ready = false;
  const printed: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server was not ready within 180 s:\n${printed.slice(-40).join("\n")}`)), 180_000);
    const onLine = (line: string) => {
      onServerLine(line);
      if (!ready) printed.push(line);
      if (!ready && line.includes("Tinkerlab is ready at")) {
        ready = true;
        clearTimeout(timer);
        resolve();
      }
    };
    lines(wrapper.stdout!, onLine);
    lines(wrapper.stderr!, onLine);
    void exited.then(() => {
      clearTimeout(timer);
      if (!ready) reject(new Error(`the server exited (${wrapper.exitCode ?? wrapper.signalCode}) before it was ready:\n${printed.slice(-40).join("\n")}`));
    });
  });
  const serverPid = childOf(wrapper.pid!);
  return { wrapper, serverPid, serverStart: startTimeOf(serverPid), exited };
}

/** The web server's own process: tsx runs the script in a child of the process the bench started. */
function childOf(pid: number): number {
  const children = execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" })
    .trim()
    .split("\n")
    .filter(Boolean)
    .map(Number);
  if (children.length !== 1) throw new Error(`expected one child of tsx (${pid}), found ${children.length}`);
  return children[0]!;
}

/** What this bench started and is still running (the tsx wrapper, the web server, its workers), killed on exit. */
process.on("exit", () => {
  for (const pid of liveWorkers()) process.kill(pid, "SIGKILL");
  if (current && current.wrapper.exitCode === null && current.wrapper.signalCode === null) {
    if (current.serverStart && startTimeOf(current.serverPid) === current.serverStart) process.kill(current.serverPid, "SIGKILL");
    current.wrapper.kill("SIGKILL");
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Calls, as the browser's client makes them.

async function call<T>(procedure: string, input: unknown, method: "GET" | "POST" = "POST"): Promise<T> {
  const address = `${url}/api/trpc/${procedure}`;
  const response =
    method === "GET"
      ? await fetch(`${address}?input=${encodeURIComponent(JSON.stringify({ json: input }))}`, { signal: AbortSignal.timeout(30_000) })
      : await fetch(address, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ json: input }),
          signal: AbortSignal.timeout(30_000),
        });
  const body = await response.json();
  if (body.error) throw new Error(`${procedure}: ${body.error.json.message}`);
  return body.result.data.json as T;
}

type Run = { id: string; name: string; status: string; step: number; reason: string | null };
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

// ---------------------------------------------------------------------------------------------------------------
// Steps redone. A job resumed from step S trains S+1, S+2, … again; those the run had already stored (its step
// before the loss) are redone. The run's step is set by each report, so after a resume it first stays where it
// was, then falls to S+1 with the resumed job's first report: a life of the job counts from the first change.

type Life = { start: number; highBefore: number; baseline: number; changed: boolean; reached: number };
type Tracker = { high: number; last: number; lives: Life[]; status: string; reason: string | null; changedAt: number; askedAt: number };
const trackers = new Map<string, Tracker>();

/** Starts seen before the bench had the run's id back from runs.launch. */
const earlyStarts = new Map<string, number[]>();

function runStarted(runId: string, from: number) {
  const t = trackers.get(runId);
  if (!t) return void earlyStarts.set(runId, [...(earlyStarts.get(runId) ?? []), from]);
  t.lives.push({ start: from, highBefore: t.high, baseline: t.last, changed: false, reached: from });
  if (t.lives.length > 1) note(`run ${runId} resumed from step ${from} (had stored step ${t.high})`);
}

/** What runs.byId said about the run, asked at `askedAt` (an answer older than one already taken is dropped). */
function sampleRun(run: Run, askedAt: number) {
  const t = trackers.get(run.id)!;
  if (askedAt < t.askedAt) return;
  t.askedAt = askedAt;
  if (run.step !== t.last) t.changedAt = Date.now();
  t.last = run.step;
  t.status = run.status;
  t.reason = run.reason;
  const life = t.lives.at(-1);
  if (!life) return;
  if (!life.changed && run.step !== life.baseline) life.changed = true;
  if (life.changed) life.reached = Math.max(life.reached, run.step);
  t.high = Math.max(t.high, life.reached);
}

const stepsRedone = (t: Tracker) => t.lives.reduce((sum, life) => sum + Math.max(0, Math.min(life.reached, life.highBefore) - life.start), 0);

async function sampleRuns() {
  await Promise.all(
    [...trackers.keys()].map(async (id) => {
      try {
        const askedAt = performance.now();
        sampleRun(await call<Run>("runs.byId", { id }, "GET"), askedAt);
      } catch {
        // the server is down or restarting
      }
    }),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The web server's peak RSS, over all its incarnations.

let peakRssKb = 0;
function sampleRss(): number {
  if (!current) return 0;
  try {
    const status = fs.readFileSync(`/proc/${current.serverPid}/status`, "utf8");
    const [rss, hwm] = ["VmRSS", "VmHWM"].map((field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0));
    peakRssKb = Math.max(peakRssKb, rss!, hwm!);
    return rss!;
  } catch {
    return 0; // the process has just been killed
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Kills.

let workerKills = 0;
let serverKills = 0;
const restartSeconds: number[] = [];

async function killWorker() {
  const live = liveWorkers();
  const busy = live.filter((pid) => workers.get(pid)!.jobs.size > 0);
  const choices = busy.length > 0 ? busy : live;
  if (choices.length === 0) return note("no live worker to kill");
  const pid = choices[Math.floor(rng.uniform() * choices.length)]!;
  const runs = [...workers.get(pid)!.jobs.values()];
  process.kill(pid, "SIGKILL");
  workerKills++;
  note(`SIGKILL worker ${pid}${runs.length ? ` (running ${runs.join(", ")})` : " (idle)"}`);
  // A report already on its way may still land: read the runs' steps once it has.
  await sleep(300);
  await sampleRuns();
}

async function killServer() {
  const incarnation = current!;
  sampleRss();
  process.kill(incarnation.serverPid, "SIGKILL");
  serverKills++;
  const killedAt = Date.now();
  note(`SIGKILL web server ${incarnation.serverPid}`);
  const timer = setTimeout(() => incarnation.wrapper.kill("SIGKILL"), 10_000);
  await incarnation.exited;
  clearTimeout(timer);
  current = null;
  // Its local workers leave when their standard input closes.
  const deadline = Date.now() + 15_000;
  while (liveWorkers().length > 0 && Date.now() < deadline) await sleep(100);
  for (;;) {
    try {
      current = await startServer();
      break;
    } catch (error) {
      if (Date.now() - killedAt > 300_000) throw error;
      note(`restart failed, trying again: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
      await sleep(2000);
    }
  }
  restartSeconds.push((Date.now() - killedAt) / 1000);
  note(`web server ${current.serverPid} ready again after ${restartSeconds.at(-1)!.toFixed(1)} s`);
  // Before any resumed job reports (a lease takes 20 s to run out): the steps the runs had stored.
  await sampleRuns();
}

/** Until some unfinished run reports a new step after `since` (at most `seconds`); false when every run has ended. */
async function waitForProgress(since: number, seconds: number): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const open = [...trackers.values()].filter((t) => !TERMINAL.has(t.status));
    if (open.length === 0) return false;
    if (open.some((t) => t.changedAt > since)) return true;
    if (Date.now() > deadline) {
      note(`no run reported a step in ${seconds} s; killing anyway`);
      return true;
    }
    await sleep(250);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The bench.

buildIfStale(root);
await saveTinyBase(basesDir);
note(`folder ${dir}; --rounds ${ROUNDS} --steps ${STEPS} --seed ${SEED} --max-losses ${MAX_LOSSES} --checkpoint-every ${CHECKPOINT_EVERY}`);
current = await startServer();
const readyRssKb = sampleRss();
note(`web server ${current.serverPid} ready at ${url} (RSS ${(readyRssKb / 1024).toFixed(0)} MiB)`);
for (const deadline = Date.now() + 120_000; liveWorkers().length < 2; ) {
  if (Date.now() > deadline) throw new Error("two local workers did not register within 120 s");
  await sleep(200);
}

const plan = [
  { name: "lora-a", training: { mode: "lora", rank: 4 } },
  { name: "lora-b", training: { mode: "lora", rank: 4 } },
  { name: "full", training: { mode: "full" } },
];
const runIds: string[] = [];
for (const { name, training } of plan) {
  const experiment = tinyExperiment(name, STEPS);
  const config = { ...experiment.config, agent: { ...experiment.config.agent, training }, checkpointEvery: CHECKPOINT_EVERY };
  const { id } = await call<{ id: string }>("experiments.create", { name, config });
  const { runId } = await call<{ runId: string }>("runs.launch", { experimentId: id });
  trackers.set(runId, { high: 0, last: 0, lives: [], status: "queued", reason: null, changedAt: 0, askedAt: 0 });
  for (const from of earlyStarts.get(runId) ?? []) runStarted(runId, from);
  runIds.push(runId);
  note(`launched ${name} (${training.mode}) as ${runId}`);
}

let sampling = true;
const sampler = (async () => {
  while (sampling) {
    sampleRss();
    await Promise.all([sampleRuns(), sleep(500)]);
  }
})();

let roundsDone = 0;
let lastKill = Date.now();
chaos: for (let round = 1; round <= ROUNDS; round++) {
  for (const target of ["worker", "server", "worker"] as const) {
    if (!(await waitForProgress(lastKill, 120))) break chaos;
    await sleep(500 + rng.uniform() * 4500);
    if ([...trackers.values()].every((t) => TERMINAL.has(t.status))) break chaos;
    note(`round ${round}: ${target}`);
    if (target === "worker") await killWorker();
    else await killServer();
    lastKill = Date.now();
  }
  roundsDone = round;
}
note(`${roundsDone} of ${ROUNDS} rounds done (${workerKills} worker kills, ${serverKills} web server kills); waiting for the runs to end`);

const endBy = Date.now() + 30 * 60_000;
while (![...trackers.values()].every((t) => TERMINAL.has(t.status))) {
  if (Date.now() > endBy) {
    note("runs still going after 30 minutes; measuring as they are");
    break;
  }
  await sleep(1000);
}
sampling = false;
await sampler;
await sampleRuns();

// ---------------------------------------------------------------------------------------------------------------
// What the runs kept.

type Point = { seq: number; name: string; step: number; value: number | string };
/**
 * The series an RL run reports at every training step whatever its episodes did (lib/rl/train.ts, rolloutMetrics
 * and policyUpdate); others (env/*, per-reward means, the loss terms of a step with no batch) come and go with the
 * data. A step's points go in one report, stored in one statement, so a lost report shows in all of these.
 */
const PER_STEP = [
  "reward/mean",
  "reward/std",
  "episode/length",
  "episode/truncated",
  "episode/invalid_actions",
  "episode/action_tokens",
  "train/sequences",
  "train/lr",
  "perf/step_seconds",
  "perf/sampled_tokens_per_s",
  "perf/tokens_per_s",
];
async function allPoints(runId: string): Promise<Point[]> {
  const points: Point[] = [];
  for (let afterSeq = 0; ; ) {
    const page = await call<{ points: Point[]; lastSeq: number }>("runs.metrics", { runId, afterSeq, limit: 200_000 }, "GET");
    points.push(...page.points);
    if (page.points.length < 200_000) return points;
    afterSeq = page.lastSeq;
  }
}
async function allLogs(runId: string): Promise<string[]> {
  const messages: string[] = [];
  for (let afterSeq = 0; ; ) {
    const page = await call<{ seq: number; message: string }[]>("runs.logs", { runId, afterSeq }, "GET");
    messages.push(...page.map((l) => l.message));
    if (page.length < 1000) return messages;
    afterSeq = page.at(-1)!.seq;
  }
}

/**
 * What the workers sent, from the report tap: for each run, each (name, step) and the value each life of its job
 * sent (a life: one worker's id with the job's id; a report retried within a life sends the same values again).
 */
function sentValues(): Map<string, Map<string, Map<string, number>>> {
  const byRun = new Map<string, Map<string, Map<string, number>>>();
  for (const file of fs.readdirSync(tapDir)) {
    for (const line of fs.readFileSync(path.join(tapDir, file), "utf8").split("\n")) {
      if (!line) continue;
      const report = JSON.parse(line) as { workerId: string; jobId: string; points: [number, string, number][] };
      const runId = jobRuns.get(report.jobId);
      if (!runId) continue;
      const run = byRun.get(runId) ?? byRun.set(runId, new Map()).get(runId)!;
      for (const [step, name, value] of report.points) {
        const key = `${name}@${step}`;
        const lives = run.get(key) ?? run.set(key, new Map()).get(key)!;
        lives.set(`${report.workerId}/${report.jobId}`, value);
      }
    }
  }
  return byRun;
}
const sameValue = (a: number, b: number) => a === b || (Number.isNaN(a) && Number.isNaN(b));
/** Series that time the step: a step trained again takes another time. */
const timed = (name: string) => name.startsWith("perf/");

type Differing = { key: string; stored: number; sent: number[] };
/** The points of a run computed by more than one life, compared with the stored values. */
function compareRedone(stored: Point[], sent: Map<string, Map<string, number>> | undefined) {
  const storedValue = new Map(stored.map((p) => [`${p.name}@${p.step}`, Number(p.value)]));
  const steps = new Set<number>();
  let compared = 0;
  const differing: Differing[] = [];
  for (const [key, lives] of sent ?? []) {
    if (lives.size < 2) continue;
    const [name, step] = [key.slice(0, key.lastIndexOf("@")), Number(key.slice(key.lastIndexOf("@") + 1))];
    steps.add(step);
    const value = storedValue.get(key);
    if (timed(name) || value === undefined) continue;
    compared++;
    const other = [...lives.values()].filter((v) => !sameValue(v, value));
    if (other.length > 0) differing.push({ key, stored: value, sent: other });
  }
  const series = new Map<string, number>();
  for (const d of differing) {
    const name = d.key.slice(0, d.key.lastIndexOf("@"));
    series.set(name, (series.get(name) ?? 0) + 1);
  }
  return { stepsSentTwice: steps.size, compared, differing, series };
}

const results = [];
const points = new Map<string, Point[]>();
for (const runId of runIds) points.set(runId, await allPoints(runId));
const sent = sentValues();
for (const [i, runId] of runIds.entries()) {
  const t = trackers.get(runId)!;
  const have = new Set(points.get(runId)!.map((p) => `${p.name}@${p.step}`));
  const expected = PER_STEP.flatMap((name) => Array.from({ length: STEPS }, (_, s) => `${name}@${s + 1}`));
  expected.push("eval/score@0", `eval/score@${STEPS}`);
  const missing = expected.filter((key) => !have.has(key));
  const redone = compareRedone(points.get(runId)!, sent.get(runId));
  const logs = await allLogs(runId);
  const inARow = Math.max(0, ...logs.map((m) => Number(/\((\d+) of \d+ losses in a row/.exec(m)?.[1] ?? 0)));
  results.push({
    name: plan[i]!.name,
    mode: plan[i]!.training.mode,
    runId,
    status: t.status,
    reason: t.reason,
    step: t.last,
    points: points.get(runId)!.length,
    lost: missing.length,
    missing,
    resumes: Math.max(0, t.lives.length - 1),
    redone: stepsRedone(t),
    stepsSentTwice: redone.stepsSentTwice,
    compared: redone.compared,
    differing: redone.differing,
    series: redone.series,
    inARow,
  });
}

current.wrapper.kill("SIGTERM");
await Promise.race([current.exited, sleep(20_000)]);

const completed = results.filter((r) => r.status === "completed").length;
const lost = results.reduce((sum, r) => sum + r.lost, 0);
const redone = results.reduce((sum, r) => sum + r.redone, 0);
const compared = results.reduce((sum, r) => sum + r.compared, 0);
const differing = results.reduce((sum, r) => sum + r.differing.length, 0);
const differingSeries = new Map<string, number>();
for (const r of results) for (const [name, n] of r.series) differingSeries.set(name, (differingSeries.get(name) ?? 0) + n);
/** "reward/mean ×3, loss/policy ×2": the series whose values differ, most first. */
const seriesList = (series: Map<string, number>) =>
  [...series.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ×${n}`)
    .join(", ") || "-";
const peakRssMb = peakRssKb / 1024;
console.log();
console.log(
  formatTable(
    ["run", "mode", "status", "step", "points", "lost", "resumes", "steps redone", "values compared", "values differing", "losses in a row (max)"],
    [
      ...results.map((r) => [
        r.name,
        r.mode,
        r.status,
        String(r.step),
        String(r.points),
        String(r.lost),
        String(r.resumes),
        String(r.redone),
        `${r.compared} (${r.stepsSentTwice} steps)`,
        r.differing.length ? `${r.differing.length}: ${seriesList(r.series)}` : "0",
        String(r.inARow),
      ]),
      [
        "all",
        "",
        `${completed} of ${results.length} completed`,
        "",
        String(results.reduce((s, r) => s + r.points, 0)),
        String(lost),
        String(results.reduce((s, r) => s + r.resumes, 0)),
        String(redone),
        `${compared} (${results.reduce((s, r) => s + r.stepsSentTwice, 0)} steps)`,
        String(differing),
        "",
      ],
    ],
  ),
);
console.log();
console.log(
  formatTable(
    ["figure", "value"],
    [
      ["rounds (worker, web server, worker)", `${roundsDone} of ${ROUNDS}`],
      ["SIGKILLs: workers / web server", `${workerKills} / ${serverKills}`],
      [
        "web server restart to ready, median (s)",
        restartSeconds.length ? [...restartSeconds].sort((a, b) => a - b)[Math.floor((restartSeconds.length - 1) / 2)]!.toFixed(1) : "-",
      ],
      ["web server peak RSS (MiB)", peakRssMb.toFixed(0)],
      ["web server RSS when first ready (MiB)", (readyRssKb / 1024).toFixed(0)],
      ["wall time (s)", ((Date.now() - started) / 1000).toFixed(0)],
      ["server output", logFile],
    ],
  ),
);
for (const r of results) {
  if (r.status !== "completed") console.log(`${r.name} (${r.runId}) ended ${r.status}: ${r.reason ?? "no reason given"}`);
  if (r.lost > 0) console.log(`${r.name}: ${r.lost} points missing, e.g. ${r.missing.slice(0, 12).join(", ")}`);
  for (const d of r.differing.slice(0, 12)) console.log(`${r.name}: ${d.key} stored ${d.stored}, sent again ${d.sent.join(", ")}`);
}
const met = completed === results.length && lost === 0 && differing === 0;
console.log(
  met
    ? "target met: every run completed, no point lost, every step trained again repeated its values"
    : "TARGET MISSED (every run completes, 0 points lost, 0 values differing)",
);
console.log(
  JSON.stringify({
    runs_completed: completed,
    points_lost: lost,
    steps_redone: redone,
    values_compared: compared,
    values_differing: differing,
    differing_series: Object.fromEntries(differingSeries),
    runs: results.length,
    web_server_peak_rss_mib: Math.round(peakRssMb),
    worker_kills: workerKills,
    server_kills: serverKills,
    rounds: roundsDone,
  }),
);
process.exit(met ? 0 : 1);
