/**
 * What the compare view reads of several runs at once: their metric series for a set of panels in one query, and the
 * source files of the experiment versions they ran.
 */
import { eq, inArray, sql } from "drizzle-orm";
import { downsample } from "@/lib/series";
import { type Database, experiments, experimentVersions, metricPoints, runs } from "../db";

/** The metric whose per-step values add up to the tokens a run has trained on: the compare view's tokens axis. */
export const TOKENS_METRIC = "train/tokens";

/** One series as columns: each point's step and value, and when asked for, seconds since the run's first metric point. */
export type CompareSeries = { steps: number[]; values: number[]; seconds?: number[]; count: number };

export type CompareRunSeries = {
  runId: string;
  /** Every metric name the run has, for the panels' pickers. */
  names: string[];
  /** The series asked for that the run has, by name. */
  series: Record<string, CompareSeries>;
  /** The tokens trained on up to and including each step (a running sum of `train/tokens`), when asked for and recorded. */
  tokens: { steps: number[]; values: number[] } | null;
};

/** A list of values as SQL parameters, for `in (…)`. */
const parameters = (values: string[]) =>
  sql.join(
    values.map((value) => sql`${value}`),
    sql`, `,
  );

/**
 * Every metric name of each run, found by stepping through the (run, name, step) index one name at a time rather
 * than reading every point: a run of 10 series of 10,000 points costs 10 index probes, not 100,000 rows.
 */
async function metricNamesOf(db: Database, runIds: string[]): Promise<{ runId: string; name: string }[]> {
  const result = await db.execute(sql`
    with recursive names(run_id, name) as (
      select r.id, (select min(m.name) from ${metricPoints} m where m.run_id = r.id) from ${runs} r where r.id in (${parameters(runIds)})
      union all
      select n.run_id, (select min(m.name) from ${metricPoints} m where m.run_id = n.run_id and m.name > n.name) from names n where n.name is not null
    )
    select run_id, name from names where name is not null order by run_id, name`);
  return (result as unknown as { rows: { run_id: string; name: string }[] }).rows.map((row) => ({ runId: row.run_id, name: row.name }));
}

/**
 * When each run's first metric point was written (seconds since the epoch), which its wall time counts from, as on
 * the run page: one index probe per run (DISTINCT ON read every point of the runs, a hundred times slower).
 */
async function startsOf(db: Database, runIds: string[]): Promise<{ run_id: string; start: number }[]> {
  const result = await db.execute(sql`
    select r.id as run_id, (select date_part('epoch', m.wall_time) from ${metricPoints} m where m.run_id = r.id order by m.seq limit 1) as start
    from ${runs} r where r.id in (${parameters(runIds)})`);
  return (result as unknown as { rows: { run_id: string; start: number | null }[] }).rows.flatMap((row) =>
    row.start === null ? [] : [{ run_id: row.run_id, start: row.start }],
  );
}

type SeriesRow = { run_id: string; name: string; steps: number[]; values: number[]; seconds?: number[] | null };

/**
 * Each named series of each run as columns, one row per series (the points aggregated in order by step): a tenth of
 * the time of one row per point on the embedded database, which passes every row through its wire format. For the
 * series named in `timed`, each point's wall time in seconds since the epoch.
 */
async function seriesRows(db: Database, runIds: string[], names: string[], timed: string[]): Promise<SeriesRow[]> {
  if (names.length === 0) return [];
  const result = await db.execute(sql`
    select run_id, name, array_agg(step order by step) as steps, array_agg(value order by step) as values
      ${timed.length ? sql`, (array_agg(date_part('epoch', wall_time) order by step) filter (where name in (${parameters(timed)}))) as seconds` : sql``}
    from ${metricPoints}
    where run_id in (${parameters(runIds)}) and name in (${parameters(names)})
    group by run_id, name`);
  return (result as unknown as { rows: SeriesRow[] }).rows;
}

/** At most `max` of a series' points (a min/max downsample by value, lib/series), as the indices kept. */
function keptIndices(steps: number[], values: number[], max: number): number[] {
  return downsample(
    steps.map((step, i) => ({ step, value: values[i]!, i })),
    max,
  ).map((point) => point.i);
}

/** Seconds to the millisecond, as wall times are kept: a shorter number to send than a float's seventeen digits. */
const toMs = (seconds: number) => Math.round(seconds * 1000) / 1000;

/**
 * A value to seven significant digits (a float32's precision, which is what a training step computes its metrics
 * in; a chart and its hover show four): half the characters of a float64's seventeen in the JSON sent, which the
 * compare view's page carries in its HTML for every point of every panel.
 */
const sent = (value: number) => (Number.isFinite(value) ? Number(value.toPrecision(7)) : value);

/**
 * The named series of several runs, read in one query: each at full resolution up to `maxPoints` points, beyond that
 * as a min/max downsample (`count` is the true number), values to seven significant digits. With `time`, each point's seconds since its run's first
 * metric point, to the millisecond (for a wall-time axis): `true` for every named series, or a list of the series
 * that a wall-time axis draws (the others' seconds would be sent for nothing); with `tokens`, each run's running sum
 * of `train/tokens`, summed over every point before it is downsampled.
 */
export async function compareSeries(
  db: Database,
  input: { runIds: string[]; metrics: string[]; time: boolean | string[]; tokens: boolean; maxPoints: number },
): Promise<{ runs: CompareRunSeries[] }> {
  const runIds = [...new Set(input.runIds)];
  const wanted = [...new Set(input.tokens ? [...input.metrics, TOKENS_METRIC] : input.metrics)];
  const timed = input.time === true ? input.metrics : input.time === false ? [] : input.time.filter((name) => input.metrics.includes(name));
  const [rows, firsts, names] = await Promise.all([seriesRows(db, runIds, wanted, timed), timed.length ? startsOf(db, runIds) : [], metricNamesOf(db, runIds)]);
  const origin = new Map(firsts.map((f) => [f.run_id, f.start]));
  const byRun = new Map<string, Map<string, SeriesRow>>();
  for (const row of rows) {
    let byName = byRun.get(row.run_id);
    if (!byName) byRun.set(row.run_id, (byName = new Map()));
    byName.set(row.name, row);
  }
  return {
    runs: runIds.map((runId) => {
      const byName = byRun.get(runId) ?? new Map<string, SeriesRow>();
      const start = origin.get(runId) ?? 0;
      const series: Record<string, CompareSeries> = {};
      for (const name of input.metrics) {
        const row = byName.get(name);
        if (!row) continue;
        const kept = keptIndices(row.steps, row.values, input.maxPoints);
        const seconds = row.seconds;
        series[name] = {
          steps: kept.map((i) => row.steps[i]!),
          values: kept.map((i) => sent(row.values[i]!)),
          ...(seconds ? { seconds: kept.map((i) => toMs(seconds[i]! - start)) } : {}),
          count: row.steps.length,
        };
      }
      let tokens: CompareRunSeries["tokens"] = null;
      const perStep = input.tokens ? byName.get(TOKENS_METRIC) : undefined;
      if (perStep) {
        let total = 0;
        const totals = perStep.values.map((value) => (total += value));
        const kept = keptIndices(perStep.steps, totals, input.maxPoints);
        tokens = { steps: kept.map((i) => perStep.steps[i]!), values: kept.map((i) => sent(totals[i]!)) };
      }
      return { runId, names: names.filter((n) => n.runId === runId).map((n) => n.name), series, tokens };
    }),
  };
}

/**
 * The source files of each run's experiment version, each version once: what the compare view diffs file by file.
 * Runs of one version share its entry.
 */
export async function sourcesOfRuns(db: Database, runIds: string[]) {
  const rows = await db
    .select({
      runId: runs.id,
      versionId: experimentVersions.id,
      version: experimentVersions.version,
      experimentId: experiments.id,
      experimentName: experiments.name,
      files: experimentVersions.files,
    })
    .from(runs)
    .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(inArray(runs.id, runIds));
  const byRun = new Map(rows.map((row) => [row.runId, row]));
  const versions: Record<string, { experimentId: string; experimentName: string; version: number; files: Record<string, string> }> = {};
  for (const row of rows) {
    versions[row.versionId] ??= { experimentId: row.experimentId, experimentName: row.experimentName, version: row.version, files: row.files };
  }
  return { runs: runIds.map((runId) => ({ runId, versionId: byRun.get(runId)?.versionId ?? null })), versions };
}
