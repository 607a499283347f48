/**
 * Does a newcomer's own environment learn with the defaults? Each environment in bench/newcomer/ was written from
 * docs/ENVIRONMENTS.md alone (none is a built-in use case). Each runs as a worker runs a custom environment (in the
 * sandbox, through server/worker/run-job.ts) with the config of the "write your own environment" starter of its
 * kind, from the generalist base, and its held-out score is read before and after training. Prints a table, then
 * one JSON line:
 *
 *   {"environments":[{"name":…,"metric":…,"before":…,"after":…,"optimum":…,"steps":…,"seconds":…},…]}
 *
 *   npm run bench:newcomer [-- --only take-away,reverse-words] [--steps N] [--set algorithm.learningRate=1e-4 ...]
 *
 * Target (issue #25): on a 2-core machine each one's score rises by at least 0.3 and reaches at least 0.8 of its
 * optimum within 10 minutes.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { starters, type StarterKind } from "../components/editor/starter";
import { initBackend } from "../server/runtime";
import type { WorkerChannel } from "../server/worker/channel";
import { runJob, type JobSpec } from "../server/worker/run-job";
import { formatTable } from "./lib/measure";

/** The environments, each a file of bench/newcomer/, the starter it begins from, and its best possible score. */
const environments: { name: string; file: string; kind: StarterKind; metric: string; optimum: number }[] = [
  { name: "take-away", file: "take-away.ts", kind: "multi-turn", metric: "win_rate", optimum: 1 },
  { name: "string-transform", file: "string-transform.ts", kind: "single-turn", metric: "accuracy", optimum: 1 },
  { name: "search", file: "search.ts", kind: "multi-turn", metric: "solved", optimum: 1 },
];

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    steps: { type: "string" },
    set: { type: "string", multiple: true, default: [] },
    verbose: { type: "boolean", default: false },
  },
});

function applySet(config: Record<string, any>, assignment: string): void {
  const match = /^([A-Za-z][\w.]*)=(.*)$/.exec(assignment);
  if (!match) throw new Error(`--set expects path=value, e.g. algorithm.learningRate=1e-4; got ${JSON.stringify(assignment)}`);
  let value: unknown = match[2]!;
  try {
    value = JSON.parse(match[2]!);
  } catch {} // a plain string
  const keys = match[1]!.split(".");
  let node = config;
  for (const key of keys.slice(0, -1)) node = node[key] ??= {};
  node[keys.at(-1)!] = value;
}

const { capabilities } = await initBackend({});
console.error(`backend ${capabilities.backend}, kernel ${capabilities.kernel ?? "-"}, ${capabilities.threads} thread(s)`);
const chosen = args.only ? environments.filter((e) => args.only!.split(",").includes(e.name)) : environments;
const results: { name: string; metric: string; before: number; after: number; optimum: number; steps: number; seconds: number }[] = [];

for (const environment of chosen) {
  const source = fs.readFileSync(path.join(import.meta.dirname, "newcomer", environment.file), "utf8");
  const config = starters[environment.kind].config(`newcomer-${environment.name}`) as Record<string, any>;
  if (args.steps) config.algorithm.steps = Number(args.steps);
  for (const assignment of args.set!) applySet(config, assignment);
  const scores: { step: number; value: number }[] = [];
  const refuse = () => Promise.reject(new Error("not used by runJob"));
  const channel: WorkerChannel = {
    describe: "bench",
    register: refuse,
    heartbeat: refuse,
    claim: refuse,
    report: async (report) => {
      for (const point of report.metrics ?? []) {
        if (point.name === "eval/score") scores.push({ step: point.step, value: point.value });
        if (args.verbose && point.name === "reward/mean") console.error(`${environment.name} step ${point.step} reward ${point.value.toFixed(3)}`);
      }
      for (const line of report.logs ?? []) console.error(`${environment.name}: ${line.message}`);
    },
    checkpoint: async () => ({}),
    finish: refuse,
    leave: refuse,
    close: async () => {},
  };
  const spec = {
    job: { id: `job_${environment.name}`, runId: `run_${environment.name}`, kind: "rl", mode: "full", lastCheckpointId: null, attempts: 0 },
    run: { id: `run_${environment.name}`, config: { ...config, checkpointEvery: 0 }, seed: 0, files: { "environment.ts": source } },
    resume: null,
    base: { kind: "builtin", name: config.agent.base },
    datasets: {},
  } as unknown as JobSpec;
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-newcomer-"));
  const started = performance.now();
  const outcome = await runJob({ channel, workerId: "bench", spec, artifactsDir, stopRequested: () => null });
  const seconds = (performance.now() - started) / 1000;
  fs.rmSync(artifactsDir, { recursive: true, force: true });
  if (outcome.outcome !== "completed") throw new Error(`${environment.name}: ${outcome.outcome}: ${outcome.reason}`);
  const before = scores.find((s) => s.step === 0)?.value ?? NaN;
  const after = scores.at(-1)?.value ?? NaN;
  console.error(
    `${environment.name}: ${environment.metric} ${before.toFixed(3)} -> ${after.toFixed(3)} in ${config.algorithm.steps} steps, ${seconds.toFixed(0)} s (${scores.map((s) => `${s.step}:${s.value.toFixed(2)}`).join(" ")})`,
  );
  results.push({
    name: environment.name,
    metric: environment.metric,
    before,
    after,
    optimum: environment.optimum,
    steps: config.algorithm.steps,
    seconds: Math.round(seconds),
  });
}

const met = (r: (typeof results)[number]) => r.after - r.before >= 0.3 && r.after >= 0.8 * r.optimum && r.seconds <= 600;
console.log(
  formatTable(
    ["environment", "metric", "before", "after", "optimum", "steps", "seconds", "target met"],
    results.map((r) => [
      r.name,
      r.metric,
      r.before.toFixed(3),
      r.after.toFixed(3),
      String(r.optimum),
      String(r.steps),
      String(r.seconds),
      met(r) ? "yes" : "no",
    ]),
  ),
);
console.log(
  JSON.stringify({ environments: results.map(({ name, metric, before, after, steps, seconds }) => ({ name, metric, before, after, steps, seconds })) }),
);
