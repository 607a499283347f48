/**
 * Does RL learn? For each built-in use case: load its base checkpoint, train with its experiment template
 * (lib/envs/index.ts), and score the held-out evaluation before and after. Prints a table, then one JSON line:
 *
 *   {"use_cases":[{"name":"arithmetic","metric":"accuracy","before":…,"after":…,"target":…,"steps":…,"seconds":…},…]}
 *
 *   npm run bench:learn [-- --only arithmetic,tic-tac-toe] [--steps N] [--set algorithm.learningRate=1e-4 ...]
 *                       [--verbose] [--failures] [--threads 1|2] [--save DIR]
 *   npm run bench:learn -- --multi-agent [--only tic-tac-toe-duel,signal-game,split-pot-duel] [--steps N] [--set ...]
 *
 * "before" and "after" are greedy, as the template's evaluation plays; "sampled" is the first measure with the
 * policy sampling at temperature 1, on the same held-out episodes.
 * --set overrides one field of each template (a dotted path, the value as JSON or a plain string; repeatable);
 * --verbose prints each training step's metrics; --failures prints a few held-out episodes the trained policy
 * still gets wrong; --threads 1 leaves the other core to another experiment (default: both, with the native
 * matrix kernel where it builds, as a worker runs); --save DIR writes each trained policy to DIR/NAME as sampler
 * weights (load with BaseModel.load).
 *
 * --multi-agent runs the multi-agent use cases instead (bench/lib/multi-agent.ts: self-play, cooperation, mixed
 * motives), and the JSON line is {"multi_agent":[{"name","kind","metric","before","after","seconds",
 * "beats_initial_self","elo_first","elo_last","elo_ci",…},…]}.
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { builtInBaseDir } from "../lib/envs/bases";
import { readBuiltInDataset } from "../lib/envs/datasets";
import { useCases } from "../lib/envs/index";
import { evaluate } from "../lib/rl/evaluate";
import { evaluationSpecs, splitDataset, trainRl } from "../lib/rl/train";
import { defineExperiment } from "../lib/sdk/experiment";
import type { Trajectory } from "../lib/sdk/protocol";
import { BaseModel, TrainingClient, initBackend } from "../server/runtime/index";
import { mean } from "./lib/measure";
import { multiAgentNames, runMultiAgentCase, type MultiAgentResult } from "./lib/multi-agent";

/** What each use case is judged by: a figure of the held-out episodes, and the figure it should reach. */
type Measure = { metric: string; target: number | null; lowerIsBetter?: boolean; of(episodes: Trajectory[]): number };

const scoreOf = (episodes: Trajectory[]) => mean(episodes.map((t) => t.score));
/** A game counts as lost unless the agent won or drew it: an invalid move ends it lost. */
const lossRate = (episodes: Trajectory[]) => mean(episodes.map((t) => (t.metrics.won || t.metrics.draw ? 0 : 1)));
const meanTurns = (episodes: Trajectory[]) => mean(episodes.map((t) => t.turns.length));

const measures: Record<string, Measure[]> = {
  arithmetic: [{ metric: "accuracy", target: 0.95, of: scoreOf }],
  "guess-number": [
    { metric: "solved", target: 0.98, of: scoreOf },
    { metric: "mean_turns", target: 7.5, lowerIsBetter: true, of: meanTurns },
  ],
  "tic-tac-toe": [{ metric: "loss_rate", target: 0.05, lowerIsBetter: true, of: lossRate }],
  "tool-use": [{ metric: "accuracy", target: 0.9, of: scoreOf }],
  "text-world": [{ metric: "success", target: 0.9, of: scoreOf }],
  gomoku: [
    { metric: "win_rate", target: null, of: scoreOf },
    { metric: "loss_rate", target: null, lowerIsBetter: true, of: lossRate },
  ],
};

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    steps: { type: "string" },
    set: { type: "string", multiple: true, default: [] },
    verbose: { type: "boolean", default: false },
    failures: { type: "boolean", default: false },
    threads: { type: "string" },
    save: { type: "string" },
    "multi-agent": { type: "boolean", default: false },
  },
});

/** Applies `--set a.b.c=value` to a template: the value parsed as JSON when it is JSON, else kept as a string. */
function applySet(template: Record<string, any>, assignment: string): void {
  const match = /^([A-Za-z][\w.]*)=(.*)$/.exec(assignment);
  if (!match) throw new Error(`--set expects path=value, e.g. algorithm.learningRate=1e-4; got ${JSON.stringify(assignment)}`);
  const keys = match[1]!.split(".");
  let value: unknown = match[2]!;
  try {
    value = JSON.parse(match[2]!);
  } catch {} // a plain string such as cosine
  let node = template;
  for (const key of keys.slice(0, -1)) node = node[key] ??= {};
  node[keys.at(-1)!] = value;
}
// The engine a worker uses (worker-process.ts): both cores and the native matrix kernel where it builds.
const { capabilities } = await initBackend({ threads: args.threads ? Number(args.threads) : undefined });
console.error(`backend ${capabilities.backend}, kernel ${capabilities.kernel ?? "-"}, ${capabilities.threads} thread(s)`);
if (args["multi-agent"]) {
  await multiAgentBench();
  process.exit(0);
}
const names = args.only ? args.only.split(",") : ["arithmetic", "guess-number", "tic-tac-toe", "tool-use", "text-world", "gomoku"];

const sampled = new Map<string, { before: number; after: number }>();
type Row = { name: string; metric: string; before: number; after: number; target: number | null; met: boolean | null; steps: number; seconds: number };
const rows: Row[] = [];

for (const name of names) {
  const useCase = useCases[name];
  if (!useCase) throw new Error(`no use case '${name}'; use cases: ${Object.keys(useCases).join(", ")}`);
  const template = structuredClone(useCase.template);
  if (args.steps) template.algorithm = { ...template.algorithm, steps: Number(args.steps) };
  for (const assignment of args.set) applySet(template, assignment);
  const config = defineExperiment(template);
  const { environment, protocol } = useCase;
  const dataset = environment.data.kind === "dataset" ? readBuiltInDataset(environment.data.dataset) : undefined;

  const base = BaseModel.load(builtInBaseDir(config.agent.base));
  const training = config.agent.training;
  const client = new TrainingClient(base, {
    lora: training.mode === "lora" ? { rank: training.rank, alpha: training.alpha, dropout: training.dropout, targets: training.targets } : undefined,
    valueHead: config.agent.valueHead,
    seed: config.seed,
  });
  const policy = { primitives: client, tokenizer: base.tokenizer, contextLength: base.config.contextLength };

  // The policy as it samples (temperature 1), before and after: greedy play hides what RL did to a base whose
  // most likely reply is already right, and shows it where the sampled policy is what gets used.
  const sampledScore = async () => {
    const specs = evaluationSpecs(config, dataset ? splitDataset(dataset).test : null);
    const { trajectories } = await evaluate({ policy, environment, protocol, specs, maxTokens: config.agent.sampling.maxTokens, temperature: 1 });
    return measures[name]![0]!.of(trajectories);
  };
  const sampledBefore = await sampledScore();
  const evaluations: { step: number; episodes: Trajectory[] }[] = [];
  const started = performance.now();
  const result = await trainRl({
    config,
    policy,
    environment,
    protocol,
    dataset,
    hooks: {
      onRollouts: (step, split, groups) => {
        if (split !== "eval") return;
        const episodes = groups.flat();
        evaluations.push({ step, episodes });
        const figures = measures[name]!.map((m) => `${m.metric} ${m.of(episodes).toFixed(3)}`).join(", ");
        console.error(`${name} step ${step}: ${figures} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
      },
      onMetrics: (step, metrics) => {
        if (!args.verbose || !("reward/mean" in metrics)) return;
        const shown = [
          "reward/mean",
          "episode/length",
          "episode/invalid_actions",
          "env/wasted_guesses",
          "entropy",
          "train/clip_frac",
          "train/lr",
          "perf/step_seconds",
        ];
        console.error(`  ${step} ${shown.map((k) => `${k} ${(metrics[k] ?? NaN).toFixed(3)}`).join(" ")}`);
      },
    },
  });
  const seconds = (performance.now() - started) / 1000;
  if (args.save) {
    const dir = path.join(args.save, name);
    await client.saveWeightsForSampler(dir, { merge: true });
    console.error(`${name}: trained weights saved to ${dir}`);
  }
  sampled.set(name, { before: sampledBefore, after: await sampledScore() });
  if (args.failures) {
    for (const episode of evaluations
      .at(-1)!
      .episodes.filter((t) => t.score < 1)
      .slice(0, 5)) {
      console.error(
        `  failed (seed ${episode.seed}): ${episode.turns.map((t) => `${JSON.stringify(t.observation)} -> ${JSON.stringify(t.action)}`).join(" | ")}`,
      );
    }
  }
  const first = evaluations[0]!.episodes;
  const last = evaluations.at(-1)!.episodes;
  for (const measure of measures[name]!) {
    const after = measure.of(last);
    const met = measure.target === null ? null : measure.lowerIsBetter ? after <= measure.target : after >= measure.target;
    rows.push({ name, metric: measure.metric, before: measure.of(first), after, target: measure.target, met, steps: result.steps, seconds });
  }
}

const round = (x: number) => Math.round(x * 1000) / 1000;
const header = ["use case", "metric", "before", "after", "target", "met", "sampled before", "sampled after", "steps", "seconds"];
const table = rows.map((r, i) => {
  const first = rows.findIndex((other) => other.name === r.name) === i; // sampled figures are of the first measure
  const s = sampled.get(r.name)!;
  return [
    r.name,
    r.metric,
    r.before.toFixed(3),
    r.after.toFixed(3),
    r.target === null ? "-" : String(r.target),
    r.met === null ? "-" : r.met ? "yes" : "no",
    first ? s.before.toFixed(3) : "",
    first ? s.after.toFixed(3) : "",
    String(r.steps),
    r.seconds.toFixed(0),
  ];
});
const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
for (const row of [header, ...table]) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join("  "));
// One entry per use case: its first measure at the top level, any further measure nested under its name.
const entries = names.map((name) => {
  const [main, ...more] = rows.filter((r) => r.name === name);
  const figures = (r: Row) => ({ before: round(r.before), after: round(r.after), target: r.target, met: r.met });
  return {
    name,
    metric: main!.metric,
    ...figures(main!),
    ...Object.fromEntries(more.map((r) => [r.metric, figures(r)])),
    sampled: { before: round(sampled.get(name)!.before), after: round(sampled.get(name)!.after) },
    steps: main!.steps,
    seconds: Math.round(main!.seconds),
  };
});
console.log(JSON.stringify({ use_cases: entries }));

/** The multi-agent use cases: a table, then one JSON line {"multi_agent": […]}. */
async function multiAgentBench(): Promise<void> {
  const results: MultiAgentResult[] = [];
  for (const name of args.only ? args.only.split(",") : multiAgentNames) {
    results.push(
      await runMultiAgentCase(name, {
        steps: args.steps ? Number(args.steps) : undefined,
        adjust: (template) => {
          for (const assignment of args.set) applySet(template, assignment);
        },
        verbose: args.verbose,
        save: args.save,
      }),
    );
  }
  const round = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000);
  const header = ["use case", "kind", "metric", "before", "after", "beats initial self", "Elo first → last [95% interval]", "steps", "seconds"];
  const rows = results.flatMap((r) => [
    [
      r.name,
      r.kind,
      r.metric,
      r.before.toFixed(3),
      r.after.toFixed(3),
      r.beats_initial_self === null ? "-" : r.beats_initial_self.toFixed(3),
      r.elo_last === null ? "-" : `${r.elo_first!.toFixed(0)} → ${r.elo_last.toFixed(0)} [${r.elo_ci![0].toFixed(0)}, ${r.elo_ci![1].toFixed(0)}]`,
      String(r.steps),
      r.seconds.toFixed(0),
    ],
    ...Object.entries(r.more).map(([metric, { before, after }]) => ["", "", metric, before.toFixed(3), after.toFixed(3), "", "", "", ""]),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join("  "));
  const entries = results.map((r) => ({
    name: r.name,
    kind: r.kind,
    metric: r.metric,
    before: round(r.before),
    after: round(r.after),
    seconds: Math.round(r.seconds),
    beats_initial_self: round(r.beats_initial_self),
    elo_first: r.elo_first === null ? null : Math.round(r.elo_first),
    elo_last: r.elo_last === null ? null : Math.round(r.elo_last),
    elo_ci: r.elo_ci ? r.elo_ci.map((x) => Math.round(x)) : null,
    ...Object.fromEntries(Object.entries(r.more).map(([metric, { before, after }]) => [metric, { before: round(before), after: round(after) }])),
    steps: r.steps,
  }));
  console.log(JSON.stringify({ multi_agent: entries }));
}
