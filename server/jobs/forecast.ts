/**
 * Estimated starts of the live queue. Each job's work left comes from, in order: its run's own pace (seconds per
 * step over its last 500 metric points, those of the last 15 minutes) times the steps it has left; the job's `estimatedSeconds`;
 * the median pace of the runs measured just now (or, failing that, of recently completed jobs) times its steps
 * left. Then `forecastStarts` runs the policy forward in the simulator.
 */
import { and, desc, eq, inArray, isNotNull, sql } from "drizzle-orm";
import { type Database, jobs, metricPoints, runs } from "../db";
import { forecastStarts, type SchedulingPolicy } from "../scheduler";
import { clusterState } from "./scheduling";

export type StartEstimate = { startsAt: Date | null; workLeftSeconds: number | null };

export async function estimateQueuedStarts(db: Database, policy: SchedulingPolicy, now = Date.now()): Promise<Map<string, StartEstimate>> {
  const state = await clusterState(db, now);
  const ids = [...state.devices.flatMap((d) => d.jobs.map((j) => j.id)), ...state.queue.map((j) => j.id)];
  if (state.queue.length === 0) return new Map();
  const rows = await db
    .select({
      id: jobs.id,
      runId: jobs.runId,
      status: jobs.status,
      estimatedSeconds: jobs.estimatedSeconds,
      startedAt: jobs.startedAt,
      step: runs.step,
      totalSteps: runs.totalSteps,
    })
    .from(jobs)
    .leftJoin(runs, eq(runs.id, jobs.runId))
    .where(inArray(jobs.id, ids));
  const runIds = rows.flatMap((r) => (r.runId ? [r.runId] : []));
  // Each run's last 500 points (by the (run, seq) index, so a long run costs no more than a short one), those of
  // the last 15 minutes: its recent pace, without the time it spent paused or queued.
  const paceRows = runIds.length
    ? (
        (await db.execute(sql`
          select r.run_id as "runId", min(p.step)::int as first, max(p.step)::int as last,
                 extract(epoch from max(p.wall_time) - min(p.wall_time))::float8 as seconds
          from unnest(array[${sql.join(
            runIds.map((id) => sql`${id}`),
            sql`, `,
          )}]::text[]) as r(run_id)
          cross join lateral (
            select m.step, m.wall_time from ${metricPoints} m where m.run_id = r.run_id order by m.seq desc limit 500
          ) p
          where p.wall_time > ${new Date(now - 15 * 60_000)}
          group by r.run_id`)) as unknown as { rows: { runId: string; first: number; last: number; seconds: number }[] }
      ).rows
    : [];
  const pace = new Map<string, number>();
  for (const row of paceRows) if (row.last > row.first && row.seconds > 0) pace.set(row.runId, row.seconds / (row.last - row.first));
  const typical = median([...pace.values()]) ?? (await completedPace(db));

  const left = new Map<string, number | null>();
  for (const row of rows) {
    const stepsLeft = row.totalSteps !== null ? Math.max(row.totalSteps - (row.step ?? 0), 0) : null;
    const own = row.runId ? pace.get(row.runId) : undefined;
    const elapsed = row.status === "running" && row.startedAt ? (now - row.startedAt.getTime()) / 1000 : 0;
    let estimate: number | null = null;
    if (own !== undefined && stepsLeft !== null) estimate = own * stepsLeft;
    else if (row.estimatedSeconds !== null) estimate = Math.max(row.estimatedSeconds - elapsed, 0);
    else if (typical !== null && stepsLeft !== null) estimate = typical * stepsLeft;
    left.set(row.id, estimate);
  }
  const starts = forecastStarts(state, policy, left);
  return new Map(
    state.queue.map((job) => {
      const at = starts.get(job.id) ?? null;
      return [job.id, { startsAt: at === null ? null : new Date(at * 1000), workLeftSeconds: left.get(job.id) ?? null }];
    }),
  );
}

/** Seconds per step of the last 20 completed jobs' runs, their median; null when none completed. */
async function completedPace(db: Database): Promise<number | null> {
  const done = await db
    .select({ startedAt: jobs.startedAt, finishedAt: jobs.finishedAt, totalSteps: runs.totalSteps })
    .from(jobs)
    .innerJoin(runs, eq(runs.id, jobs.runId))
    .where(and(eq(jobs.status, "completed"), isNotNull(jobs.startedAt), isNotNull(jobs.finishedAt)))
    .orderBy(desc(jobs.finishedAt))
    .limit(20);
  return median(done.flatMap((j) => (j.totalSteps && j.totalSteps > 0 ? [(j.finishedAt!.getTime() - j.startedAt!.getTime()) / 1000 / j.totalSteps] : [])));
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
