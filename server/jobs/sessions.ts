/**
 * Remote training sessions: a script's own training loop, calling the training primitives (forward,
 * forwardBackward, optimStep, sample, saveState) of a model that lives on a worker. A session is a run of job kind
 * "session", launched, placed and finished like any job (it holds its place and memory until it ends), under its
 * project's "Remote sessions" experiment. Its calls are rows of `session_calls`, keyed by the client's own id and
 * run by the worker one at a time in the order they came: a call sent again after a lost connection finds its row
 * (and its answer), so no call is applied twice. A session without a call for `leaseSeconds` is saved and ended by
 * its worker, which frees its place.
 *
 * Waiting: the web server wakes a waiting client when the answer reaches it (a worker that joined over HTTP
 * answers through it), and a worker's long poll when a call comes in; a worker on the database, or a second web
 * server, is seen at the next poll (every `POLL_MS`).
 */
import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { type JobState, terminalJobStates } from "@/lib/lifecycle";
import { defineExperiment } from "@/lib/sdk/experiment";
import { type Database, experiments, experimentVersions, jobs, newId, runs, sessionCalls } from "../db";
import { RunStateError } from "./errors";
import { launchRun } from "./lifecycle";
import type { SubmitJob } from "./scheduling";

/** The primitives a session answers, and `close`, which saves the session and ends it. */
export const sessionMethods = ["forward", "forwardBackward", "optimStep", "sample", "saveState", "close"] as const;
export type SessionMethod = (typeof sessionMethods)[number];

/** How long a session may go without a call before its worker saves and ends it, by default and at most. */
export const DEFAULT_LEASE_SECONDS = 300;
export const MAX_LEASE_SECONDS = 24 * 3600;
/** How often a waiting side looks at the database when nothing woke it. */
const POLL_MS = 200;

/** The template name of each project's experiment that holds its remote sessions' runs. */
export const SESSIONS_TEMPLATE = "remote-sessions";

export type SessionCallRow = { id: string; state: "queued" | "running" | "done" | "failed"; result: unknown; error: string | null; method: string };

export type OpenSession = {
  projectId: string;
  userId: string;
  base: string;
  lora: { rank: number; alpha?: number } | null;
  valueHead: boolean;
  seed: number;
  leaseSeconds: number;
  name?: string;
  /** The base's shape, for the job's footprint (the router resolves it). */
  shape: { parameters: number; dModel: number; nLayers: number; contextLength: number };
};

/**
 * In-process wake-ups: a new call for a run, an answer for a call. An answer's waiter is handed the answer
 * itself (the row as the database now holds it), so that the hot path reads nothing back.
 */
const waiters = new Map<string, Set<(payload: unknown) => void>>();

function wake(key: string, payload: unknown = null) {
  const set = waiters.get(key);
  if (!set) return;
  waiters.delete(key);
  for (const resolve of set) resolve(payload);
}

/** Resolves with the wake's payload when `key` is woken, or null after `ms` or when `signal` aborts. */
function waitFor(key: string, ms: number, signal?: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    let set = waiters.get(key);
    if (!set) waiters.set(key, (set = new Set()));
    const done = (payload: unknown = null) => {
      clearTimeout(timer);
      set!.delete(done);
      signal?.removeEventListener("abort", onAbort);
      resolve(payload);
    };
    const onAbort = () => done(null);
    const timer = setTimeout(onAbort, ms);
    set.add(done);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

type CallRow = NonNullable<Awaited<ReturnType<typeof readCall>>>;

/** Opens a session: its run (under the project's "Remote sessions" experiment) and its job, queued for a place. */
export async function openSession(db: Database, input: OpenSession): Promise<{ sessionId: string; jobId: string }> {
  const experimentId = await sessionsExperiment(db, input.projectId, input.userId);
  const [version] = await db
    .select({ id: experimentVersions.id })
    .from(experimentVersions)
    .where(eq(experimentVersions.experimentId, experimentId))
    .orderBy(asc(experimentVersions.version))
    .limit(1);
  const config = {
    ...defineExperiment({
      name: input.name ?? "remote session",
      environment: "remote-session",
      agent: {
        base: input.base,
        training: input.lora
          ? { mode: "lora", rank: input.lora.rank, ...(input.lora.alpha !== undefined ? { alpha: input.lora.alpha } : {}) }
          : { mode: "full" },
        valueHead: input.valueHead,
      },
      seed: input.seed,
    } as never),
    session: { leaseSeconds: input.leaseSeconds },
  };
  const stamp = new Date().toISOString().slice(0, 16).replace(/[-:]/g, "").replace("T", "-");
  const resources: SubmitJob["resources"] = {
    kind: "session",
    mode: input.lora ? "lora" : "full",
    baseModel: input.base,
    model: { name: input.base, parameters: input.shape.parameters, dModel: input.shape.dModel, nLayers: input.shape.nLayers },
    batchSize: 64,
    contextLength: input.shape.contextLength,
    loraRank: input.lora?.rank,
    computeSlots: 1,
  };
  const { runId, jobId } = await launchRun(
    db,
    {
      experimentId,
      projectId: input.projectId,
      experimentVersionId: version!.id,
      createdBy: input.userId,
      name: `${input.name ?? "session"}-${input.base}-${stamp}`,
      config: config as unknown as Record<string, unknown>,
      seed: input.seed,
      totalSteps: 0,
    },
    { priority: 0, resources },
  );
  return { sessionId: runId, jobId };
}

/** The project's experiment for remote sessions, made on first use. */
async function sessionsExperiment(db: Database, projectId: string, userId: string): Promise<string> {
  const [existing] = await db
    .select({ id: experiments.id })
    .from(experiments)
    .where(and(eq(experiments.projectId, projectId), eq(experiments.template, SESSIONS_TEMPLATE)))
    .limit(1);
  if (existing) return existing.id;
  const id = newId("exp");
  await db.transaction(async (tx) => {
    await tx.insert(experiments).values({
      id,
      projectId,
      ownerId: userId,
      name: "Remote sessions",
      description: "Training sessions opened by scripts (tinkerlab/client): each run is one session and its calls.",
      template: SESSIONS_TEMPLATE,
      latestVersion: 1,
    });
    await tx.insert(experimentVersions).values({
      id: newId("ver"),
      experimentId: id,
      version: 1,
      files: {},
      config: { name: "Remote sessions", environment: "remote-session" },
      message: "made for remote sessions",
    });
  });
  return id;
}

/** The session's job state, or a NOT_FOUND when `sessionId` is no session. */
async function sessionJob(db: Database, sessionId: string): Promise<{ status: JobState; reason: string | null }> {
  const [row] = await db
    .select({ status: jobs.status, kind: jobs.kind, reason: runs.reason })
    .from(jobs)
    .innerJoin(runs, eq(runs.id, jobs.runId))
    .where(eq(jobs.runId, sessionId))
    .orderBy(sql`${jobs.submittedAt} desc`)
    .limit(1);
  if (row?.kind !== "session") throw new RunStateError(`No session '${sessionId}'; a session's id is the run id training.create answered`, "NOT_FOUND");
  return { status: row.status, reason: row.reason };
}

/**
 * Submits a call (or finds it again, by its id) and waits up to `waitMs` for its answer. A call to a session that
 * has ended is refused with the reason it ended, unless it was answered before.
 */
export async function callSession(
  db: Database,
  input: { sessionId: string; callId: string; method: SessionMethod; args: unknown; waitMs: number },
  signal?: AbortSignal,
): Promise<SessionCallRow> {
  // A new call is inserted only while its session's job has not ended: one statement for the common case.
  const args = JSON.stringify(input.args ?? null);
  const inserted = await db.execute(sql`
    insert into ${sessionCalls} (id, run_id, method, args)
    select ${input.callId}, ${input.sessionId}, ${input.method}, ${args}
    where exists (
      select 1 from ${jobs} where ${jobs.runId} = ${input.sessionId} and ${jobs.kind} = 'session'
        and ${jobs.status} not in ('completed', 'failed', 'cancelled'))
    on conflict (id) do nothing
    returning id`);
  let row: CallRow | undefined;
  if ((inserted as unknown as { rows: unknown[] }).rows.length > 0) {
    wake(`calls:${input.sessionId}`);
    row = { id: input.callId, runId: input.sessionId, state: "queued", result: null, error: null, method: input.method };
  } else {
    row = await readCall(db, input.callId);
    if (!row) {
      const job = await sessionJob(db, input.sessionId);
      throw new RunStateError(`session ${input.sessionId} has ended (${job.status}${job.reason ? `: ${job.reason}` : ""}); open a new one`, "CONFLICT");
    }
    if (row.runId !== input.sessionId) throw new RunStateError(`call id '${input.callId}' belongs to another session; give each call a fresh id`, "CONFLICT");
    if (row.method !== input.method) throw new RunStateError(`call id '${input.callId}' was a ${row.method} call; give each call a fresh id`, "CONFLICT");
  }
  const until = Date.now() + input.waitMs;
  while (row!.state === "queued" || row!.state === "running") {
    const left = until - Date.now();
    if (left <= 0 || signal?.aborted) break;
    const answered = (await waitFor(`answer:${input.callId}`, Math.min(left, POLL_MS), signal)) as CallRow | null;
    row = answered ?? (await readCall(db, input.callId));
    if (row!.state === "queued" || row!.state === "running") {
      // The session may have ended with this call unanswered (its worker lost, the session cancelled).
      const job = await sessionJob(db, input.sessionId);
      if (terminalJobStates.has(job.status)) {
        throw new RunStateError(
          `session ${input.sessionId} ended (${job.status}${job.reason ? `: ${job.reason}` : ""}) before answering this ${input.method} call`,
          "CONFLICT",
        );
      }
    }
  }
  const { runId: _, result, ...answer } = row!;
  return { ...answer, result: result === null ? null : (JSON.parse(result) as unknown) };
}

/** Session jobs found held, by job and worker: a job's worker and run do not change while it runs. */
const held = new Map<string, string>();

/** The session (run) of a session job the worker holds; refused for anyone else's. */
async function heldSession(db: Database, workerId: string, jobId: string): Promise<string> {
  const known = held.get(`${jobId}/${workerId}`);
  if (known) return known;
  const [job] = await db.select({ runId: jobs.runId, kind: jobs.kind, workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, jobId));
  if (job?.kind !== "session" || job.workerId !== workerId || !job.runId) {
    throw new RunStateError(`worker ${workerId} holds no session job '${jobId}'`, "CONFLICT");
  }
  if (held.size > 10_000) held.clear();
  held.set(`${jobId}/${workerId}`, job.runId);
  return job.runId;
}

/** What a call's row answers with: read back, or returned by the worker's answer. */
const callColumns = {
  id: sessionCalls.id,
  runId: sessionCalls.runId,
  state: sessionCalls.state,
  result: sessionCalls.result,
  error: sessionCalls.error,
  method: sessionCalls.method,
};

/** A call's row by its id (undefined: none). */
async function readCall(db: Database, callId: string) {
  const [row] = await db.select(callColumns).from(sessionCalls).where(eq(sessionCalls.id, callId));
  return row;
}

/** The worker's side: the session's next call in order (marked running), waiting up to `waitMs` for one. */
export async function takeSessionCall(
  db: Database,
  input: { workerId: string; jobId: string; waitMs: number },
): Promise<{ id: string; method: SessionMethod; args: unknown } | null> {
  const sessionId = await heldSession(db, input.workerId, input.jobId);
  const until = Date.now() + input.waitMs;
  for (;;) {
    // A call left running (its worker stopped mid-call and the session was placed again) is run again: its answer
    // never reached anyone. Otherwise the oldest queued call.
    const [next] = await db
      .update(sessionCalls)
      .set({ state: "running" })
      .where(
        eq(
          sessionCalls.id,
          sql`(select ${sessionCalls.id} from ${sessionCalls} where ${sessionCalls.runId} = ${sessionId} and ${inArray(sessionCalls.state, ["queued", "running"])} order by ${sessionCalls.seq} limit 1)`,
        ),
      )
      .returning({ id: sessionCalls.id, method: sessionCalls.method, args: sessionCalls.args });
    if (next) return { id: next.id, method: next.method as SessionMethod, args: JSON.parse(next.args) as unknown };
    const left = until - Date.now();
    if (left <= 0) return null;
    await waitFor(`calls:${sessionId}`, Math.min(left, POLL_MS));
  }
}

/** The worker's answer to a call: its result, or the error the call raised. */
export async function answerSessionCall(db: Database, input: { workerId: string; jobId: string; callId: string; result?: unknown; error?: string | null }) {
  const sessionId = await heldSession(db, input.workerId, input.jobId);
  const [row] = await db
    .update(sessionCalls)
    .set(
      input.error
        ? { state: "failed", error: input.error, result: null, answeredAt: new Date() }
        : { state: "done", result: JSON.stringify(input.result ?? null), error: null, answeredAt: new Date() },
    )
    .where(and(eq(sessionCalls.id, input.callId), eq(sessionCalls.runId, sessionId)))
    .returning(callColumns);
  if (row) wake(`answer:${input.callId}`, row);
}
