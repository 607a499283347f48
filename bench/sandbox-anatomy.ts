/**
 * Where a sandboxed rollout's extra time goes: the policy's sampling, the lanes, the host thread's sandbox work,
 * and the sandbox's thread waiting for a core.
 *
 *   npm run bench:sandbox-anatomy -- [--only arithmetic,guess-number] [--seconds 60]
 *
 * For each use case named (default: arithmetic, the one whose target is closest), one training step's rollout as
 * bench:sandbox plays it (collectGroups with the use case's template and shipped base, each rollout followed,
 * untimed, by its policy update at learning rate 0), in rounds of three variants in turn (the order rotating),
 * all on the round's sampling seed:
 *  - native: the environment in this process, the whole batch in one `runEpisodes`;
 *  - native in lanes: the environment in this process, the batch cut where the sandboxed rollout cuts it
 *    (`laneStarts` of `laneShape(protocol, true)`), one `runEpisodes` per lane after another: the policy's cost of
 *    sampling in parts, with no sandbox (for a single-turn protocol the same calls in the same order as the
 *    sandboxed rollout; for a multi-turn one the same calls, each lane's rounds together);
 *  - sandboxed: `runSandboxedEpisodes` as the RL loop plays a step after the first (its episodes reset during the
 *    rollout before, told them as `next`), in a pool of its own.
 * Each rollout's wall time is split into the time inside the policy's `sample` calls and the rest (this thread's
 * protocol code, tokenizing, and, sandboxed, posting, reading and waiting for the sandbox's thread). "quiet" is
 * the ratio of two variants' 10th percentiles (the rollouts the machine left alone), "median" the median of the
 * per-round ratios, as in bench:sandbox. lanes = native in lanes against native; sandbox = sandboxed against
 * native in lanes (what the sandbox adds beyond sampling in parts); total = sandboxed against native.
 * The sandboxed rest is split again: the time this thread blocked for the sandbox's answers (a rollout's last
 * crossing, when the sandbox's thread is late) and the time it worked.
 * On Linux, the sandbox's thread's time on a core and its time runnable but waiting for one (its
 * /proc/self/task/<tid>/schedstat, read around each sandboxed rollout), whose work lanes hide only while it runs.
 * Each rollout is also cut at its `sample` calls (before the first, each sampling, the gaps, after the last): for
 * the variants that sample in lanes, which part of the rollout the sandbox lengthens. And the sandboxed rollout's
 * crossings in order (a probe's `crossing` hook, `pool.installProbe`): when each was posted, the thread's wake-up, its run, and how long
 * its answer waited for this thread. And this thread's own sandbox functions inside the sandboxed rollout
 * (its `hostWork` hook): building each batch, posting it, taking its answer, parsing and settling it, per
 * rollout and per call (they cost several times more there than in a loop of their own).
 * The last line is one JSON object with every figure.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { useCases } from "@/lib/envs";
import { builtInBaseDir } from "@/lib/envs/bases";
import { readBuiltInDataset } from "@/lib/envs/datasets";
import { groupNormalized } from "@/lib/rl/advantages";
import { collectGroups, toTrainingBatch, type EpisodePlayer } from "@/lib/rl/rollouts";
import { trainingSpecs } from "@/lib/rl/train";
import { policyUpdate } from "@/lib/rl/update";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { defineExperiment } from "@/lib/sdk/experiment";
import { runEpisodes } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient, initBackend } from "@/server/runtime";
import { type CrossingTiming, type HostWork, SandboxedEnvironmentPool, laneShape, runSandboxedEpisodes, type SourceFiles } from "@/server/sandbox";
import { laneStarts } from "@/server/sandbox";
import { formatTable, mean, median, quantile, quietRatio } from "./lib/measure";
import { runAsRolloutProcess } from "./lib/rollout-process";

runAsRolloutProcess(); // the process a worker is (server/worker/gc.ts), as bench:sandbox

const args = { only: ["arithmetic"], seconds: 60 };
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === "--only")
    args.only = (process.argv[++i] ?? "")
      .split(",")
      .map((name) => name.trim())
      .filter(Boolean);
  else if (arg === "--seconds") args.seconds = Number(process.argv[++i]);
  else throw new Error(`unknown argument '${arg}'; accepted: --only NAME[,NAME], --seconds N`);
}
if (!(args.seconds >= 0)) throw new Error(`--seconds must be a number of seconds, 0 or more; got ${args.seconds}`);
const unknown = args.only.filter((name) => !useCases[name]);
if (unknown.length > 0 || args.only.length === 0) {
  throw new Error(`--only: no use case named ${unknown.join(", ") || "(none given)"}; there are ${Object.keys(useCases).join(", ")}`);
}

const envDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "lib", "envs");
const envFiles: SourceFiles = {};
for (const file of readdirSync(envDir).filter((name) => name.endsWith(".ts"))) envFiles[file] = readFileSync(path.join(envDir, file), "utf8");
const { engine } = await initBackend({ prefer: "js" });

/** The sandbox's threads' scheduler times so far (ms on a core, ms runnable and waiting), or null off Linux. */
function schedstat(tids: string[]): { run: number; wait: number } | null {
  if (tids.length === 0) return null;
  let run = 0;
  let wait = 0;
  for (const tid of tids) {
    const file = `/proc/self/task/${tid}/schedstat`;
    if (!existsSync(file)) return null;
    const [onCpu, waiting] = readFileSync(file, "utf8").trim().split(/\s+/).map(Number);
    run += onCpu! / 1e6;
    wait += waiting! / 1e6;
  }
  return { run, wait };
}
const threadIds = () => (existsSync("/proc/self/task") ? readdirSync("/proc/self/task") : []);

type Rollout = {
  wall: number;
  sampling: number;
  blocked: number;
  calls: number;
  steps: number;
  thread: { run: number; wait: number } | null;
  /** The rollout cut at its `sample` calls' starts and ends: before the first, the first's sampling, the gap, …, after the last (ms). */
  segments: number[];
  /** Sandboxed: each crossing's times, and the end of the last `sample` call (epoch ms). */
  crossings: CrossingTiming[];
  lastSampleEnd: number;
  /** Sandboxed: each call of this thread's sandbox functions (the probe's `hostWork`). */
  host: HostWork[];
};
const hostWorkKinds = ["build", "post", "take", "parse", "settle"] as const;
const variantNames = ["native", "native_lanes", "sandboxed"] as const;
/** A rollout counts as blocked when this thread waited longer than this for the sandbox (a wait shorter is the clock's reading). */
const blockedMinMs = 0.05;
/** The crossings table lists a rollout's crossings one by one only up to this many (a multi-turn rollout makes dozens). */
const maxCrossingRows = 8;
type VariantName = (typeof variantNames)[number];

const results = [];
for (const name of args.only) {
  const useCase = useCases[name]!;
  const definition = useCase.environment;
  const config = defineExperiment({ ...useCase.template, seed: 1 });
  const model = BaseModel.load(builtInBaseDir(config.agent.base), { engine });
  const client = new TrainingClient(model, { seed: 1 });
  // The policy's sampling, timed: a wrapper over the client, which the rollout calls as it would the client. Each
  // call's start and end, in order: the rollout's sampling time and calls follow from them.
  const timing = { marks: [] as number[] };
  const primitives = Object.create(client) as TrainingClient;
  primitives.sample = async (...sampleArgs: Parameters<TrainingClient["sample"]>) => {
    timing.marks.push(performance.now());
    try {
      return await client.sample(...sampleArgs);
    } finally {
      timing.marks.push(performance.now());
    }
  };
  const policy = { primitives, tokenizer: model.tokenizer, contextLength: model.config.contextLength };
  const rows = definition.data.kind === "dataset" ? readBuiltInDataset(definition.data.dataset) : null;
  const specs = trainingSpecs(config, 0, rows);
  const { file, exportName } = await definedIn(definition);
  const entry = "__anatomy_entry.ts";
  const before = new Set(threadIds());
  const pool = await SandboxedEnvironmentPool.create(
    { files: { ...envFiles, [entry]: `export { ${exportName} as default } from "./${file.replace(/\.ts$/, "")}";\n` }, entry },
    { limits: { maxStepsPerEpisode: 1_000 } },
  );
  // The threads the pool started: its sandbox's thread, and any the process started then (libuv's, on its first
  // file read), which the warm-up below drops when they did no work.
  let sandboxThreads = threadIds().filter((tid) => !before.has(tid));
  const starts = specs.flatMap((spec) => new Array<typeof spec>(config.algorithm.groupSize).fill(spec));
  const cuts = laneStarts(starts, laneShape(useCase.protocol, true));
  const players: Record<VariantName, EpisodePlayer | undefined> = {
    native: undefined,
    native_lanes: async (protocol, laneless, act, options) => {
      const played = [];
      for (let lane = 0; lane < cuts.length; lane++) {
        const part = laneless.slice(cuts[lane], cuts[lane + 1] ?? laneless.length);
        played.push(
          ...(await runEpisodes(
            protocol,
            part.map((start) => ({ ...start, session: new EnvironmentSession(definition) })),
            act,
            { fitsContext: options.fitsContext },
          )),
        );
      }
      return played;
    },
    sandboxed: (protocol, all, act, options) => runSandboxedEpisodes(protocol, pool, all, act, options),
  };
  const environment = { name: definition.name, data: definition.data, scoreName: definition.scoreName };
  const once = async (variant: VariantName, seed: number): Promise<Rollout> => {
    timing.marks = [];
    const threadBefore = variant === "sandboxed" ? schedstat(sandboxThreads) : null;
    const crossings: CrossingTiming[] = [];
    const host: HostWork[] = [];
    let blocked = 0;
    // The sandbox's timings come through the hooks this bench installs; the native variants install none.
    pool.installProbe(
      variant === "sandboxed" ? { crossing: (timing) => crossings.push(timing), hostWork: (work) => host.push(work), blocked: (ms) => (blocked += ms) } : null,
    );
    const start = performance.now();
    const groups = await collectGroups({
      policy,
      environment: variant === "sandboxed" ? environment : definition,
      protocol: useCase.protocol,
      specs,
      groupSize: config.algorithm.groupSize,
      sampling: { temperature: config.agent.sampling.temperature, maxTokens: config.agent.sampling.maxTokens, seed },
      playEpisodes: players[variant],
      nextSpecs: variant === "sandboxed" ? specs : undefined,
    });
    const end = performance.now();
    const wall = end - start;
    const marks = [start, ...timing.marks, end];
    const segments = marks.slice(1).map((mark, i) => mark - marks[i]!);
    const threadAfter = threadBefore && schedstat(sandboxThreads);
    const rollout: Rollout = {
      wall,
      sampling: segments.reduce((sum, ms, i) => (i % 2 === 1 ? sum + ms : sum), 0),
      blocked,
      calls: timing.marks.length / 2,
      steps: groups.flat().reduce((sum, trajectory) => sum + trajectory.turns.length, 0),
      thread: threadBefore && threadAfter ? { run: threadAfter.run - threadBefore.run, wait: threadAfter.wait - threadBefore.wait } : null,
      segments,
      crossings,
      lastSampleEnd: performance.timeOrigin + (timing.marks.at(-1) ?? end),
      host,
    };
    pool.installProbe(null);
    await policyUpdate(
      client,
      toTrainingBatch(groups, groupNormalized(groups, true)),
      { ...config.algorithm, learningRate: 0 },
      config.agent.sampling.temperature,
    );
    return rollout;
  };
  // Warm-up: the model's first calls, the sandbox's first crossings; the sandbox's own thread is the one that ran.
  const threadStart = new Map(sandboxThreads.map((tid) => [tid, schedstat([tid])?.run ?? 0]));
  for (const variant of variantNames) await once(variant, 0);
  sandboxThreads = sandboxThreads.filter((tid) => (schedstat([tid])?.run ?? 0) - threadStart.get(tid)! > 0.5);
  const rounds: Record<VariantName, Rollout>[] = [];
  const started = performance.now();
  for (let round = 0; round < 12 || performance.now() - started < args.seconds * 1000; round++) {
    const played = {} as Record<VariantName, Rollout>;
    for (let k = 0; k < variantNames.length; k++) {
      const variant = variantNames[(round + k) % variantNames.length]!;
      played[variant] = await once(variant, (1 + round) * 100);
    }
    rounds.push(played);
  }
  pool.dispose();

  // Per episode step, as bench:sandbox: a split batch samples differently, and its episodes' lengths differ a little.
  const perStep = (variant: VariantName) => rounds.map((round) => round[variant].wall / round[variant].steps);
  const ms = (variant: VariantName, key: "wall" | "sampling", q: number) =>
    quantile(
      rounds.map((round) => round[variant][key]),
      q,
    );
  const other = (variant: VariantName, q: number) =>
    quantile(
      rounds.map((round) => round[variant].wall - round[variant].sampling),
      q,
    );
  const pct = (ratio: number) => Number((100 * (ratio - 1)).toFixed(2));
  const quiet = (variant: VariantName, against: VariantName) => pct(quietRatio(perStep(variant), perStep(against)));
  const medianOf = (variant: VariantName, against: VariantName) => {
    const baseline = perStep(against);
    return pct(median(perStep(variant).map((value, i) => value / baseline[i]!)));
  };
  /** Each segment's p10 and median over the rounds whose rollout made the median number of `sample` calls. */
  const segmentsOf = (variant: VariantName, calls: number) => {
    const alike = rounds.map((round) => round[variant].segments).filter((segments) => segments.length === 2 * calls + 1);
    return alike.length === 0
      ? null
      : alike[0]!.map((_, i) => ({
          name: i === 0 ? "before" : i === alike[0]!.length - 1 ? "after" : i % 2 === 1 ? `sample ${(i + 1) / 2}` : `gap ${i / 2}`,
          ms_p10: round2(
            quantile(
              alike.map((segments) => segments[i]!),
              0.1,
            ),
          ),
          ms_p50: round2(
            quantile(
              alike.map((segments) => segments[i]!),
              0.5,
            ),
          ),
        }));
  };
  const summary = (variant: VariantName, calls = median(rounds.map((round) => round[variant].calls))) => ({
    wall_ms_p10: round2(ms(variant, "wall", 0.1)),
    wall_ms_p50: round2(ms(variant, "wall", 0.5)),
    sampling_ms_p10: round2(ms(variant, "sampling", 0.1)),
    sampling_ms_p50: round2(ms(variant, "sampling", 0.5)),
    other_ms_p10: round2(other(variant, 0.1)),
    other_ms_p50: round2(other(variant, 0.5)),
    sample_calls: calls,
    segments: segmentsOf(variant, calls),
  });
  const threads = rounds.map((round) => round.sandboxed.thread).filter((thread) => thread !== null);
  /**
   * The sandboxed rollout's crossings in order, over the rounds that made the median number of them (when at most
   * `maxCrossingRows`): when each was posted, relative to the end of the last sampling (negative: before it), the
   * thread's wake-up (posted to taken up), its run, and the time from its answer to this thread taking it.
   */
  const crossingRows = (() => {
    const count = median(rounds.map((round) => round.sandboxed.crossings.length));
    const alike = rounds.map((round) => round.sandboxed).filter((rollout) => rollout.crossings.length === count);
    if (alike.length === 0 || count > maxCrossingRows) return null;
    const spread = (values: number[]) => ({ p10: round2(quantile(values, 0.1)), p50: round2(quantile(values, 0.5)), p90: round2(quantile(values, 0.9)) });
    return alike[0]!.crossings.map((_, i) => {
      const at = alike.map((rollout) => ({ crossing: rollout.crossings[i]!, lastSampleEnd: rollout.lastSampleEnd }));
      return {
        ops: median(at.map(({ crossing }) => crossing.ops)),
        posted_after_last_sample_ms_p50: round2(median(at.map(({ crossing, lastSampleEnd }) => crossing.postedAt - lastSampleEnd))),
        wake_ms: spread(at.map(({ crossing }) => crossing.startedAt - crossing.postedAt)),
        run_ms: spread(at.map(({ crossing }) => crossing.ranAt - crossing.startedAt)),
        answer_to_taken_ms: spread(at.map(({ crossing }) => crossing.takenAt - crossing.ranAt)),
      };
    });
  })();
  /**
   * This thread's sandbox functions in the sandboxed rollout: each kind's time per rollout (p10, median), and per
   * call by the size of its batch (median µs), over the rounds.
   */
  const hostWork = (() => {
    const perRollout = (what: HostWork["what"] | "total") =>
      rounds.map((round) => round.sandboxed.host.filter((work) => what === "total" || work.what === what).reduce((sum, work) => sum + work.ms, 0));
    const calls = new Map<string, { what: HostWork["what"]; ops: number; us: number[] }>();
    for (const round of rounds) {
      for (const { what, ops, ms } of round.sandboxed.host) {
        const key = `${what} ${ops}`;
        if (!calls.has(key)) calls.set(key, { what, ops, us: [] });
        calls.get(key)!.us.push(ms * 1000);
      }
    }
    return {
      per_rollout_ms: Object.fromEntries(
        [...hostWorkKinds, "total" as const].map((what) => [
          what,
          { p10: round2(quantile(perRollout(what), 0.1)), p50: round2(quantile(perRollout(what), 0.5)) },
        ]),
      ),
      per_call_us_p50: [...calls.values()]
        .filter(({ us }) => us.length >= rounds.length / 2)
        .map(({ what, ops, us }) => ({ what, ops, us: round2(quantile(us, 0.5)) })),
    };
  })();
  const blocked = rounds.map((round) => round.sandboxed.blocked);
  const worked = rounds.map((round) => round.sandboxed.wall - round.sandboxed.sampling - round.sandboxed.blocked);
  results.push({
    name,
    policy: `${config.agent.base}, ${config.algorithm.groupsPerStep}x${config.algorithm.groupSize}`,
    lanes: cuts.length,
    rounds: rounds.length,
    native: summary("native"),
    native_lanes: summary("native_lanes"),
    sandboxed: summary("sandboxed"),
    lanes_quiet_pct: quiet("native_lanes", "native"),
    lanes_median_pct: medianOf("native_lanes", "native"),
    sandbox_quiet_pct: quiet("sandboxed", "native_lanes"),
    sandbox_median_pct: medianOf("sandboxed", "native_lanes"),
    total_quiet_pct: quiet("sandboxed", "native"),
    total_median_pct: medianOf("sandboxed", "native"),
    sandboxed_rest: {
      worked_ms_p10: round2(quantile(worked, 0.1)),
      worked_ms_p50: round2(quantile(worked, 0.5)),
      blocked_ms_mean: round2(mean(blocked)),
      blocked_ms_p50: round2(quantile(blocked, 0.5)),
      blocked_ms_p90: round2(quantile(blocked, 0.9)),
      blocked_rollouts: blocked.filter((ms) => ms > blockedMinMs).length,
    },
    crossings: crossingRows,
    host_work: hostWork,
    thread:
      threads.length > 0
        ? {
            threads: sandboxThreads.length,
            run_ms_mean: round2(mean(threads.map((thread) => thread.run))),
            wait_ms_mean: round2(mean(threads.map((thread) => thread.wait))),
            wait_ms_p50: round2(
              quantile(
                threads.map((thread) => thread.wait),
                0.5,
              ),
            ),
            wait_ms_p90: round2(
              quantile(
                threads.map((thread) => thread.wait),
                0.9,
              ),
            ),
          }
        : null,
  });
}

function round2(value: number): number {
  return Number(value.toFixed(2));
}

/** The file of lib/envs and the export that hold `definition`: the sandbox compiles that file, as a user's. */
async function definedIn(definition: object): Promise<{ file: string; exportName: string }> {
  for (const file of Object.keys(envFiles).sort()) {
    if (!envFiles[file]!.includes("defineEnvironment")) continue;
    const module = (await import(pathToFileURL(path.join(envDir, file)).href)) as Record<string, unknown>;
    const exportName = Object.keys(module).find((key) => key !== "default" && module[key] === definition);
    if (exportName) return { file, exportName };
  }
  throw new Error("the use case's environment is not a named export of a file in lib/envs");
}

console.log("one training step's rollout, each followed by its policy update (learning rate 0); ms per rollout, p10 / median over rounds");
console.log(
  formatTable(
    ["use case", "variant", "calls", "wall p10", "wall p50", "sampling p10", "sampling p50", "other p10", "other p50"],
    results.flatMap((result) =>
      variantNames.map((variant) => {
        const s = result[variant];
        return [
          `${result.name} (${result.policy}, ${result.rounds} rounds)`,
          variant.replace("_", " in "),
          s.sample_calls,
          s.wall_ms_p10,
          s.wall_ms_p50,
          s.sampling_ms_p10,
          s.sampling_ms_p50,
          s.other_ms_p10,
          s.other_ms_p50,
        ];
      }),
    ),
  ),
);
console.log(
  "\nwhat each adds per episode step (quiet: ratio of 10th percentiles; median: of per-round ratios), and the sandbox's thread per sandboxed rollout (Linux)",
);
console.log(
  formatTable(
    [
      "use case",
      "lanes quiet %",
      "lanes median %",
      "sandbox quiet %",
      "sandbox median %",
      "total quiet %",
      "total median %",
      "thread run ms",
      "thread wait ms (mean)",
      "wait p50",
      "wait p90",
    ],
    results.map((result) => [
      result.name,
      result.lanes_quiet_pct,
      result.lanes_median_pct,
      result.sandbox_quiet_pct,
      result.sandbox_median_pct,
      result.total_quiet_pct,
      result.total_median_pct,
      result.thread ? result.thread.run_ms_mean : "-",
      result.thread ? result.thread.wait_ms_mean : "-",
      result.thread ? result.thread.wait_ms_p50 : "-",
      result.thread ? result.thread.wait_ms_p90 : "-",
    ]),
  ),
);
console.log("\nthe sandboxed rollout's rest (outside sampling): this thread working, and blocked for the sandbox's answers; ms per rollout");
console.log(
  formatTable(
    [
      "use case",
      "worked p10",
      "worked p50",
      "native in lanes rest p10",
      "native in lanes rest p50",
      "blocked mean",
      "blocked p50",
      "blocked p90",
      `rollouts blocked > ${blockedMinMs} ms`,
    ],
    results.map((result) => [
      result.name,
      result.sandboxed_rest.worked_ms_p10,
      result.sandboxed_rest.worked_ms_p50,
      result.native_lanes.other_ms_p10,
      result.native_lanes.other_ms_p50,
      result.sandboxed_rest.blocked_ms_mean,
      result.sandboxed_rest.blocked_ms_p50,
      result.sandboxed_rest.blocked_ms_p90,
      `${result.sandboxed_rest.blocked_rollouts} of ${result.rounds}`,
    ]),
  ),
);
console.log("\nthe rollout cut at its sample calls (ms, p10 / median; rounds with the median number of calls)");
for (const result of results) {
  const names = result.sandboxed.segments?.map((segment) => segment.name) ?? [];
  const rows = variantNames
    .filter((variant) => result[variant].segments?.length === names.length)
    .map((variant) => [variant.replace("_", " in "), ...result[variant].segments!.map((segment) => `${segment.ms_p10} / ${segment.ms_p50}`)]);
  if (rows.length > 0) console.log(`${result.name}\n${formatTable(["variant", ...names], rows)}`);
}
console.log(
  "\nthe sandboxed rollout's crossings in order (ms; posted: relative to the end of the last sampling; wake: posted to the thread starting; run: the thread's; answer to taken: this thread taking the answer)",
);
for (const result of results) {
  if (!result.crossings) continue;
  const cell = ({ p10, p50, p90 }: { p10: number; p50: number; p90: number }) => `${p10} / ${p50} / ${p90}`;
  console.log(
    `${result.name}\n${formatTable(
      ["crossing", "ops", "posted p50", "wake p10 / p50 / p90", "run p10 / p50 / p90", "answer to taken p10 / p50 / p90"],
      result.crossings.map((row, i) => [
        String(i + 1),
        String(row.ops),
        row.posted_after_last_sample_ms_p50,
        cell(row.wake_ms),
        cell(row.run_ms),
        cell(row.answer_to_taken_ms),
      ]),
    )}`,
  );
}
console.log("\nthis thread's sandbox functions in the sandboxed rollout: ms per rollout (p10 / median), then µs per call by kind and batch size (median)");
for (const result of results) {
  const perRollout = result.host_work.per_rollout_ms;
  console.log(
    `${result.name}\n${formatTable([...hostWorkKinds, "total"], [[...hostWorkKinds, "total" as const].map((what) => `${perRollout[what]!.p10} / ${perRollout[what]!.p50}`)])}`,
  );
  const sizes = [...new Set(result.host_work.per_call_us_p50.map((call) => call.ops))].sort((a, b) => b - a);
  const cell = (what: string, ops: number) => result.host_work.per_call_us_p50.find((call) => call.what === what && call.ops === ops)?.us ?? "-";
  console.log(
    formatTable(
      ["ops", ...hostWorkKinds],
      sizes.map((ops) => [String(ops), ...hostWorkKinds.map((what) => cell(what, ops))]),
    ),
  );
}
console.log(JSON.stringify({ seconds: args.seconds, use_cases: results }));
process.exit(0);
