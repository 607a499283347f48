/**
 * Does a newcomer's own environment learn with the defaults? Each environment in bench/newcomer/ was written from
 * docs/ENVIRONMENTS.md alone (none is a built-in use case). Each runs as a worker runs a custom environment (in the
 * sandbox, through server/worker/run-job.ts) with the config of the "write your own environment" starter of its
 * kind, from the generalist base, and its held-out score is read before and after training. Prints a table, then
 * one JSON line:
 *
 *   {"environments":[{"name":…,"metric":…,"before":…,"after_sft":…,"after":…,"sft_gain":…,"rl_gain":…,"steps":…,
 *                     "sft_steps":…,"seconds":…},…]}
 *
 *   npm run bench:newcomer [-- --only take-away,string-transform] [--steps N] [--set algorithm.learningRate=1e-4 ...]
 *                          [--sft-steps N] [--verbose]
 *
 * Each environment trains as one run of its starter's config: its SFT steps on the environment's demonstrator
 * (sft.steps), then RL from that policy; "before" is the base's score, "after SFT" the score where RL begins, and
 * the seconds count both. Each stage's own gain is shown beside them: SFT's (after SFT − before) and RL's (after −
 * after SFT; after − before when there is no SFT). --sft-steps N sets sft.steps (0: RL alone).
 *
 * Target (issue #25): on a 2-core machine each one's score rises by at least 0.3 and reaches at least 0.8 of its
 * optimum within 10 minutes.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { type StarterKind, starters } from "../components/editor/starter";
import { initBackend } from "../server/runtime";
import { inProcessChannel } from "../server/worker";
import { type JobSpec, runJob } from "../server/worker/run-job";
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
    "sft-steps": { type: "string" },
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

type Score = { step: number; value: number };
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-newcomer-"));

/** Runs one job as a worker does, with an in-memory channel; returns its held-out scores and checkpoints. */
async function play(name: string, source: string, config: Record<string, any>, base: JobSpec["base"]) {
  const scores: Score[] = [];
  const saved: { step: number; path: string }[] = [];
  const channel = inProcessChannel({
    report: (report) => {
      for (const point of report.metrics ?? []) {
        if (point.name === "eval/score") scores.push({ step: point.step, value: point.value });
        if (args.verbose && (point.name === "reward/mean" || point.name === "loss/sft"))
          console.error(`${name} step ${point.step} ${point.name} ${point.value.toFixed(3)}`);
      }
      for (const line of report.logs ?? []) console.error(`${name}: ${line.message}`);
    },
    checkpoint: (input) => void saved.push({ step: input.step, path: input.path }),
  });
  const spec = {
    job: { id: `job_${name}`, runId: `run_${name}`, kind: config.algorithm.name === "sft" ? "sft" : "rl", mode: "full", lastCheckpointId: null, attempts: 0 },
    run: { id: `run_${name}`, config, seed: 0, files: { "environment.ts": source } },
    resume: null,
    base,
    datasets: {},
  } as unknown as JobSpec;
  const outcome = await runJob({ channel, workerId: "bench", spec, artifactsDir, stopRequested: () => null });
  if (outcome.outcome !== "completed") throw new Error(`${name}: ${outcome.outcome}: ${outcome.reason}`);
  return { scores, saved };
}

const { capabilities } = await initBackend({});
console.error(`backend ${capabilities.backend}, kernel ${capabilities.kernel ?? "-"}, ${capabilities.threads} thread(s)`);
const chosen = args.only ? environments.filter((e) => args.only!.split(",").includes(e.name)) : environments;
const results: {
  name: string;
  metric: string;
  before: number;
  afterSft: number | null;
  after: number;
  optimum: number;
  steps: number;
  sftSteps: number;
  seconds: number;
}[] = [];

for (const environment of chosen) {
  const source = fs.readFileSync(path.join(import.meta.dirname, "newcomer", environment.file), "utf8");
  const config = starters[environment.kind].config(`newcomer-${environment.name}`) as Record<string, any>;
  if (args.steps) config.algorithm.steps = Number(args.steps);
  if (args["sft-steps"] !== undefined) (config.sft ??= {}).steps = Number(args["sft-steps"]);
  for (const assignment of args.set!) applySet(config, assignment);
  const sftSteps = Number(config.sft?.steps ?? 0);
  const started = performance.now();
  // One run, as the workbench launches the starter: its SFT steps on the demonstrator (if any), then RL.
  const { scores } = await play(environment.name, source, { ...config, checkpointEvery: 0 }, { kind: "builtin", name: config.agent.base } as JobSpec["base"]);
  const seconds = (performance.now() - started) / 1000;
  const before = scores[0]?.value ?? NaN;
  const afterSft = sftSteps > 0 ? (scores.find((s) => s.step === sftSteps)?.value ?? NaN) : null;
  const after = scores.at(-1)?.value ?? NaN;
  const sftNote = afterSft !== null ? ` after ${sftSteps} SFT steps (score then ${afterSft.toFixed(3)})` : "";
  const curve = scores.map((s) => `${s.step}:${s.value.toFixed(2)}`).join(" ");
  console.error(
    `${environment.name}: ${environment.metric} ${before.toFixed(3)} -> ${after.toFixed(3)} in ${config.algorithm.steps} RL steps${sftNote}, ${seconds.toFixed(0)} s (${curve})`,
  );
  results.push({
    name: environment.name,
    metric: environment.metric,
    before,
    afterSft,
    after,
    optimum: environment.optimum,
    steps: config.algorithm.steps,
    sftSteps,
    seconds: Math.round(seconds),
  });
}
fs.rmSync(artifactsDir, { recursive: true, force: true });

const met = (r: (typeof results)[number]) => r.after - r.before >= 0.3 && r.after >= 0.8 * r.optimum && r.seconds <= 600;
/** What each stage added (to 1e-4): SFT from the base's score, RL from where it began (the base's score without SFT). */
const gains = (r: (typeof results)[number]) => {
  const round = (x: number) => Math.round(x * 1e4) / 1e4;
  return { sft: r.afterSft === null ? null : round(r.afterSft - r.before), rl: round(r.after - (r.afterSft ?? r.before)) };
};
const signed = (x: number | null) => (x === null ? "-" : `${x >= 0 ? "+" : "−"}${Math.abs(x).toFixed(3)}`);
console.log(
  formatTable(
    ["environment", "metric", "before", "after SFT", "after RL", "SFT gain", "RL gain", "optimum", "SFT steps", "RL steps", "seconds", "target met"],
    results.map((r) => [
      r.name,
      r.metric,
      r.before.toFixed(3),
      r.afterSft === null ? "-" : r.afterSft.toFixed(3),
      r.after.toFixed(3),
      signed(gains(r).sft),
      signed(gains(r).rl),
      String(r.optimum),
      String(r.sftSteps),
      String(r.steps),
      String(r.seconds),
      met(r) ? "yes" : "no",
    ]),
  ),
);
console.log(
  JSON.stringify({
    environments: results.map((r) => ({
      name: r.name,
      metric: r.metric,
      before: r.before,
      after_sft: r.afterSft,
      after: r.after,
      sft_gain: gains(r).sft,
      rl_gain: gains(r).rl,
      steps: r.steps,
      sft_steps: r.sftSteps,
      seconds: r.seconds,
    })),
  }),
);
