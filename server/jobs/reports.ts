/**
 * A worker's reports: metric points, rollouts and log lines of a run, and the run's step, stored as they come. The
 * `worker` tRPC router calls `storeReport` for workers that reach the server over HTTP; a `tinkerlab worker`
 * started with DATABASE_URL calls it directly.
 */
import { sql } from "drizzle-orm";
import { type Database, jobs, metricPoints, rollouts, runLogs, runs, type RunWarning } from "../db";
import { WorkerConflictError } from "./errors";
import { requireJobOf } from "./lifecycle";

export type MetricPointInput = { step: number; name: string; value: number; wallTime?: Date };
export type RolloutInput = {
  step: number;
  split: "train" | "eval";
  groupIndex: number;
  sampleIndex: number;
  prompt: string;
  turns: {
    observation: string;
    action: string;
    reward?: number;
    advantage?: number | null;
    render?: string;
    legalActions?: { actions: string[] } | { pattern: string };
    info?: Record<string, unknown>;
  }[];
  rewards: Record<string, number>;
  totalReward: number;
  advantage: number | null;
  tokens: number[] | null;
  tokenLogprobs: number[] | null;
};
export type ReportInput = {
  workerId: string;
  jobId: string;
  step?: number;
  metrics?: MetricPointInput[];
  rollouts?: RolloutInput[];
  logs?: { level: "info" | "warn" | "error"; message: string }[];
  /** Health warnings to add to the run's (lib/rl/health.ts). */
  warnings?: RunWarning[];
};

/**
 * Stores metric points, rollouts and log lines, and the run's step, in one statement; a point or rollout sent twice
 * (after a retry) is stored once. Returns the run.
 *
 * One statement rather than a transaction of several: the rows go as JSON, one parameter per table, which the
 * database takes apart (jsonb_to_recordset), and the check that the job is still this worker's is part of it. Each
 * round trip to the embedded database costs the web server about half a millisecond of CPU besides the work, and a
 * training step's report (26 points, 16 rollouts) took six of them, plus one bound parameter per column per row.
 */
export async function storeReport(db: Database, input: ReportInput): Promise<string> {
  const now = new Date().toISOString();
  const metrics = (input.metrics ?? []).map((m) => ({
    step: m.step,
    name: storable(m.name),
    value: float(m.value),
    wallTime: m.wallTime?.toISOString() ?? now,
  }));
  const rolloutRows = (input.rollouts ?? []).map((r) => {
    const clean = storable(r);
    return { ...clean, totalReward: float(clean.totalReward), advantage: clean.advantage === null ? null : float(clean.advantage) };
  });
  const logs = (input.logs ?? []).map((l) => storable(l));
  const warnings = (input.warnings ?? []).map((w) => storable(w));
  // Data-modifying parts of a WITH run once, to completion, whether or not the final select reads them.
  const result = await db.execute(sql`
    with job as (
      select run_id from ${jobs} where id = ${input.jobId} and worker_id = ${input.workerId} and run_id is not null
    ), points as (
      insert into ${metricPoints} (run_id, step, name, value, wall_time)
      select job.run_id, r.step, r.name, r.value, r."wallTime"
      from job, jsonb_to_recordset(${JSON.stringify(metrics)}::jsonb) as r(step integer, name text, value double precision, "wallTime" timestamptz)
      on conflict do nothing
    ), samples as (
      insert into ${rollouts} (run_id, step, split, group_index, sample_index, prompt, turns, rewards, total_reward, advantage, tokens, token_logprobs)
      select job.run_id, r.step, r.split, r."groupIndex", r."sampleIndex", r.prompt, r.turns, r.rewards, r."totalReward", r.advantage,
             nullif(r.tokens, 'null'), nullif(r."tokenLogprobs", 'null')
      from job, jsonb_to_recordset(${JSON.stringify(rolloutRows)}::jsonb)
        as r(step integer, split text, "groupIndex" integer, "sampleIndex" integer, prompt text, turns jsonb, rewards jsonb,
             "totalReward" double precision, advantage double precision, tokens jsonb, "tokenLogprobs" jsonb)
      on conflict do nothing
    ), lines as (
      insert into ${runLogs} (run_id, level, message)
      select job.run_id, r.level, r.message from job, jsonb_to_recordset(${JSON.stringify(logs)}::jsonb) as r(level text, message text)
    ), progress as (
      update ${runs} set step = coalesce(${input.step ?? null}::integer, ${runs.step}),
        -- each kind of warning once per run, though a resumed job's health checks start afresh and raise it again
        warnings = ${runs.warnings} || coalesce((
          select jsonb_agg(w) from jsonb_array_elements(${JSON.stringify(warnings)}::jsonb) as w
          where not exists (select 1 from jsonb_array_elements(${runs.warnings}) as had where had->>'code' = w->>'code')
        ), '[]'::jsonb)
      from job where ${runs.id} = job.run_id and (${input.step ?? null}::integer is not null or ${warnings.length} > 0)
    )
    select run_id from job`);
  const [row] = (result as unknown as { rows: { run_id: string }[] }).rows;
  if (!row) {
    await requireJobOf(db, input.jobId, input.workerId); // says why: no such job, or another worker's now
    throw new WorkerConflictError(`Job '${input.jobId}' has no run to report to.`, "CONFLICT");
  }
  return row.run_id;
}

/** A float column's value in JSON: NaN and ±Infinity as the strings PostgreSQL reads for them (JSON has no such numbers). */
const float = (value: number): number | string => (Number.isFinite(value) ? value : String(value));

/**
 * PostgreSQL text and jsonb cannot hold U+0000, nor jsonb a lone UTF-16 surrogate, and a policy sampling raw bytes
 * can produce them: each becomes U+FFFD (the replacement character) so the rollout is stored, visibly, instead of
 * failing the whole report.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is exactly what PostgreSQL cannot store
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function storable<T>(value: T): T {
  if (typeof value === "string") return value.replace(UNSTORABLE, "\uFFFD") as T;
  if (Array.isArray(value)) return value.map(storable) as T;
  if (value && typeof value === "object" && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storable(k), storable(v)])) as T;
  }
  return value;
}
