/**
 * `npx tsx bench/runs-table.ts`: how long runs.table takes on a project of 1,000 runs, through the API's caller on
 * the embedded database (or PostgreSQL with `--database-url`). Each run has `--metrics` series of `--steps` points
 * (default 10 × 200: 2,000,000 points); the queries are the table's default view, a sort by a metric's best value
 * with two metric and one config column, the same grouped by a config field with a condition, and the pickers'
 * choices. Prints a table (median and slowest of `--trials`), then one JSON line:
 *
 *   {"runs":1000,"points":2000000,"default_ms":…,"sorted_by_metric_ms":…,"grouped_filtered_ms":…,"choices_ms":…}
 */
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { createProject } from "../server/auth";
import { LOCAL_USER, openDatabase } from "../server/db";
import { callerFor } from "../test/integration/support/database";
import { formatTable } from "./lib/measure";

const { values: options } = parseArgs({
  options: {
    runs: { type: "string", default: "1000" },
    metrics: { type: "string", default: "10" },
    steps: { type: "string", default: "200" },
    trials: { type: "string", default: "5" },
    "database-url": { type: "string" },
  },
});
const RUNS = Number(options.runs);
const METRICS = Number(options.metrics);
const STEPS = Number(options.steps);
const TRIALS = Number(options.trials);

const handle = await openDatabase(options["database-url"] ? { databaseUrl: options["database-url"] } : { pgliteDir: "memory" });
const db = handle.db;
const caller = callerFor(handle);
const projectId = (await createProject(db, { name: `bench-${Date.now()}`, ownerId: LOCAL_USER.id })).id;
const experiment = await caller.experiments.create({
  projectId,
  name: "bench",
  config: { name: "bench", environment: "arithmetic", agent: { base: "arithmetic-base" } },
});
const config = (await caller.experiments.version({ id: experiment.id, version: 1 })).config;

// The runs and their points, written in bulk by SQL: a learning rate of four, a seed each, 10 series of 200 steps.
const started = performance.now();
await db.execute(sql`
  insert into runs (id, project_id, experiment_id, experiment_version_id, created_by, name, status, config, seed, step, total_steps, tags, created_at, started_at, finished_at)
  select 'run_bench' || i, ${projectId}, ${experiment.id}, ${experiment.versionId}, ${LOCAL_USER.id}, 'bench-' || i, 'completed',
         jsonb_set(jsonb_set(${JSON.stringify(config)}::jsonb, '{algorithm,learningRate}', to_jsonb((array[0.1, 0.01, 0.001, 0.0001])[1 + i % 4])), '{seed}', to_jsonb(i)),
         i, ${STEPS}, ${STEPS}, case when i % 3 = 0 then array['sweep'] else array[]::text[] end,
         now() - make_interval(secs => ${RUNS} - i), now() - make_interval(secs => ${RUNS} - i), now()
  from generate_series(1, ${RUNS}) i`);
for (let m = 0; m < METRICS; m++) {
  const name = m === 0 ? "reward/mean" : m === 1 ? "train/tokens" : `bench/series_${m}`;
  await db.execute(sql`
    insert into metric_points (run_id, name, step, value)
    select 'run_bench' || i, ${name}, s, sin(i * 0.37 + s * 0.01) + i * 0.0001
    from generate_series(1, ${RUNS}) i, generate_series(1, ${STEPS}) s`);
}
await db.execute(sql`analyze`);
const setupSeconds = (performance.now() - started) / 1000;

async function timed(label: string, call: () => Promise<unknown>) {
  const times: number[] = [];
  for (let t = 0; t < TRIALS; t++) {
    const t0 = performance.now();
    await call();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { label, median: times[Math.floor(times.length / 2)]!, max: times.at(-1)! };
}

const metricColumns = ["metric:max:reward/mean", "metric:last:bench/series_5", "config:algorithm.learningRate"];
const results = [
  await timed("default view, 100 rows", () => caller.runs.table({ projectId })),
  await timed("sorted by a metric's max, 2 metric + 1 config column", () =>
    caller.runs.table({ projectId, columns: ["status", "steps", "tokens", ...metricColumns], sort: { column: "metric:max:reward/mean", order: "desc" } }),
  ),
  await timed("grouped by learning rate, a tag and a condition, 1,000 rows", () =>
    caller.runs.table({
      projectId,
      columns: ["status", "steps", "tokens", ...metricColumns],
      sort: { column: "metric:max:reward/mean", order: "desc" },
      groupBy: "algorithm.learningRate",
      where: [{ column: "metric:last:bench/series_5", op: ">", value: "0" }],
      limit: 1000,
    }),
  ),
  await timed("pickers' choices", () => caller.runs.tableChoices({ projectId })),
];
console.log(`${RUNS} runs, ${RUNS * METRICS * STEPS} points (set up in ${setupSeconds.toFixed(1)} s), ${TRIALS} trials`);
console.log(
  formatTable(
    ["query", "median ms", "slowest ms"],
    results.map((r) => [r.label, r.median.toFixed(1), r.max.toFixed(1)]),
  ),
);
console.log(
  JSON.stringify({
    runs: RUNS,
    points: RUNS * METRICS * STEPS,
    default_ms: Math.round(results[0]!.median),
    sorted_by_metric_ms: Math.round(results[1]!.median),
    grouped_filtered_ms: Math.round(results[2]!.median),
    choices_ms: Math.round(results[3]!.median),
  }),
);
if (options["database-url"]) await db.execute(sql`delete from projects where id = ${projectId}`);
await handle.close();
