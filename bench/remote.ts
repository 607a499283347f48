/**
 * `npm run bench:remote`: the training primitives through a remote session against the same primitives in-process.
 *
 * A server is started (`tinkerlab start` as a child process, its own local worker) and, in the same run:
 *   - per-call overhead: a small `forward` (2 sequences of 8 tokens) 200 times in-process, then on a session of
 *     the same base; the median time of each and their difference: the client's request, the worker's exchange
 *     and their statements on the database together;
 *   - a GRPO step: the arithmetic use case's template (32 groups of 8, its sampling), `--steps` steps (default 4)
 *     of lib/rl's trainRl in this process on an in-process TrainingClient, then the same config on a remote
 *     session, in `--rounds` rounds (default 3) that alternate the two, so that a change in the machine's load
 *     (other processes on a shared machine) weighs on both alike; the median step time of each over all rounds,
 *     and the remote's overhead over in-process in percent.
 * In-process runs in this process, the session on the server's worker process: the same kernels, each with the
 * machine to itself while it runs. The client authenticates with an API key, as a script against a team server
 * does (its lookup is part of every request). The last line is JSON: {"remote_overhead_pct", "call_overhead_ms_p50", …}.
 */
import path from "node:path";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { createClient } from "../lib/client";
import { useCases } from "../lib/envs";
import type { Tokenizer } from "../lib/model/tokenizer";
import type { TrainingPrimitives } from "../lib/rl/primitives";
import { trainRl } from "../lib/rl/train";
import { defineExperiment } from "../lib/sdk/experiment";
import { BaseModel, initBackend, TrainingClient } from "../server/runtime";
import { ROOT, startServer, tempDir } from "../test/e2e/support/server";
import { formatTable, median, quantile } from "./lib/measure";

const option = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback);
const steps = option("--steps", 4);
const rounds = option("--rounds", 3);
const calls = option("--calls", 200);
/** --cpu-prof DIR: the server's processes (web server, worker, job host) write V8 CPU profiles there when they exit. */
const cpuProfDir = process.argv.includes("--cpu-prof") ? path.resolve(process.argv[process.argv.indexOf("--cpu-prof") + 1]!) : null;

const useCase = useCases.arithmetic!;
const template = useCase.template;
const config = defineExperiment({ ...template, algorithm: { ...template.algorithm, steps }, evaluation: { every: 0, episodes: 8 } });
const base = config.agent.base;
const batch = {
  tokens: [
    [1, 49, 50, 43, 55, 61, 56, 57],
    [1, 51, 43, 52, 52, 61, 57, 54],
  ],
};

/** Milliseconds of each of `n` calls of `run`, after 10 unmeasured ones. */
async function times(n: number, run: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 10; i++) await run();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await run();
    out.push(performance.now() - started);
  }
  return out;
}

/**
 * Each training step's wall time (ms) of trainRl on `primitives`: from the end of what came before it (the step
 * before, or the evaluation at step 0, whose report is its last act) to its own report. Evaluations are left out.
 */
async function stepTimes(primitives: TrainingPrimitives, tokenizer: Tokenizer, contextLength: number): Promise<number[]> {
  const out: number[] = [];
  let last = performance.now();
  await trainRl({
    config,
    policy: { primitives, tokenizer, contextLength },
    environment: useCase.environment,
    protocol: useCase.protocol,
    hooks: {
      onMetrics: async (_step, metrics) => {
        const now = performance.now();
        if ("reward/mean" in metrics) out.push(now - last);
        last = now;
      },
    },
  });
  return out;
}

buildIfStale(ROOT);
const backend = await initBackend();
const server = await startServer({
  ARTIFACTS_DIR: tempDir("bench-remote"),
  TINKERLAB_EXAMPLES: "off",
  ...(cpuProfDir ? { NODE_OPTIONS: `--require ${path.join(ROOT, "bench/lib/cpu-prof-preload.cjs")}`, BENCH_CPU_PROF_DIR: cpuProfDir } : {}),
});
try {
  const local = createClient({ url: server.url });
  const [project] = await local.api.projects.list.query();
  const { key } = await local.api.apiKeys.create.mutate({ name: "bench-remote", projectId: project!.id, role: "editor" });
  const client = createClient({ url: server.url, apiKey: key });
  const load = () => BaseModel.load(path.join(ROOT, "lib", "envs", "bases", base));

  const inProcess = new TrainingClient(load(), { seed: config.seed });
  const localCall = await times(calls, () => inProcess.forward(batch));
  const probe = await client.training.create({ base, seed: config.seed, name: "bench-calls" });
  const remoteCall = await times(calls, () => probe.forward(batch));
  await probe.close();

  const localBase = load();
  const grpoLocal = new TrainingClient(localBase, { seed: config.seed });
  const session = await client.training.create({ base, seed: config.seed, name: "bench-grpo" });
  const localSteps: number[] = [];
  const remoteSteps: number[] = [];
  for (let round = 0; round < rounds; round++) {
    localSteps.push(...(await stepTimes(grpoLocal, localBase.tokenizer, localBase.config.contextLength)));
    remoteSteps.push(...(await stepTimes(session, session.tokenizer, session.contextLength)));
  }
  await session.close();

  const callOverhead = median(remoteCall) - median(localCall);
  const overheadPct = (median(remoteSteps) / median(localSteps) - 1) * 100;
  const ms = (x: number) => x.toFixed(2);
  console.log(
    `runtime: ${backend.capabilities.backend}${backend.capabilities.kernel ? ` (${backend.capabilities.kernel})` : ""}; ${base}; GRPO ${config.algorithm.groupsPerStep}×${config.algorithm.groupSize} episodes a step`,
  );
  console.log(
    formatTable(
      ["measure", "in-process", "remote", "remote − in-process"],
      [
        [`forward, 2×8 tokens (ms, p50 of ${calls})`, ms(median(localCall)), ms(median(remoteCall)), ms(callOverhead)],
        [`forward (ms, p90)`, ms(quantile(localCall, 0.9)), ms(quantile(remoteCall, 0.9)), ms(quantile(remoteCall, 0.9) - quantile(localCall, 0.9))],
        [`GRPO step (ms, median of ${localSteps.length}, ${rounds} rounds)`, ms(median(localSteps)), ms(median(remoteSteps)), `${overheadPct.toFixed(1)}%`],
      ],
    ),
  );
  console.log(
    JSON.stringify({
      remote_overhead_pct: Number(overheadPct.toFixed(1)),
      call_overhead_ms_p50: Number(callOverhead.toFixed(2)),
      call_ms_p50: { in_process: Number(median(localCall).toFixed(2)), remote: Number(median(remoteCall).toFixed(2)) },
      grpo_step_ms: { in_process: Number(median(localSteps).toFixed(1)), remote: Number(median(remoteSteps).toFixed(1)) },
    }),
  );
} finally {
  await server.stop();
}
