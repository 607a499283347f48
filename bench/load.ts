/**
 * `npm run bench:load`: do runs survive a busy machine and each other? On the real server (`tinkerlab start`, its
 * local worker, the embedded database), three jobs run side by side, as a newcomer and a neighbour would start them:
 * - a custom multi-turn game against a scripted opponent (bench/newcomer/take-away.ts) with the multi-turn
 *   starter's defaults, from the generalist base;
 * - a custom single-turn task (bench/newcomer/string-transform.ts) with the single-turn starter's defaults;
 * - in another project, the largest evaluation the API permits (episodes and temperature at their limits) of a
 *   checkpoint of a built-in use case.
 * First with CPU hogs (busy processes, `--hogs`, default twice the cores, so that the load is about three times
 * the cores), then the same without. It prints a table, then one JSON line:
 *
 *   {"worker_losses":…,"runs_completed":…,"runs_total":…,"steps_redone":…,"step_rate_under_load_ratio":…,…}
 *
 *   npm run bench:load [-- --hogs N] [--steps N] [--sft-steps N] [--episodes N] [--phases load,idle]
 *
 * Target (issue #38): 0 worker losses, every run completes, no step redone without a worker loss, and each run's
 * step rate under load at least its fair share of the CPU, 1 / (1 + hogs per core), of its rate without hogs.
 *
 * - Worker losses: "Worker lost" lines in the runs' logs, and workers that lost their lease (the server's output).
 * - A run's step rate: its steps over its running time, from its start to its end as the server recorded them (each
 *   run is read every 500 ms over the API); the evaluation's is its episodes over its running time.
 * - Steps redone: for each resume ("Resuming from the checkpoint of step S" in a run's log), the steps from S up to
 *   the highest step seen (a run that resumed once: the steps trained again).
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createTRPCClient, httpLink } from "@trpc/client";
import superjson from "superjson";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { starters } from "../components/editor/starter";
import type { ExperimentConfigInput } from "../lib/sdk/experiment";
import type { AppRouter } from "../server/api";
import { EVALUATION_LIMITS } from "../lib/trpc/limits";
import { freePort } from "../test/e2e/support/server";
import { formatTable } from "./lib/measure";

const cores = os.availableParallelism();
const { values: args } = parseArgs({
  options: {
    hogs: { type: "string", default: String(2 * cores) },
    steps: { type: "string" },
    "sft-steps": { type: "string" },
    episodes: { type: "string", default: String(EVALUATION_LIMITS.episodes) },
    phases: { type: "string", default: "load,idle" },
  },
});
const HOGS = wholeNumber("hogs", 0);
const EPISODES = wholeNumber("episodes", 1);
const PHASES = args.phases!.split(",").map((phase) => {
  if (phase !== "load" && phase !== "idle") fail(`--phases takes load and idle, comma-separated; got '${phase}'`);
  return phase as "load" | "idle";
});

function wholeNumber(name: keyof typeof args, min: number): number {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < min) fail(`--${name} must be a whole number of ${min} or more; got ${args[name]}`);
  return value;
}
function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

const root = path.resolve(import.meta.dirname, "..");
const started = Date.now();
const note = (line: string) => console.log(`[load ${((Date.now() - started) / 1000).toFixed(1).padStart(7)} s] ${line}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------------------
// The server, as a user starts it.

buildIfStale(root);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bench-load-"));
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const serverOutput: string[] = [];
const server = spawn(process.execPath, [path.join(root, "node_modules/tsx/dist/cli.mjs"), path.join(root, "bin/tinkerlab.ts"), "start"], {
  cwd: root,
  env: {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: "production",
    NEXT_TELEMETRY_DISABLED: "1",
    PORT: String(port),
    PGLITE_DATA_DIR: path.join(dir, "db"),
    ARTIFACTS_DIR: path.join(dir, "artifacts"),
    TINKERLAB_EXAMPLES: "off",
    // The three jobs side by side on the one local worker.
    TINKERLAB_WORKER_SLOTS: "3",
  },
  stdio: ["ignore", "pipe", "pipe"],
});
const hogs: ChildProcess[] = [];
const cleanUp = () => {
  for (const hog of hogs) hog.kill("SIGKILL");
  server.kill("SIGTERM");
};
process.on("exit", cleanUp);
process.on("SIGINT", () => process.exit(130));
for (const stream of [server.stdout!, server.stderr!]) {
  let buffer = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split("\n");
    buffer = lines.pop()!;
    serverOutput.push(...lines);
    fs.appendFileSync(path.join(dir, "server-output.log"), lines.map((line) => `${line}\n`).join(""));
  });
}
await waitUntil(() => serverOutput.some((line) => line.includes("Tinkerlab is ready at")), 300_000, "the server to be ready");
await waitUntil(() => serverOutput.some((line) => /\[worker \d+\] registered as/.test(line)), 300_000, "the local worker to register");
note(`server ready at ${url}; its output goes to ${path.join(dir, "server-output.log")}`);

const api = createTRPCClient<AppRouter>({ links: [httpLink({ url: `${url}/api/trpc`, transformer: superjson })] });

async function waitUntil(ok: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const until = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (server.exitCode !== null) fail(`the server exited while waiting for ${what}:\n${serverOutput.slice(-40).join("\n")}`);
    if (Date.now() > until) fail(`gave up waiting for ${what} after ${timeoutMs / 1000} s:\n${serverOutput.slice(-40).join("\n")}`);
    await sleep(500);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The experiments: two in the default project, and in a second project a checkpoint to evaluate.

const newcomer = (file: string) => fs.readFileSync(path.join(root, "bench", "newcomer", file), "utf8");
function starterConfig(kind: "multi-turn" | "single-turn", name: string): ExperimentConfigInput {
  const config = starters[kind].config(name);
  return {
    ...config,
    algorithm: { ...config.algorithm, ...(args.steps ? { steps: Number(args.steps) } : {}) },
    sft: { ...config.sft, ...(args["sft-steps"] ? { steps: Number(args["sft-steps"]) } : {}) },
  };
}
const multiTurn = await api.experiments.create.mutate({
  name: "load: take-away (multi-turn)",
  files: { "environment.ts": newcomer("take-away.ts") },
  config: starterConfig("multi-turn", "load-take-away"),
});
const singleTurn = await api.experiments.create.mutate({
  name: "load: string transform (single-turn)",
  files: { "environment.ts": newcomer("string-transform.ts") },
  config: starterConfig("single-turn", "load-string-transform"),
});
const neighbour = await api.projects.create.mutate({ name: "load: a neighbour" });
const source = await api.experiments.create.mutate({
  name: "load: arithmetic to evaluate",
  projectId: neighbour.id,
  config: { name: "load-arithmetic", environment: "arithmetic", agent: { base: "arithmetic-base" }, algorithm: { steps: 1 }, checkpointEvery: 1 },
});
const sourceRun = (await api.runs.launch.mutate({ experimentId: source.id })).runId;
await waitUntil(async () => (await api.runs.byId.query({ id: sourceRun })).status === "completed", 600_000, "the run whose checkpoint is evaluated");
const checkpoint = (await api.checkpoints.ofRun.query({ runId: sourceRun })).find((c) => c.kind === "state" || c.kind === "sampler");
if (!checkpoint) fail(`run ${sourceRun} left no checkpoint to evaluate`);

// ---------------------------------------------------------------------------------------------------------------
// A phase: the three jobs at once, followed to their end.

type Followed = {
  name: string;
  runId: string;
  kind: "rl" | "eval";
  steps: number[];
  times: number[];
  status: string;
  startedAt: number | null;
  endedAt: number | null;
};
type PhaseResult = { phase: "load" | "idle"; runs: Followed[]; loadAverage: number; seconds: number };

async function phase(phase: "load" | "idle"): Promise<PhaseResult> {
  for (let i = 0; phase === "load" && i < HOGS; i++) hogs.push(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
  note(`${phase}: ${phase === "load" ? `${HOGS} CPU hogs on ${cores} cores` : "no hogs"}; launching`);
  const phaseStart = Date.now();
  const training = [
    { name: "multi-turn game", runId: (await api.runs.launch.mutate({ experimentId: multiTurn.id })).runId, kind: "rl" },
    { name: "single-turn task", runId: (await api.runs.launch.mutate({ experimentId: singleTurn.id })).runId, kind: "rl" },
  ];
  // The evaluation starts once both runs train (step 1 reported), so that in both phases it shares the worker with
  // them: launched together, it was placed first in one phase and after them in the other, and its rate compared
  // running beside two runs with running alone.
  await waitUntil(
    async () => {
      for (const run of training) if (((await api.runs.byId.query({ id: run.runId })) as { step: number }).step < 1) return false;
      return true;
    },
    600_000,
    "both runs' first step",
  );
  const runs: Followed[] = [
    ...training,
    {
      name: `evaluation, ${EPISODES} episodes at temperature ${EVALUATION_LIMITS.temperature}`,
      runId: (await api.runs.evaluate.mutate({ checkpointId: checkpoint!.id, episodes: EPISODES, temperature: EVALUATION_LIMITS.temperature })).runId,
      kind: "eval",
    },
  ].map((run) => ({ ...run, kind: run.kind as "rl" | "eval", steps: [], times: [], status: "queued", startedAt: null, endedAt: null }));
  const loads: number[] = [];
  const finished = new Set(["completed", "failed", "cancelled"]);
  let lastNote = 0;
  while (runs.some((run) => !finished.has(run.status))) {
    await sleep(500);
    loads.push(os.loadavg()[0]!);
    for (const run of runs) {
      if (finished.has(run.status)) continue;
      const now = (await api.runs.byId.query({ id: run.runId })) as { status: string; step: number; startedAt: Date | null; finishedAt: Date | null };
      run.status = now.status;
      // The server's own times: a short job may start and end between two looks.
      run.startedAt = now.startedAt?.getTime() ?? null;
      run.endedAt = now.finishedAt?.getTime() ?? null;
      if (now.step !== run.steps.at(-1)) {
        run.steps.push(now.step);
        run.times.push(Date.now());
      }
    }
    if (Date.now() - lastNote > 30_000) {
      lastNote = Date.now();
      note(`${phase}: ${runs.map((run) => `${run.name} ${run.status} at step ${run.steps.at(-1) ?? 0}`).join("; ")}; load ${os.loadavg()[0]!.toFixed(1)}`);
    }
  }
  for (const hog of hogs.splice(0)) hog.kill("SIGKILL");
  const loadAverage = loads.reduce((a, b) => a + b, 0) / Math.max(1, loads.length);
  note(`${phase}: done in ${((Date.now() - phaseStart) / 1000).toFixed(0)} s (load average ${loadAverage.toFixed(1)})`);
  return { phase, runs, loadAverage, seconds: (Date.now() - phaseStart) / 1000 };
}

const results: PhaseResult[] = [];
for (const name of PHASES) results.push(await phase(name));

// ---------------------------------------------------------------------------------------------------------------
// What happened.

async function logOf(runId: string): Promise<string[]> {
  return ((await api.runs.logs.query({ runId, afterSeq: 0 })) as { message: string }[]).map((line) => line.message);
}
/** Steps per second over a run's running time (the server's start and end times); an evaluation's episodes per second. */
function rate(run: Followed): number {
  if (!run.startedAt || !run.endedAt) return 0;
  return (run.kind === "eval" ? EPISODES : (run.steps.at(-1) ?? 0)) / ((run.endedAt - run.startedAt) / 1000);
}

let workerLosses = serverOutput.filter((line) => /lost its lease/.test(line)).length;
let stepsRedone = 0;
let redoneWithoutLoss = 0;
const rows: (string | number)[][] = [];
for (const result of results) {
  for (const run of result.runs) {
    const log = await logOf(run.runId);
    const losses = log.filter((line) => line.startsWith("Worker lost")).length;
    workerLosses += losses;
    let redone = 0;
    for (const line of log) {
      const resumed = /Resuming from the checkpoint of step (\d+)/.exec(line);
      if (!resumed) continue;
      const from = Number(resumed[1]);
      redone += Math.max(0, Math.max(0, ...run.steps) - from);
    }
    stepsRedone += redone;
    if (losses === 0) redoneWithoutLoss += redone;
    rows.push([
      result.phase,
      run.name,
      run.status,
      run.steps.at(-1) ?? 0,
      losses,
      redone,
      rate(run).toFixed(run.kind === "eval" ? 1 : 3),
      result.loadAverage.toFixed(1),
    ]);
  }
}
const share = 1 / (1 + HOGS / cores);
const ratios: number[] = [];
const loadPhase = results.find((r) => r.phase === "load");
const idlePhase = results.find((r) => r.phase === "idle");
if (loadPhase && idlePhase) {
  for (let i = 0; i < loadPhase.runs.length; i++) {
    const idle = rate(idlePhase.runs[i]!);
    ratios.push(idle > 0 ? rate(loadPhase.runs[i]!) / idle : 0);
  }
}
const all = results.flatMap((r) => r.runs);
console.log(
  formatTable(
    ["phase", "run", "status", "step", "worker losses", "steps redone", "steps/s (eval: episodes/s)", "load average"],
    rows.map((row) => row.map(String)),
  ),
);
if (ratios.length) {
  console.log(
    `\nStep rate under load / without, each run: ${ratios.map((r, i) => `${loadPhase!.runs[i]!.name} ${r.toFixed(2)}`).join("; ")} (fair share ${share.toFixed(2)}: ${HOGS} hogs on ${cores} cores)`,
  );
}
console.log(`CPU: ${os.cpus()[0]?.model ?? "unknown"}, ${cores} cores.`);
console.log(
  JSON.stringify({
    worker_losses: workerLosses,
    runs_completed: all.filter((run) => run.status === "completed").length,
    runs_total: all.length,
    steps_redone: stepsRedone,
    steps_redone_without_loss: redoneWithoutLoss,
    step_rate_under_load_ratio: ratios.length ? Number(Math.min(...ratios).toFixed(3)) : null,
    fair_share: Number(share.toFixed(3)),
    hogs: HOGS,
    cores,
    load_average: Object.fromEntries(results.map((r) => [r.phase, Number(r.loadAverage.toFixed(2))])),
  }),
);
cleanUp();
process.exit(0);
