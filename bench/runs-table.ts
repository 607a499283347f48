/**
 * `npx tsx bench/runs-table.ts`: the runs table on a project of 1,000 runs, each with `--metrics` series of `--steps`
 * points (default 10 × 200: 2,000,000 points), written into a fresh embedded database.
 * - runs.table through the API's caller: the default view, a sort by a metric's best value with two metric and one
 *   config column, the same grouped by a config field with a tag and a condition (all 1,000 rows), and the pickers'
 *   choices;
 * - with `--browser`, the path users take: the built workbench (`tinkerlab start`) on that database, and Chromium
 *   opening /runs with all 1,000 rows on one page, sorted by a metric and grouped: milliseconds from the navigation
 *   to a table that counts its 1,000 rows, shows the first, and whose Columns button answers a click (hydrated).
 *   The table draws the rows near the screen (components/runs/row-window.ts); scrolling to the end shows the last.
 * `--data-dir DIR` keeps the database there and reuses it next time. Prints a table (median and slowest of
 * `--trials`), then one JSON line:
 *
 *   {"runs":1000,"points":2000000,"default_ms":…,"sorted_by_metric_ms":…,"grouped_filtered_ms":…,"choices_ms":…,"runs_table_1000_ms":…}
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { buildIfStale } from "../bin/build-if-stale.mjs";
import { createProject } from "../server/auth";
import { LOCAL_USER, openDatabase } from "../server/db";
import { launchBrowser, startServer } from "../test/e2e/support/server";
import { callerFor } from "../test/integration/support/database";
import { formatTable } from "./lib/measure";

const { values: options } = parseArgs({
  options: {
    runs: { type: "string", default: "1000" },
    metrics: { type: "string", default: "10" },
    steps: { type: "string", default: "200" },
    trials: { type: "string", default: "5" },
    browser: { type: "boolean", default: false },
    "data-dir": { type: "string" },
  },
});
const RUNS = Number(options.runs);
const METRICS = Number(options.metrics);
const STEPS = Number(options.steps);
const TRIALS = Number(options.trials);

// `--data-dir` keeps the database for the next time (its setup takes minutes); otherwise a temporary one.
const dataDir = options["data-dir"] ? path.resolve(options["data-dir"]) : fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bench-runs-table-"));
const reused = fs.existsSync(path.join(dataDir, "project-id"));
const handle = await openDatabase({ pgliteDir: path.join(dataDir, "db") });
const db = handle.db;
const caller = callerFor(handle);
const started = performance.now();
const projectId = reused ? fs.readFileSync(path.join(dataDir, "project-id"), "utf8") : await populate();
const setupSeconds = (performance.now() - started) / 1000;

async function populate(): Promise<string> {
  const projectId = (await createProject(db, { name: "bench", ownerId: LOCAL_USER.id })).id;
  const experiment = await caller.experiments.create({
    projectId,
    name: "bench",
    config: { name: "bench", environment: "arithmetic", agent: { base: "arithmetic-base" } },
  });
  const config = (await caller.experiments.version({ id: experiment.id, version: 1 })).config;

  // The runs and their points, written in bulk by SQL: one of four learning rates each, a seed each, every third tagged.
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
  fs.writeFileSync(path.join(dataDir, "project-id"), projectId);
  return projectId;
}

type Timing = { label: string; median: number; max: number };
async function timed(label: string, call: () => Promise<unknown>): Promise<Timing> {
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
  await timed("runs.table: default view, 100 rows", () => caller.runs.table({ projectId })),
  await timed("runs.table: sorted by a metric's max, 2 metric + 1 config column", () =>
    caller.runs.table({ projectId, columns: ["status", "steps", "tokens", ...metricColumns], sort: { column: "metric:max:reward/mean", order: "desc" } }),
  ),
  await timed("runs.table: grouped, a tag and a condition, 1,000 rows", () =>
    caller.runs.table({
      projectId,
      columns: ["status", "steps", "tokens", ...metricColumns],
      sort: { column: "metric:max:reward/mean", order: "desc" },
      groupBy: "algorithm.learningRate",
      where: [{ column: "metric:last:bench/series_5", op: ">", value: "-2" }],
      limit: 1000,
    }),
  ),
  await timed("runs.tableChoices", () => caller.runs.tableChoices({ projectId })),
];
await handle.close();

let pageMs: number | null = null;
if (options.browser) {
  const root = path.resolve(import.meta.dirname, "..");
  buildIfStale(root);
  const server = await startServer({ PGLITE_DATA_DIR: path.join(dataDir, "db"), TINKERLAB_LOCAL_WORKERS: "0", TINKERLAB_EXAMPLES: "off" });
  const browser = await launchBrowser();
  try {
    const query = `project=${projectId}&c=status&c=steps&c=tokens&c=${metricColumns.join("&c=")}&sort=metric:max:reward/mean&order=desc&group=algorithm.learningRate&size=1000`;
    const page = await browser.newPage();
    const open = async () => {
      const t0 = performance.now();
      await page.goto(`${server.url}/runs?${query}`, { waitUntil: "commit" });
      // A page of 1,000 rows draws those near the screen (components/runs/row-window.ts): its first row, and the
      // footer counting all 1,000 on the page.
      await page.locator('table[aria-label="Runs"] tbody tr[data-run]').first().waitFor({ state: "attached", timeout: 60_000 });
      await page.getByText(`1–${RUNS} of ${RUNS.toLocaleString("en-US")} runs`).waitFor({ timeout: 60_000 });
      // Interactive: the Columns button (the page's one button with aria-expanded) opens its picker; a click before
      // hydration does nothing. Found by CSS: a role query would walk the accessibility of 1,000 rows, for seconds.
      const button = page.locator("button[aria-expanded]");
      while ((await button.getAttribute("aria-expanded")) !== "true") await button.click();
      return performance.now() - t0;
    };
    await open(); // the first render of the route, as a server's warm-up would do it
    // Every row is there to scroll to (not timed): the page's end draws the last rows.
    await page.keyboard.press("Escape");
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await page.waitForFunction(() => !document.querySelector('table[aria-label="Runs"] tbody tr[data-spacer]:last-child'), null, { timeout: 10_000 });
    const opened = await timed("/runs in Chromium: 1,000 rows, grouped, hydrated", open);
    results.push(opened);
    pageMs = opened.median;
  } finally {
    await browser.close();
    await server.stop();
  }
}
if (!options["data-dir"]) fs.rmSync(dataDir, { recursive: true, force: true });

console.log(
  `${RUNS} runs, ${RUNS * METRICS * STEPS} points (${reused ? "reused" : `set up in ${setupSeconds.toFixed(1)} s`}), ${TRIALS} trials, median and slowest`,
);
console.log(
  formatTable(
    ["what", "median ms", "slowest ms"],
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
    ...(pageMs !== null ? { runs_table_1000_ms: Math.round(pageMs) } : {}),
  }),
);
