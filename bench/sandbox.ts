/**
 * Environment steps per second natively and in the sandbox, side by side, and what the sandbox adds to a
 * rollout's wall time.
 *
 *   npm run bench:sandbox -- [--seconds 2] [--batch 64] [--clock wall|cpu]
 *
 * Environments: a trivial one, the test fixture dice-sum, and every built-in environment in lib/envs/*.ts.
 * native: EnvironmentSession in this process, one step at a time. sandbox: a SandboxedEnvironmentPool of
 * `batch` slots, all stepped in one crossing per round (as runSandboxedEpisodes does). Actions cycle through a
 * fixed list, so both sides do the same work.
 *
 * rollout_overhead_pct = (sandbox s/step - native s/step) / (sampling s/step + sandbox s/step) * 100, where the
 * sampling time per step is measured with the real runtime: TrainingClient.sample on the tiny model of
 * bench:train (d=64, 2 layers, byte vocabulary), `batch` prompts of 16 tokens, 16 new tokens each, divided by
 * `batch`. Real models are larger, so this overstates the share.
 * Also the cost of one crossing with 1 op and with `batch` ops (the trivial environment, best of 5).
 * --clock cpu times every figure (sampling included) by the process's CPU clock (all threads; the sandbox's
 * thread works while this one waits) instead of the wall clock: on a machine shared with other work, the wall
 * clock measures the contention more than the code.
 * The last line is one JSON object with every figure.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type EnvironmentDefinition, EnvironmentSession } from "@/lib/sdk/environment";
import { BaseModel, TrainingClient, initBackend } from "@/server/runtime";
import { SandboxedEnvironmentPool, type SourceFiles } from "@/server/sandbox";
import { formatTable } from "./lib/measure";

const args = { seconds: 2, batch: 64, clock: "wall" };
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === "--seconds") args.seconds = Number(process.argv[++i]);
  else if (arg === "--batch") args.batch = Number(process.argv[++i]);
  else if (arg === "--clock") args.clock = process.argv[++i] ?? "";
  else throw new Error(`unknown argument '${arg}'; accepted: --seconds, --batch, --clock`);
}
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
const actions = ["1", "2", "3", "4", "5", "6", "up", "down", "left", "right", "yes", "no", "a", "42"];

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

type Case = { name: string; files: SourceFiles; entry: string; load: () => Promise<EnvironmentDefinition<unknown, unknown>> };

const cases: Case[] = [
  {
    name: "trivial",
    files: { "environment.ts": trivialSource },
    entry: "environment.ts",
    load: async () => {
      const { defineEnvironment } = await import("@/lib/sdk/environment");
      // The same source, evaluated natively: strip the types with esbuild and import it from a data URL.
      const { transform } = await import("esbuild");
      const js = (await transform(trivialSource.replace(`from "tinkerlab"`, `from ${JSON.stringify(pathToFileURL(path.join(repoRoot, "lib/sdk/environment.ts")).href)}`), { loader: "ts" })).code;
      void defineEnvironment;
      return (await import(`data:text/javascript,${encodeURIComponent(js)}`)).default;
    },
  },
  fileCase("dice-sum (test fixture)", path.join(repoRoot, "test/unit/sandbox/fixtures"), "dice-env.ts"),
];
const envDir = path.join(repoRoot, "lib/envs");
const skipped: string[] = [];
if (existsSync(envDir)) {
  const files: SourceFiles = {};
  for (const file of readdirSync(envDir).filter((n) => n.endsWith(".ts"))) files[file] = readFileSync(path.join(envDir, file), "utf8");
  for (const file of Object.keys(files).sort()) {
    if (!files[file]!.includes("defineEnvironment")) continue;
    const module = (await import(pathToFileURL(path.join(envDir, file)).href)) as Record<string, unknown>;
    for (const [exportName, value] of Object.entries(module)) {
      const definition = value as EnvironmentDefinition<unknown, unknown>;
      if (exportName === "default" || typeof definition?.step !== "function" || typeof definition.reset !== "function") continue;
      if (definition.data.kind === "dataset") {
        skipped.push(`${definition.name} (reads dataset rows; not benchmarked here)`);
        continue;
      }
      // Each environment is the default export of a one-line entry, as a user's file would be.
      const entry = "__bench_entry.ts";
      cases.push({
        name: definition.name,
        files: { ...files, [entry]: `export { ${exportName} as default } from "./${file.replace(/\.ts$/, "")}";\n` },
        entry,
        load: async () => definition,
      });
    }
  }
}

function fileCase(name: string, dir: string, entry: string): Case {
  const files: SourceFiles = {};
  for (const file of readdirSync(dir).filter((n) => n.endsWith(".ts"))) files[file] = readFileSync(path.join(dir, file), "utf8");
  return { name, files, entry, load: async () => (await import(pathToFileURL(path.join(dir, entry)).href)).default };
}

function stepsPerSecond(run: () => number): number {
  run(); // warm-up
  let steps = 0;
  const start = now();
  while (now() - start < args.seconds * 1000) steps += run();
  return steps / ((now() - start) / 1000);
}

/** One round of `batch` episodes to their end (or 50 steps), natively. Returns the steps taken. */
function nativeRound(definition: EnvironmentDefinition<unknown, unknown>, seedBase: { value: number }): number {
  let steps = 0;
  for (let b = 0; b < args.batch; b++) {
    const session = new EnvironmentSession(definition);
    session.reset(seedBase.value++);
    session.render();
    for (let t = 0; t < 50; t++) {
      const step = session.step(actions[(b + t) % actions.length]!);
      session.render();
      steps++;
      if (step.done) break;
    }
  }
  return steps;
}

/** The same round in the sandbox: one crossing for the resets, then one per step of all live episodes. */
function sandboxRound(pool: SandboxedEnvironmentPool, seedBase: { value: number }): number {
  let steps = 0;
  pool.resetMany(Array.from({ length: args.batch }, (_, slot) => ({ slot, seed: seedBase.value++ })));
  let live = Array.from({ length: args.batch }, (_, slot) => slot);
  for (let t = 0; t < 50 && live.length; t++) {
    const results = pool.stepMany(live.map((slot) => ({ slot, action: actions[(slot + t) % actions.length]! })));
    steps += results.length;
    live = live.filter((_, i) => !results[i]!.done);
  }
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

const results = [];
for (const c of cases) {
  const definition = await c.load();
  const pool = await SandboxedEnvironmentPool.create({ files: c.files, entry: c.entry }, { limits: { maxStepsPerEpisode: 1_000 } });
  const native = stepsPerSecond(() => nativeRound(definition, { value: 0 }));
  const sandboxed = stepsPerSecond(() => sandboxRound(pool, { value: 0 }));
  pool.dispose();
  const extra = 1 / sandboxed - 1 / native;
  results.push({
    name: c.name,
    native_steps_per_s: Math.round(native),
    sandbox_steps_per_s: Math.round(sandboxed),
    rollout_overhead_pct: Number(((100 * Math.max(extra, 0)) / (samplingSecondsPerStep + 1 / sandboxed)).toFixed(3)),
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
      pool.resetMany(slots.map((slot) => ({ slot, seed: slot })));
      const start = now();
      for (let i = 0; i < 19; i++) pool.stepMany(slots.map((slot) => ({ slot, action: "go" })));
      best = Math.min(best, (now() - start) / 19);
    }
    crossing[`ops_${size}_us`] = Number((best * 1e3).toFixed(1));
  }
  pool.dispose();
}

for (const line of skipped) console.log(`skipped: ${line}`);
console.log(
  `crossing (trivial environment, best of 5): ${crossing.ops_1_us} us with 1 op, ${crossing[`ops_${args.batch}_us`]} us with ${args.batch} ops`,
);
console.log(`clock: ${args.clock}`);
console.log(`sampling: ${(samplingSecondsPerStep * 1e3).toFixed(3)} ms per episode step (tiny model, batch ${args.batch}, 16 new tokens)`);
console.log(
  formatTable(
    ["environment", "native steps/s", "sandbox steps/s", "sandbox/native", "rollout overhead %"],
    results.map((r) => [r.name, r.native_steps_per_s, r.sandbox_steps_per_s, `${(r.sandbox_steps_per_s / r.native_steps_per_s).toFixed(2)}x`, r.rollout_overhead_pct]),
  ),
);
console.log(JSON.stringify({ clock: args.clock, sampling_ms_per_step: Number((samplingSecondsPerStep * 1e3).toFixed(4)), batch: args.batch, crossing, envs: results }));
