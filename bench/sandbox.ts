/**
 * What the sandbox costs: environment steps per second natively and in the sandbox, and what it adds to a real
 * rollout's wall time.
 *
 *   npm run bench:sandbox -- [--seconds 2] [--batch 64] [--clock wall|cpu] [--trials 12] [--e2e-seconds 60] [--precision 3] [--only name,name] [--against DIR]
 *                            [--lanes 2] [--synthetic] [--no-update] [--aa] [--concurrent-marking]
 *
 * Environments: a trivial one, the test fixture dice-sum, and every built-in environment in lib/envs/*.ts
 * (dataset environments with rows of their built-in dataset).
 *
 * Per step. native: EnvironmentSession in this process, one step at a time. sandbox: a SandboxedEnvironmentPool of
 * `batch` slots, all stepped in one crossing per round. Both replay the same legal, realistic games: `batch`
 * episodes played once beforehand by the use case's demonstrator (lib/envs/demonstrations.ts, through the use
 * case's protocol), or, for an environment without one, a fixed list of actions. step_overhead_model_pct =
 * (sandbox s/step - native s/step) / (sampling s/step + sandbox s/step) * 100, where sampling s/step is
 * TrainingClient.sample on the tiny model of bench:train (d=64, 2 layers), `batch` prompts of 16 tokens, 16 new
 * tokens each, divided by `batch`: a model of a rollout, timed by --clock.
 *
 * End to end. One training step's rollout (collectGroups with the use case's template: its groups, group size,
 * sampling and protocol, the prompts of trainingSpecs), played by the use case's shipped base (BaseModel.load of
 * builtInBaseDir), natively; through the sandbox in one lane; in lanes, cold (every episode reset in the
 * rollout: a run's first step); and in lanes as the RL loop plays every later rollout (its episodes
 * were reset during the rollout before, which was told them as `next`, and it tells the next one's in turn; the
 * policy samples one part while the sandbox's thread steps another). An environment without a
 * use case is played by a random tiny model (d=32, 1 layer), 8 groups of 8, multi-turn. Each rollout is followed,
 * untimed, by the policy update the RL loop makes of it (policyUpdate with the template's algorithm, GRPO's
 * group-normalized advantages, learning rate 0 so that the policy stays put; --no-update: rollouts back to back,
 * as an evaluation plays them): what the loop allocates there sets what V8's collector does during the next
 * rollout, which decided whether the sandbox's thread had a core (server/worker/gc.ts; the process turns off
 * concurrent marking on fewer than three cores as a worker does, unless --concurrent-marking). A round is one
 * rollout of each variant in turn (the order rotating), all on the round's sampling seed; rounds go on until
 * --e2e-seconds (default 60) have passed for the environment and at least --trials (default 12) were played, and
 * then on, up to twice --e2e-seconds, until the 90% interval of the headline median (below) reaches at most
 * --precision points (default 3) from it (0: no such rule). A fast rollout needs it: arithmetic's (~20 ms, 75
 * rounds in 60 s) had an interval of -14.6 to 11.3% after 60 s, 9.6 to 13.9% after 120 s and 6.8 to 11.6% after
 * 180 s (docs/SANDBOX.md).
 * rollout_overhead_pct = median over rounds of (sandbox wall ms per episode step / native wall ms per episode
 * step - 1) * 100, as the loop plays, with a 90% interval for that median (`*_ci90`: percentiles of the median
 * of 1,000 resamples of the rounds); cold_rollout_overhead_pct the same, cold; the per-step normalization
 * absorbs the sampled episodes' differing lengths (a split batch samples differently). *_cpu_overhead_pct: the
 * same with the process's CPU clock (all threads). Many rounds, because one arithmetic rollout (~18 ms) on
 * these shared VMs varies by ±20% from the next: the median of 18 rounds, drawn from one run of 150, spread with
 * a standard deviation of 5-9 points; of 60 rounds, 1.3-3 (docs/SANDBOX.md). The whole bench takes
 * ~20 minutes with the defaults; --only, a smaller --e2e-seconds and --precision 0 make a quicker look.
 * rollout_quiet_overhead_pct: the same comparison for the rollouts the machine left alone, (10th percentile of the
 * loop's wall ms per episode step / 10th percentile of native's - 1) * 100, with a bootstrap 90% interval over
 * the rounds. On these VMs a fixed piece of work takes twice as long in ~15% of runs, and a rollout's time falls
 * in several modes (arithmetic: ~16, ~23 and ~35 ms) independently for each variant of a round; the median of the
 * ratios lands wherever those modes pair up, so two identical sandboxed variants read 4.3 and 8.2% over 488
 * rounds (1.3 and 14.3% over 174), while their quiet figures read 3.3-4.7% (standard deviation at 60 rounds
 * 1.5-1.9 points against 3.4-7.3; docs/SANDBOX.md). It is what the sandbox's own work adds; the
 * median also counts how often the machine's interference lands on it.
 * --aa: a second native variant in each round, reported against the first as the sandbox's are (`aa_*`): the
 * reading of two identical rollouts, i.e. how far this run's figures can be trusted.
 * Also the cost of one crossing with 1 op and with `batch` ops (the trivial environment, best of 5), and the
 * parallelism this process gets: 2 when the sandbox's thread runs beside this one on a spare core, 1 when they
 * take turns (a loaded machine), where lanes cannot hide the sandbox. It counts the thread's wake-up and the
 * host's await too, so it reads low even with two free cores (1.27-1.97 measured on this project's 2-core VMs).
 * --clock cpu times the per-step figures by the process's CPU clock (all threads; the sandbox's thread works
 * while this one waits) instead of the wall clock: on a machine shared with other work, the wall clock measures
 * the contention more than the code. The end-to-end figures are always both.
 * Per step, each side's figure is the median over its rounds (a round: every scripted episode once), which a
 * burst of other work on a shared machine moves less than a mean would.
 * --only: the environments named (as in the tables; "dice-sum" for the test fixture).
 * --synthetic: end to end, the policy is a stand-in that busy-waits what the base's sampler costs (a fixed part
 * per call and a part per request, fitted to the real sampler on the use case's own first prompts, 1 and all of
 * them) and answers every request with the reply the base gave the first prompt. The sampler's own noise and its
 * speed's dependence on the batch drop out, so the ratios show the sandbox's costs alone, with far less spread
 * (how docs/SANDBOX.md compared changes of a few points); the episodes are not the base's (a multi-turn game
 * answered the same every turn ends differently), so this is for comparing, not the target. It charges each of
 * a batch's lanes the fixed part, where the real sampler's smaller batches make up for it, and it cannot judge a
 * change to how the sandbox's thread uses its core: naps after each answer looked 1.5-1.9 points better with it
 * and were no better with the base (docs/SANDBOX.md).
 * --lanes N: N lanes of equal size (default: what the worker plays with, `laneShape` of the protocol: cold,
 * 4 single-turn and 2 multi-turn; reset ahead, single-turn lanes of 9 : 5 : 2; each environment's row and JSON
 * say `lanes` and `cold_lanes`).
 * --against DIR: another checkout of this repository (e.g. `git worktree add /tmp/base HEAD~1`, or a copy of the
 * tree with its node_modules linked) whose sandbox (its server/sandbox, and the SDK its compile step bundles) is
 * measured beside this one in the same process: per step, rounds of the two pools in turn, the median of the
 * per-round ratios (`step_change_pct`); end to end, a fifth variant (in its lanes, told `next` as the loop's
 * variant is, which an older sandbox ignores) in each round's rotation (`against_rollout_overhead_pct`). Each round runs the same code on the same seeds, so the two are compared
 * under the same load, which on a shared machine matters more than any absolute figure.
 * The last line is one JSON object with every figure.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { useCases, type UseCase } from "@/lib/envs";
import { builtInBaseDir } from "@/lib/envs/bases";
import { readBuiltInDataset } from "@/lib/envs/datasets";
import { demonstrate, demonstrators } from "@/lib/envs/demonstrations";
import type { PolicyModel } from "@/lib/rl/primitives";
import { groupNormalized } from "@/lib/rl/advantages";
import { collectGroups, toTrainingBatch, type EpisodePlayer } from "@/lib/rl/rollouts";
import { policyUpdate } from "@/lib/rl/update";
import { trainingSpecs } from "@/lib/rl/train";
import { type DatasetRow, type EnvironmentDefinition, EnvironmentSession } from "@/lib/sdk/environment";
import { type AlgorithmConfig, algorithmSchema, defineExperiment } from "@/lib/sdk/experiment";
import { multiTurn, type Protocol } from "@/lib/sdk/protocol";
import type { ChatMessage } from "@/lib/model/chat";
import { BaseModel, TrainingClient, initBackend, type SampledSequence } from "@/server/runtime";
import { SandboxedEnvironmentPool, laneShape, laneStarts, runSandboxedEpisodes, type SourceFiles } from "@/server/sandbox";
import { startedMarkingOnMainThread } from "@/server/worker";
import { bootstrapInterval, formatTable, median, medianInterval, medianReachPoints, quietRatio } from "./lib/measure";
import { runAsRolloutProcess } from "./lib/rollout-process";

// The process a worker is (server/worker/gc.ts), unless --concurrent-marking (V8's default, to compare).
runAsRolloutProcess(process.argv.includes("--concurrent-marking"));
const mainThreadGc = startedMarkingOnMainThread();
/** Past the minimum, the headline's interval is looked at every this many rounds (see --precision). */
const precisionEvery = 10;

const args = {
  seconds: 2,
  e2eSeconds: 60,
  precision: 3,
  batch: 64,
  clock: "wall",
  trials: 12,
  only: [] as string[],
  against: "",
  lanes: null as number | null,
  synthetic: false,
  update: true,
  aa: false,
};
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === "--seconds") args.seconds = Number(process.argv[++i]);
  else if (arg === "--batch") args.batch = Number(process.argv[++i]);
  else if (arg === "--clock") args.clock = process.argv[++i] ?? "";
  else if (arg === "--trials") args.trials = Number(process.argv[++i]);
  else if (arg === "--e2e-seconds") args.e2eSeconds = Number(process.argv[++i]);
  else if (arg === "--precision") args.precision = Number(process.argv[++i]);
  else if (arg === "--lanes") args.lanes = Number(process.argv[++i]);
  else if (arg === "--only")
    args.only = (process.argv[++i] ?? "")
      .split(",")
      .map((name) => name.trim())
      .filter(Boolean);
  else if (arg === "--against") args.against = path.resolve(process.argv[++i] ?? "");
  else if (arg === "--synthetic") args.synthetic = true;
  else if (arg === "--no-update") args.update = false;
  else if (arg === "--aa") args.aa = true;
  else if (arg === "--concurrent-marking")
    continue; // read above, before anything else ran
  else
    throw new Error(
      `unknown argument '${arg}'; accepted: --seconds, --batch, --clock, --trials, --e2e-seconds, --precision, --lanes, --only, --against, --synthetic, --no-update, --aa, --concurrent-marking`,
    );
}
if (!Number.isInteger(args.trials) || args.trials < 1) throw new Error(`--trials must be a whole number of at least 1; got ${args.trials}`);
if (!(args.e2eSeconds >= 0)) throw new Error(`--e2e-seconds must be a number of seconds, 0 or more; got ${args.e2eSeconds}`);
if (!(args.precision >= 0)) throw new Error(`--precision must be a number of percentage points, 0 (no such rule) or more; got ${args.precision}`);
if (args.lanes !== null && (!Number.isInteger(args.lanes) || args.lanes < 2 || args.lanes > 16))
  throw new Error(`--lanes must be a whole number from 2 to 16; got ${args.lanes}`);
if (args.clock !== "wall" && args.clock !== "cpu") throw new Error(`--clock must be wall or cpu; got '${args.clock}'`);
/** Milliseconds by the chosen clock. */
const now =
  args.clock === "cpu"
    ? () => {
        const { user, system } = process.cpuUsage();
        return (user + system) / 1000;
      }
    : () => performance.now();

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
if (args.against && !existsSync(path.join(args.against, "server/sandbox/index.ts")))
  throw new Error(`--against: no server/sandbox/index.ts under ${args.against}`);
/** The other checkout's sandbox (--against), loaded from its own files. */
const against = args.against
  ? ((await import(pathToFileURL(path.join(args.against, "server/sandbox/index.ts")).href)) as typeof import("@/server/sandbox"))
  : null;
/** The actions of an environment without a demonstrator (legal in dice-sum and the trivial one). */
const fixedActions = ["1", "2", "3", "4", "5", "6"];

const trivialSource = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, string>({
  name: "trivial",
  data: { kind: "free" },
  systemPrompt: "count",
  maxTurns: 20,
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, action) => ({ state: { n: state.n + 1 }, observation: String(state.n + 1), reward: action.length > 1 ? 1 : 0, done: state.n + 1 >= 20 }),
});
`;

type Case = {
  name: string;
  files: SourceFiles;
  entry: string;
  load: () => Promise<EnvironmentDefinition<unknown, unknown>>;
  /** The built-in use case playing this environment, if one does. */
  useCase?: UseCase;
};

const cases: Case[] = [
  {
    name: "trivial",
    files: { "environment.ts": trivialSource },
    entry: "environment.ts",
    load: async () => {
      // The same source, evaluated natively: strip the types with esbuild and import it from a data URL.
      const { transform } = await import("esbuild");
      const sdk = JSON.stringify(pathToFileURL(path.join(repoRoot, "lib/sdk/environment.ts")).href);
      const js = (await transform(trivialSource.replace(`from "tinkerlab"`, `from ${sdk}`), { loader: "ts" })).code;
      return (await import(`data:text/javascript,${encodeURIComponent(js)}`)).default;
    },
  },
  fileCase("dice-sum (test fixture)", path.join(repoRoot, "test/unit/sandbox/fixtures"), "dice-env.ts"),
];
const envDir = path.join(repoRoot, "lib/envs");
if (existsSync(envDir)) {
  const files: SourceFiles = {};
  for (const file of readdirSync(envDir).filter((n) => n.endsWith(".ts"))) files[file] = readFileSync(path.join(envDir, file), "utf8");
  for (const file of Object.keys(files).sort()) {
    if (!files[file]!.includes("defineEnvironment")) continue;
    const module = (await import(pathToFileURL(path.join(envDir, file)).href)) as Record<string, unknown>;
    for (const [exportName, value] of Object.entries(module)) {
      const definition = value as EnvironmentDefinition<unknown, unknown>;
      if (exportName === "default" || typeof definition?.step !== "function" || typeof definition.reset !== "function") continue;
      // Each environment is the default export of a one-line entry, as a user's file would be.
      const entry = "__bench_entry.ts";
      cases.push({
        name: definition.name,
        files: { ...files, [entry]: `export { ${exportName} as default } from "./${file.replace(/\.ts$/, "")}";\n` },
        entry,
        load: async () => definition,
        useCase: Object.values(useCases).find((useCase) => useCase.environment === definition),
      });
    }
  }
}

function fileCase(name: string, dir: string, entry: string): Case {
  const files: SourceFiles = {};
  for (const file of readdirSync(dir).filter((n) => n.endsWith(".ts"))) files[file] = readFileSync(path.join(dir, file), "utf8");
  return { name, files, entry, load: async () => (await import(pathToFileURL(path.join(dir, entry)).href)).default };
}

function datasetRows(definition: EnvironmentDefinition<unknown, unknown>): DatasetRow[] | undefined {
  return definition.data.kind === "dataset" ? readBuiltInDataset(definition.data.dataset) : undefined;
}

/** One episode to replay: its start and the actions played in it, each of which the environment accepted as played. */
type Script = { seed: number; sample?: DatasetRow; actions: string[] };

/** `batch` episodes played once by the use case's demonstrator, or with the fixed actions in turn (at most 50 steps). */
async function scripts(c: Case, definition: EnvironmentDefinition<unknown, unknown>): Promise<Script[]> {
  const demonstrator = c.useCase ? demonstrators[definition.name] : undefined;
  if (c.useCase && demonstrator) {
    const played = await demonstrate(c.useCase, demonstrator, args.batch, 1, datasetRows(definition));
    return played.map((t) => ({ seed: t.seed, sample: t.sample, actions: t.turns.map((turn) => turn.action) }));
  }
  return Array.from({ length: args.batch }, (_, b) => {
    const session = new EnvironmentSession(definition);
    session.reset(b);
    const actions: string[] = [];
    for (let t = 0; t < 50 && !session.summary().done; t++) {
      actions.push(fixedActions[(b + t) % fixedActions.length]!);
      session.step(actions.at(-1)!);
    }
    return { seed: b, actions };
  });
}

/** Steps per second: the median over rounds run for `--seconds` (each round returns the steps it took). */
async function stepsPerSecond(run: () => number | Promise<number>): Promise<number> {
  await run(); // warm-up
  const rates: number[] = [];
  const start = now();
  while (now() - start < args.seconds * 1000 || rates.length < 3) {
    const roundStart = now();
    const steps = await run();
    rates.push(steps / Math.max((now() - roundStart) / 1000, 1e-9));
  }
  return median(rates);
}

/**
 * This sandbox's steps per second and another's (`--against`), rounds in turn for 2 × `--seconds`: each side's
 * median, and the median of the per-pair ratios of this one's round time to the other's.
 */
async function stepsPerSecondBeside(run: () => Promise<number>, runAgainst: () => Promise<number>) {
  await run();
  await runAgainst();
  const rates: number[] = [];
  const againstRates: number[] = [];
  const ratios: number[] = [];
  const start = now();
  for (let pair = 0; now() - start < 2 * args.seconds * 1000 || pair < 3; pair++) {
    const times: number[] = [];
    for (const [side, round] of (pair % 2
      ? [
          [1, runAgainst],
          [0, run],
        ]
      : [
          [0, run],
          [1, runAgainst],
        ]) as [number, () => Promise<number>][]) {
      const roundStart = now();
      const steps = await round();
      const seconds = Math.max((now() - roundStart) / 1000, 1e-9);
      times[side] = seconds;
      (side === 0 ? rates : againstRates).push(steps / seconds);
    }
    ratios.push(times[0]! / times[1]!);
  }
  return { rate: median(rates), againstRate: median(againstRates), timeRatio: median(ratios) };
}

/** The scripted episodes, natively, one step at a time. Returns the steps taken. */
function nativeRound(definition: EnvironmentDefinition<unknown, unknown>, games: Script[]): number {
  let steps = 0;
  for (const { seed, sample, actions } of games) {
    const session = new EnvironmentSession(definition);
    session.reset(seed, sample);
    session.render();
    for (const action of actions) {
      session.step(action);
      session.render();
      steps++;
    }
    session.score();
  }
  return steps;
}

/**
 * A batch's answers (`resetMany`, `stepMany`), this thread blocked until the sandbox gives them (`waitForAnswer`),
 * as a rollout waits when it has nothing else to do: the figures are the sandbox's work, not the event loop's
 * delay in noticing an answer. An older sandbox (`--against`) whose batches block returns its answers as they are.
 */
function answered<T>(pool: SandboxedEnvironmentPool, batch: T): T {
  pool.waitForAnswer(60_000);
  return batch;
}

/** The same episodes in the sandbox: one crossing for the resets, then one per step of all live episodes. */
async function sandboxRound(pool: SandboxedEnvironmentPool, games: Script[]): Promise<number> {
  let steps = 0;
  await answered(pool, pool.resetMany(games.map(({ seed, sample }, slot) => ({ slot, seed, sample }))));
  for (let t = 0; ; t++) {
    const live = games.flatMap((game, slot) => (t < game.actions.length ? [{ slot, action: game.actions[t]! }] : []));
    if (live.length === 0) break;
    await answered(pool, pool.stepMany(live));
    steps += live.length;
  }
  for (let slot = 0; slot < games.length; slot++) pool.score(slot);
  return steps;
}

const { engine } = await initBackend({ prefer: "js" });
const base = BaseModel.create({ vocabSize: 262, contextLength: 64, dModel: 64, nLayers: 2, nHeads: 4 }, { engine, seed: 0 });
const client = new TrainingClient(base, { seed: 0 });
const prompts = Array.from({ length: args.batch }, (_, b) => Array.from({ length: 16 }, (_, i) => (b * 7 + i * 13) % 256));
await client.sample(prompts, 1, { maxTokens: 16, stop: [] });
const samplingStart = now();
let samplingCalls = 0;
while (now() - samplingStart < args.seconds * 1000 || samplingCalls < 2) {
  await client.sample(prompts, 1, { maxTokens: 16, stop: [] });
  samplingCalls++;
}
const samplingSecondsPerStep = (now() - samplingStart) / 1000 / samplingCalls / args.batch;

/** How a rollout is played end to end, and by whom. */
type RolloutSetup = {
  policy: PolicyModel;
  protocol: Protocol;
  specs: { seed: number; sample?: DatasetRow }[];
  groupSize: number;
  temperature: number;
  maxTokens: number;
  label: string;
  /** The update each rollout is followed by, as in the RL loop (its learning rate set to 0: the policy stays put). */
  algorithm: AlgorithmConfig;
};

function rolloutSetup(c: Case, definition: EnvironmentDefinition<unknown, unknown>): RolloutSetup {
  if (c.useCase) {
    const config = defineExperiment({ ...c.useCase.template, seed: 1 });
    const model = BaseModel.load(builtInBaseDir(config.agent.base), { engine });
    const rows = datasetRows(definition);
    return {
      policy: { primitives: new TrainingClient(model, { seed: 1 }), tokenizer: model.tokenizer, contextLength: model.config.contextLength },
      protocol: c.useCase.protocol,
      specs: trainingSpecs(config, 0, rows ?? null),
      groupSize: config.algorithm.groupSize,
      temperature: config.agent.sampling.temperature,
      maxTokens: config.agent.sampling.maxTokens,
      label: `${config.agent.base}, ${config.algorithm.groupsPerStep}x${config.algorithm.groupSize}`,
      algorithm: config.algorithm,
    };
  }
  const model = BaseModel.create({ vocabSize: 262, contextLength: 160, dModel: 32, nLayers: 1, nHeads: 2 }, { engine, seed: 1 });
  return {
    policy: { primitives: new TrainingClient(model, { seed: 1 }), tokenizer: model.tokenizer, contextLength: 160 },
    protocol: multiTurn(),
    specs: Array.from({ length: 8 }, (_, i) => ({ seed: i })),
    groupSize: 8,
    temperature: 1,
    maxTokens: 4,
    label: "random tiny model, 8x8",
    algorithm: algorithmSchema.parse({}),
  };
}

/** --synthetic: the setup with its policy replaced by a busy-waiting stand-in fitted to it (see the header). */
async function synthetic(setup: RolloutSetup, definition: EnvironmentDefinition<unknown, unknown>): Promise<RolloutSetup> {
  const { policy } = setup;
  const prompts = setup.specs.map(({ seed, sample }) => {
    const session = new EnvironmentSession(definition);
    const observation = session.reset(seed, sample);
    const messages: ChatMessage[] = [
      { role: "system", content: session.systemPrompt },
      { role: "user", content: observation },
    ];
    return policy.tokenizer.encodeChat(messages, { addGenerationPrompt: true });
  });
  const options = { temperature: setup.temperature, maxTokens: setup.maxTokens, seed: 1 };
  const timed = async (batch: number[][]) => {
    const times: number[] = [];
    let reply: SampledSequence | null = null;
    for (let r = 0; r < 15; r++) {
      const start = performance.now();
      const { samples } = await policy.primitives.sample(batch, setup.groupSize, options);
      times.push(performance.now() - start);
      reply ??= samples[0]![0]!;
    }
    return { ms: median(times), reply: reply! };
  };
  const one = await timed(prompts.slice(0, 1));
  const all = await timed(prompts);
  const perRequest = Math.max((all.ms - one.ms) / ((prompts.length - 1) * setup.groupSize), 0);
  const perCall = Math.max(one.ms - perRequest * setup.groupSize, 0);
  const reply = one.reply;
  const primitives = Object.create(policy.primitives) as PolicyModel["primitives"];
  primitives.sample = async (batch: number[][], n: number) => {
    const until = performance.now() + perCall + perRequest * batch.length * n;
    while (performance.now() < until);
    return { samples: batch.map(() => Array.from({ length: n }, () => ({ ...reply, tokens: [...reply.tokens], logprobs: [...reply.logprobs] }))) };
  };
  return {
    ...setup,
    policy: { ...policy, primitives },
    label: `${setup.label}, synthetic ${perCall.toFixed(2)} ms + ${(perRequest * 1000).toFixed(0)} µs/request`,
  };
}

const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
/**
 * One training step's rollout, natively and through the sandbox (one lane, lanes, and the loop's lanes), in rounds
 * of one rollout of each. Returns the median rollout times, and per variant the median of each round's ratio to
 * the native rollout (wall and CPU milliseconds per episode step), the loop's with its 90% interval.
 */
async function endToEnd(
  setup: RolloutSetup,
  definition: EnvironmentDefinition<unknown, unknown>,
  pool: SandboxedEnvironmentPool,
  loopPool: SandboxedEnvironmentPool,
  againstPool: SandboxedEnvironmentPool | null,
) {
  const environment = { name: definition.name, data: definition.data, scoreName: definition.scoreName };
  // "loop" plays each rollout as the RL loop plays a step after the first: its episodes were reset during the
  // rollout before (told them as `next`), in a pool of its own, so that no other variant claims them.
  const variants: { name: "native" | "native_again" | "one_lane" | "cold" | "loop" | "against"; play?: EpisodePlayer; next?: boolean }[] = [
    { name: "native" },
    // --aa: the native rollout again, as if it were another variant: what the bench reads between two identical ones.
    ...(args.aa ? [{ name: "native_again" as const }] : []),
    { name: "one_lane", play: (protocol, starts, act, options) => runSandboxedEpisodes(protocol, pool, starts, act, { ...options, lanes: 1 }) },
    {
      name: "cold",
      play: (protocol, starts, act, options) => runSandboxedEpisodes(protocol, pool, starts, act, { ...options, lanes: args.lanes ?? undefined }),
    },
    {
      name: "loop",
      next: true,
      play: (protocol, starts, act, options) => runSandboxedEpisodes(protocol, loopPool, starts, act, { ...options, lanes: args.lanes ?? undefined }),
    },
  ];
  if (againstPool && against) {
    const play = against.runSandboxedEpisodes;
    // Told `next` as well, which an older sandbox ignores.
    variants.push({
      name: "against",
      next: true,
      play: (protocol, starts, act, options) => play(protocol, againstPool, starts, act, { ...options, lanes: args.lanes ?? undefined }),
    });
  }
  /**
   * One rollout with the sampling seed `seed` (its wall and CPU milliseconds and the episode steps it took), then,
   * untimed, the policy update the RL loop makes of it (see the header).
   */
  const once = async (variant: (typeof variants)[number], seed: number) => {
    const wallStart = performance.now();
    const cpuStart = cpuMs();
    const groups = await collectGroups({
      policy: setup.policy,
      environment: variant.play ? environment : definition,
      protocol: setup.protocol,
      specs: setup.specs,
      groupSize: setup.groupSize,
      sampling: { temperature: setup.temperature, maxTokens: setup.maxTokens, seed },
      playEpisodes: variant.play,
      // The loop's next step plays other prompts; the bench plays the same ones again, which costs the same.
      nextSpecs: variant.next ? setup.specs : undefined,
    });
    const rollout = { wall: performance.now() - wallStart, cpu: cpuMs() - cpuStart, steps: groups.flat().reduce((a, t) => a + t.turns.length, 0) };
    if (args.update) {
      const batch = toTrainingBatch(groups, groupNormalized(groups, true));
      await policyUpdate(setup.policy.primitives, batch, { ...setup.algorithm, learningRate: 0 }, setup.temperature);
    }
    return rollout;
  };
  type Totals = { wallPerStep: number; cpuPerStep: number; wall: number; steps: number };
  // Warm-up: the model's first calls, the sandbox's first crossings.
  for (const variant of variants) await once(variant, 0);
  // Rounds of one rollout of every variant in turn (the order rotating), all on the round's seed: a burst of
  // other work on a shared machine lands on the variants alike, where rollouts of one variant in a row left it to
  // whichever ran then. Each variant's own rollouts still follow one another: the loop's pool prepares its next
  // rollout's episodes during each, as in the RL loop.
  const rounds: Record<string, Totals>[] = [];
  const ratios = (variant: string, key: "wallPerStep" | "cpuPerStep") => rounds.map((t) => t[variant]![key] / t.native![key]);
  const started = performance.now();
  /**
   * Once the minimum is played: whether the headline median's 90% interval is still wider than --precision points
   * either side of it (looked at first, then every `precisionEvery` rounds, a bootstrap taking a few
   * milliseconds), until twice --e2e-seconds.
   */
  let imprecise = args.precision > 0;
  let lookedAt = -precisionEvery;
  const morePrecision = (round: number) => {
    if (!imprecise || performance.now() - started >= 2 * args.e2eSeconds * 1000) return false;
    if (round - lookedAt >= precisionEvery) {
      lookedAt = round;
      imprecise = medianReachPoints(ratios("loop", "wallPerStep")) > args.precision;
    }
    return imprecise;
  };
  for (let round = 0; round < args.trials || performance.now() - started < args.e2eSeconds * 1000 || morePrecision(round); round++) {
    const totals: Record<string, Totals> = {};
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(round + k) % variants.length]!;
      const result = await once(variant, (1 + round) * 100);
      totals[variant.name] = { wallPerStep: result.wall / result.steps, cpuPerStep: result.cpu / result.steps, wall: result.wall, steps: result.steps };
    }
    rounds.push(totals);
  }
  const pct = (ratio: number) => Number((100 * (ratio - 1)).toFixed(2));
  const overhead = (variant: string, key: "wallPerStep" | "cpuPerStep") => pct(median(ratios(variant, key)));
  const interval = (variant: string, key: "wallPerStep" | "cpuPerStep") => medianInterval(ratios(variant, key)).map(pct);
  // The rollouts the machine left alone: the ratio of the two variants' 10th percentiles (wall per episode step).
  const quietOf = (sample: Record<string, Totals>[], variant: string) =>
    quietRatio(
      sample.map((t) => t[variant]!.wallPerStep),
      sample.map((t) => t.native!.wallPerStep),
    );
  const quiet = (variant: string) => ({
    pct: pct(quietOf(rounds, variant)),
    ci90: bootstrapInterval(rounds, (sample) => quietOf(sample, variant)).map(pct),
  });
  const loopQuiet = quiet("loop");
  const againstQuiet = againstPool ? quiet("against") : null;
  const aaQuiet = args.aa ? quiet("native_again") : null;
  const starts = setup.specs.flatMap((spec) => new Array<typeof spec>(setup.groupSize).fill(spec));
  return {
    native_rollout_ms: Number(median(rounds.map((t) => t.native!.wall)).toFixed(1)),
    sandbox_rollout_ms: Number(median(rounds.map((t) => t.loop!.wall)).toFixed(1)),
    lanes: laneStarts(starts, args.lanes ?? laneShape(setup.protocol, true)).length,
    cold_lanes: laneStarts(starts, args.lanes ?? laneShape(setup.protocol, false)).length,
    steps_per_rollout: median(rounds.map((t) => t.native!.steps)),
    rounds: rounds.length,
    e2e_seconds_played: Number(((performance.now() - started) / 1000).toFixed(1)),
    rollout_overhead_pct: overhead("loop", "wallPerStep"),
    rollout_overhead_ci90: interval("loop", "wallPerStep"),
    rollout_quiet_overhead_pct: loopQuiet.pct,
    rollout_quiet_overhead_ci90: loopQuiet.ci90,
    rollout_cpu_overhead_pct: overhead("loop", "cpuPerStep"),
    cold_rollout_overhead_pct: overhead("cold", "wallPerStep"),
    cold_rollout_cpu_overhead_pct: overhead("cold", "cpuPerStep"),
    one_lane_overhead_pct: overhead("one_lane", "wallPerStep"),
    one_lane_cpu_overhead_pct: overhead("one_lane", "cpuPerStep"),
    ...(againstQuiet
      ? {
          against_rollout_overhead_pct: overhead("against", "wallPerStep"),
          against_rollout_overhead_ci90: interval("against", "wallPerStep"),
          against_rollout_cpu_overhead_pct: overhead("against", "cpuPerStep"),
          against_quiet_overhead_pct: againstQuiet.pct,
          against_quiet_overhead_ci90: againstQuiet.ci90,
        }
      : {}),
    ...(aaQuiet
      ? {
          aa_overhead_pct: overhead("native_again", "wallPerStep"),
          aa_overhead_ci90: interval("native_again", "wallPerStep"),
          aa_quiet_overhead_pct: aaQuiet.pct,
          aa_quiet_overhead_ci90: aaQuiet.ci90,
        }
      : {}),
  };
}

// --only: the environments named (by the names in the tables; "dice-sum" for the test fixture).
const unknown = args.only.filter((name) => !cases.some((c) => c.name === name || c.name.startsWith(`${name} `)));
if (unknown.length) throw new Error(`--only: no environment named ${unknown.join(", ")}; there are ${cases.map((c) => c.name.split(" ")[0]).join(", ")}`);
const selected = args.only.length ? cases.filter((c) => args.only.some((name) => c.name === name || c.name.startsWith(`${name} `))) : cases;

const results = [];
for (const c of selected) {
  const definition = await c.load();
  const games = await scripts(c, definition);
  const limits = { limits: { maxStepsPerEpisode: 1_000 } };
  // The loop's pool first: the first sandbox a process starts answered each op 5-37% slower than later ones in
  // side-by-side tests (and added 0.9-1.6 points more end to end in two of three), so the headline figure is
  // measured on the one that may be slower (docs/SANDBOX.md, Known gaps).
  const loopPool = await SandboxedEnvironmentPool.create({ files: c.files, entry: c.entry }, limits);
  const pool = await SandboxedEnvironmentPool.create({ files: c.files, entry: c.entry }, limits);
  const againstPool = against
    ? ((await against.SandboxedEnvironmentPool.create({ files: c.files, entry: c.entry }, limits)) as unknown as SandboxedEnvironmentPool)
    : null;
  const native = await stepsPerSecond(() => nativeRound(definition, games));
  const beside = againstPool
    ? await stepsPerSecondBeside(
        () => sandboxRound(pool, games),
        () => sandboxRound(againstPool, games),
      )
    : null;
  const sandboxed = beside?.rate ?? (await stepsPerSecond(() => sandboxRound(pool, games)));
  const extra = 1 / sandboxed - 1 / native;
  const setup = args.synthetic ? await synthetic(rolloutSetup(c, definition), definition) : rolloutSetup(c, definition);
  const rollout = await endToEnd(setup, definition, pool, loopPool, againstPool);
  pool.dispose();
  loopPool.dispose();
  againstPool?.dispose();
  results.push({
    name: c.name,
    native_steps_per_s: Math.round(native),
    sandbox_steps_per_s: Math.round(sandboxed),
    sandbox_extra_us_per_step: Number((extra * 1e6).toFixed(2)),
    ...(beside
      ? {
          against_sandbox_steps_per_s: Math.round(beside.againstRate),
          against_extra_us_per_step: Number(((1 / beside.againstRate - 1 / native) * 1e6).toFixed(2)),
          step_change_pct: Number((100 * (beside.timeRatio - 1)).toFixed(1)),
        }
      : {}),
    steps_per_episode: Number((games.reduce((a, g) => a + g.actions.length, 0) / games.length).toFixed(2)),
    step_overhead_model_pct: Number(((100 * Math.max(extra, 0)) / (samplingSecondsPerStep + 1 / sandboxed)).toFixed(3)),
    policy: setup.label,
    ...rollout,
  });
}

// What one crossing costs: the trivial environment, one op per crossing and `batch` ops per crossing.
const crossing: Record<string, number> = {};
{
  const pool = await SandboxedEnvironmentPool.create({ files: cases[0]!.files, entry: cases[0]!.entry }, { limits: { maxStepsPerEpisode: 1_000 } });
  for (const size of [1, args.batch]) {
    const slots = Array.from({ length: size }, (_, slot) => slot);
    let best = Infinity;
    for (let rep = 0; rep < 5; rep++) {
      await answered(pool, pool.resetMany(slots.map((slot) => ({ slot, seed: slot }))));
      const start = now();
      for (let i = 0; i < 19; i++) await answered(pool, pool.stepMany(slots.map((slot) => ({ slot, action: "go" }))));
      best = Math.min(best, (now() - start) / 19);
    }
    crossing[`ops_${size}_us`] = Number((best * 1e3).toFixed(1));
  }
  pool.dispose();
}

// Whether this process can run the sandbox's thread beside this one (the overlap the lanes rely on): a batch
// of steps that spin in the guest, alone, then posted while this thread spins as long.
// parallelism = (alone + alone) / together: 2 with a spare core, 1 when the two threads take turns on one.
const parallelism = await (async () => {
  const spin = trivialSource.replace(
    "step: (state, action) => ({",
    "step: (state, action) => ({ ...{ spun: Array.from({ length: 3000 }, (_, i) => i % 7).length },",
  );
  const pool = await SandboxedEnvironmentPool.create({ files: { "environment.ts": spin } }, { limits: { maxStepsPerEpisode: 1_000 } });
  const slots = Array.from({ length: 16 }, (_, slot) => slot);
  const ratios: number[] = [];
  for (let rep = 0; rep < 5; rep++) {
    await answered(pool, pool.resetMany(slots.map((slot) => ({ slot, seed: slot }))));
    let start = performance.now();
    await answered(pool, pool.stepMany(slots.map((slot) => ({ slot, action: "go" }))));
    const alone = performance.now() - start;
    start = performance.now();
    const stepping = pool.stepMany(slots.map((slot) => ({ slot, action: "go" })));
    while (performance.now() - start < alone);
    await stepping;
    ratios.push((2 * alone) / (performance.now() - start));
  }
  pool.dispose();
  return Number(median(ratios).toFixed(2));
})();

console.log(`parallelism (sandbox thread beside this one, 2 = a spare core): ${parallelism}`);
console.log(
  `end to end: ${args.update ? "each rollout followed by its policy update (learning rate 0), as in the RL loop" : "rollouts back to back (--no-update)"}; ` +
    `garbage collection ${mainThreadGc ? "marked on the main thread (fewer than 3 cores, as a worker)" : "V8's default (concurrent marking)"}`,
);
console.log(`crossing (trivial environment, best of 5): ${crossing.ops_1_us} us with 1 op, ${crossing[`ops_${args.batch}_us`]} us with ${args.batch} ops`);
console.log(`clock (per step): ${args.clock}`);
console.log(`sampling: ${(samplingSecondsPerStep * 1e3).toFixed(3)} ms per episode step (tiny model, batch ${args.batch}, 16 new tokens)`);
console.log("per step (the same scripted games on both sides; median over rounds):");
console.log(
  formatTable(
    ["environment", "steps/episode", "native steps/s", "sandbox steps/s", "sandbox's µs/step", "modelled overhead %"],
    results.map((r) => [r.name, r.steps_per_episode, r.native_steps_per_s, r.sandbox_steps_per_s, r.sandbox_extra_us_per_step, r.step_overhead_model_pct]),
  ),
);
if (against) {
  console.log(`per step against ${args.against} (rounds of the two in turn; change: median ratio of round times):`);
  console.log(
    formatTable(
      ["environment", "sandbox's µs/step", "against µs/step", "change %"],
      results.map((r) => [r.name, r.sandbox_extra_us_per_step, r.against_extra_us_per_step ?? "", r.step_change_pct ?? ""]),
    ),
  );
}
console.log(
  `end to end (one training step's rollout; overheads per episode step against native, the median over rounds, with its 90% interval; quiet: the ratio of the 10th percentiles; at least ${args.trials} rounds and ${args.e2eSeconds} s an environment${args.precision > 0 ? `, then up to ${2 * args.e2eSeconds} s until the interval is within ${args.precision} points of the median` : ""}):`,
);
/** A 90% interval as the table shows it. */
const span = (interval: readonly number[]) => `${interval[0]} to ${interval[1]}`;
console.log(
  formatTable(
    [
      "environment",
      "policy",
      "steps",
      "rounds",
      "native ms",
      "sandbox ms",
      "lanes",
      "overhead %",
      "90% interval",
      "quiet %",
      "quiet 90%",
      "CPU %",
      "cold lanes",
      "cold %",
      "1 lane %",
      "1 lane CPU %",
      ...(against ? ["against %", "against quiet %", "against CPU %"] : []),
      ...(args.aa ? ["A/A %", "A/A 90%", "A/A quiet %", "A/A quiet 90%"] : []),
    ],
    results.map((r) => [
      r.name,
      r.policy,
      r.steps_per_rollout,
      String(r.rounds),
      r.native_rollout_ms,
      r.sandbox_rollout_ms,
      String(r.lanes),
      r.rollout_overhead_pct,
      span(r.rollout_overhead_ci90),
      r.rollout_quiet_overhead_pct,
      span(r.rollout_quiet_overhead_ci90),
      r.rollout_cpu_overhead_pct,
      String(r.cold_lanes),
      r.cold_rollout_overhead_pct,
      r.one_lane_overhead_pct,
      r.one_lane_cpu_overhead_pct,
      ...(against ? [r.against_rollout_overhead_pct ?? "", r.against_quiet_overhead_pct ?? "", r.against_rollout_cpu_overhead_pct ?? ""] : []),
      ...(r.aa_overhead_ci90 && r.aa_quiet_overhead_ci90
        ? [r.aa_overhead_pct!, span(r.aa_overhead_ci90), r.aa_quiet_overhead_pct!, span(r.aa_quiet_overhead_ci90)]
        : []),
    ]),
  ),
);
console.log(
  JSON.stringify({
    clock: args.clock,
    min_rounds: args.trials,
    e2e_seconds: args.e2eSeconds,
    precision_points: args.precision,
    update: args.update,
    aa: args.aa,
    main_thread_gc: mainThreadGc,
    lanes: args.lanes ?? "auto",
    against: args.against || null,
    parallelism,
    sampling_ms_per_step: Number((samplingSecondsPerStep * 1e3).toFixed(4)),
    batch: args.batch,
    crossing,
    envs: results,
  }),
);
