/**
 * Remote training sessions: a script's own training loop, calling the training primitives (forward,
 * forwardBackward, optimStep, sample, saveState, loadState, saveWeightsForSampler) of a model that lives on a
 * worker. A session is a run of job kind "session", launched, placed and finished like any job (it holds its place
 * and memory until it ends), under its project's "Remote sessions" experiment. Its calls are rows of
 * `session_calls`, keyed by the client's own id and run by the worker one at a time in the order they came: a call
 * sent again after a lost connection finds its row (and its answer), so no call is applied twice. A session without
 * a call for `leaseSeconds` is saved and ended by its worker, which frees its place.
 *
 * Waiting: the web server wakes a waiting client when the answer reaches it (a worker that joined over HTTP
 * answers through it), and a worker's long poll when a call comes in; a worker on the database, or a second web
 * server, is seen at the next poll (every `POLL_MS`).
 */
import type { SessionMethod } from "@/lib/rl/session-calls";
import { asc, eq, inArray, sql } from "drizzle-orm";
import { type JobState, terminalJobStates } from "@/lib/lifecycle";
import { parseRunConfig } from "@/lib/lifecycle/run-config";
import { type Database, experimentVersions, jobs, runs, sessionCalls } from "../db";
import { RunStateError } from "./errors";
import { launchRun, runNameStamp } from "./lifecycle";
import { projectExperiment } from "./project-experiments";
import type { SubmitJob } from "./scheduling";

/** The primitives a session answers, and `close`, which saves the session and ends it. */
export { type SessionMethod, sessionMethods } from "@/lib/rl/session-calls";

/** How long a session may go without a call before its worker saves and ends it, by default and at most. */
export const DEFAULT_LEASE_SECONDS = 300;
export const MAX_LEASE_SECONDS = 24 * 3600;
/** How often a waiting side looks at the database when nothing woke it. */
const POLL_MS = 200;

/** The template name of each project's experiment that holds its remote sessions' runs. */
const SESSIONS_TEMPLATE = "remote-sessions";

export type SessionCallRow = { id: string; state: "queued" | "running" | "done" | "failed"; result: unknown; error: string | null; method: string };
/** A call's answer with its result as the JSON text stored (null: none yet, or it failed). */
export type SessionCallAnswer = Omit<SessionCallRow, "result"> & { resultJson: string | null };

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
 * itself (the row as the database now holds it), so that the hot path reads nothing back. Process-wide (on
 * globalThis): the web server answers a session's calls and its worker's exchanges itself, past Next.js
 * (server/api/direct.ts), while Next's bundle holds its own copy of this module for the same procedures sent
 * another way (a worker's answer batched with a report); a wake from either must reach a waiter in the other.
 */
const holder = globalThis as typeof globalThis & { __tinkerlabSessionWaiters?: Map<string, Set<(payload: unknown) => void>> };
const waiters = (holder.__tinkerlabSessionWaiters ??= new Map());

function wake(key: string, payload: unknown = null) {
  const set = waiters.get(key);
  if (!set) return;
  waiters.delete(key);
  for (const resolve of set) resolve(payload);
}

/** Listens for the next wake of `key`: `woken` resolves with its payload; `stop` ends the listening. */
function listen(key: string): { woken: Promise<unknown>; stop(): void } {
  let set = waiters.get(key);
  if (!set) waiters.set(key, (set = new Set()));
  let resolve!: (payload: unknown) => void;
  const woken = new Promise<unknown>((done) => (resolve = done));
  set.add(resolve);
  const listening = set;
  return {
    woken,
    stop() {
      listening.delete(resolve);
      if (listening.size === 0 && waiters.get(key) === listening) waiters.delete(key);
    },
  };
}

/** What `woken` resolves with, or null after `ms` or when `signal` aborts. */
function within(woken: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    const done = (payload: unknown) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(payload);
    };
    const onAbort = () => done(null);
    const timer = setTimeout(onAbort, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
    void woken.then(done);
  });
}

type CallRow = NonNullable<Awaited<ReturnType<typeof readCall>>>;

/** Opens a session: its run (under the project's "Remote sessions" experiment) and its job, queued for a place. */
export async function openSession(db: Database, input: OpenSession): Promise<{ sessionId: string; jobId: string }> {
  const experimentId = await projectExperiment(db, input.projectId, input.userId, SESSIONS_EXPERIMENT);
  const [version] = await db
    .select({ id: experimentVersions.id })
    .from(experimentVersions)
    .where(eq(experimentVersions.experimentId, experimentId))
    .orderBy(asc(experimentVersions.version))
    .limit(1);
  const config = parseRunConfig({
    name: input.name ?? "remote session",
    environment: "remote-session",
    agent: {
      base: input.base,
      training: input.lora ? { mode: "lora", rank: input.lora.rank, ...(input.lora.alpha !== undefined ? { alpha: input.lora.alpha } : {}) } : { mode: "full" },
      valueHead: input.valueHead,
    },
    seed: input.seed,
    session: { leaseSeconds: input.leaseSeconds },
  });
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
      name: `${input.name ?? "session"}-${input.base}-${runNameStamp()}`,
      config,
      seed: input.seed,
      totalSteps: 0,
    },
    { priority: 0, resources },
  );
  return { sessionId: runId, jobId };
}

/** The project's experiment for remote sessions, made on first use. */
const SESSIONS_EXPERIMENT = {
  template: SESSIONS_TEMPLATE,
  name: "Remote sessions",
  description: "Training sessions opened by scripts (tinkerlab/client): each run is one session and its calls.",
  environment: "remote-session",
  message: "made for remote sessions",
};

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

/** One call of a session as its client sends it: its own id (a retry sends the same), the primitive, its arguments. */
export type SessionCallInput = { callId: string; method: SessionMethod; argsJson: string };

/** The most calls one request may submit together (`callSessionMany`). */
export const MAX_CALLS_PER_REQUEST = 64;

/**
 * Submits a call (or finds it again, by its id) and waits up to `waitMs` for its answer. A call to a session that
 * has ended is refused with the reason it ended, unless it was answered before.
 */
export async function callSession(
  db: Database,
  input: { sessionId: string; callId: string; method: SessionMethod; args: unknown; waitMs: number },
  signal?: AbortSignal,
): Promise<SessionCallRow> {
  const call = { callId: input.callId, method: input.method, argsJson: JSON.stringify(input.args ?? null) };
  const [{ resultJson, ...answer }] = (await callSessionMany(db, { sessionId: input.sessionId, calls: [call], waitMs: input.waitMs }, signal)) as [
    SessionCallAnswer,
  ];
  return { ...answer, result: resultJson === null ? null : (JSON.parse(resultJson) as unknown) };
}

/**
 * Submits calls in the order given (each after every call submitted before, or found again by its id) and waits up
 * to `waitMs` for their answers, which come in that order too: those not answered by then are returned queued or
 * running, and the same calls sent again wait on. Several calls made together (a step's forward-backward chunks and
 * its optimizer step) so cost the server one request and one statement, and their worker takes them together. A
 * call to a session that has ended is refused with the reason it ended, unless it was answered before.
 *
 * With `after` (a call of the session that the client sent in an earlier request, which may still be on its way:
 * the client does not wait for one request to return before sending the next), the calls are submitted once that
 * call has been; until then (within `waitMs`) they are returned queued, unsubmitted, and the same request sent
 * again waits on. Requests sent one after another so run in the order they were sent, whichever arrives first.
 */
export async function callSessionMany(
  db: Database,
  input: { sessionId: string; calls: SessionCallInput[]; after?: string; waitMs: number },
  signal?: AbortSignal,
): Promise<SessionCallAnswer[]> {
  const { sessionId, calls } = input;
  const after = input.after ?? null;
  if (new Set(calls.map((call) => call.callId)).size !== calls.length) {
    throw new RunStateError("the same call id appears twice in one request; give each call a fresh id", "CONFLICT");
  }
  if (after !== null && calls.some((call) => call.callId === after)) {
    throw new RunStateError(`call '${after}' cannot follow itself: 'after' names a call sent in an earlier request`, "CONFLICT");
  }
  const until = Date.now() + input.waitMs;
  // Every call's answer is listened for from the start, before the worker can see the call: a worker answers the
  // calls it ran together at once, and a wake before its listener would be heard only at the next poll.
  const answers = new Map(calls.map((call) => [call.callId, listen(`answer:${call.callId}`)]));
  try {
    for (;;) {
      // Listening for the predecessor before looking for it: its request may be submitted while this one's runs.
      const predecessor = after === null ? null : listen(`submitted:${after}`);
      try {
        const rows = await submitCalls(db, sessionId, calls, after);
        if (rows) {
          await waitForAnswers(db, sessionId, rows, answers, until, signal);
          return rows.map(({ runId: _, result, ...answer }) => ({ ...answer, resultJson: result }));
        }
        const left = until - Date.now();
        if (left <= 0 || signal?.aborted)
          return calls.map((call) => ({ id: call.callId, state: "queued", resultJson: null, error: null, method: call.method }));
        await within(predecessor!.woken, Math.min(left, POLL_MS), signal);
      } finally {
        predecessor?.stop();
      }
    }
  } finally {
    for (const listening of answers.values()) listening.stop();
  }
}

const unanswered = (row: CallRow) => row.state === "queued" || row.state === "running";

/**
 * Inserts the calls not submitted before, in one statement and in their order (the serial `seq` follows it), while
 * the session's job has not ended, none of the ids is another session's or another method's, and the call they
 * come `after` (if any) has been submitted; returns each call's row, or null while that call has not been.
 */
async function submitCalls(db: Database, sessionId: string, calls: SessionCallInput[], after: string | null): Promise<CallRow[] | null> {
  const values = sql.join(
    calls.map((call, i) => sql`(${call.callId}::text, ${call.method}::text, ${call.argsJson}::text, ${i}::int)`),
    sql`, `,
  );
  // A worker waiting in this process for the session's calls is handed the new ones with the wake, marked running
  // by this statement, so that it takes them without a statement of its own: when it waits, and no older call is
  // unanswered (they would come first).
  const handOff = waiters.has(`calls:${sessionId}`);
  const inserted = await db.execute(sql`
    with given (id, method, args, n) as (values ${values})
    insert into ${sessionCalls} (id, run_id, method, args, state)
    select given.id, ${sessionId}, given.method, given.args,
      case when ${handOff}::boolean and not exists (
        select 1 from ${sessionCalls} older where older.run_id = ${sessionId} and older.state in ('queued', 'running')
      ) then 'running'::session_call_state else 'queued'::session_call_state end
    from given
    where exists (
      select 1 from ${jobs} where ${jobs.runId} = ${sessionId} and ${jobs.kind} = 'session'
        and ${jobs.status} not in ('completed', 'failed', 'cancelled'))
      and not exists (
        select 1 from ${sessionCalls} taken join given other on taken.id = other.id
        where taken.run_id <> ${sessionId} or taken.method <> other.method)
      and (${after}::text is null or exists (select 1 from ${sessionCalls} prior where prior.id = ${after}::text and prior.run_id = ${sessionId}))
    order by given.n
    on conflict (id) do nothing
    returning id, state`);
  const states = new Map((inserted as unknown as { rows: { id: string; state: CallRow["state"] }[] }).rows.map((row) => [row.id, row.state]));
  const fresh = new Set(states.keys());
  if (fresh.size > 0) {
    const handed = calls.flatMap((call): TakenSessionCall[] =>
      states.get(call.callId) === "running" ? [{ id: call.callId, method: call.method, argsJson: call.argsJson }] : [],
    );
    wake(`calls:${sessionId}`, handed.length > 0 ? handed : null);
    for (const id of fresh) wake(`submitted:${id}`);
  }
  const before = calls.filter((call) => !fresh.has(call.callId)).map((call) => call.callId);
  const known = before.length > 0 ? await readCalls(db, before) : new Map<string, CallRow>();
  const rows: CallRow[] = [];
  for (const call of calls) {
    if (fresh.has(call.callId)) {
      rows.push({ id: call.callId, runId: sessionId, state: states.get(call.callId)!, result: null, error: null, method: call.method });
      continue;
    }
    const row = known.get(call.callId);
    if (row && row.runId !== sessionId) throw new RunStateError(`call id '${call.callId}' belongs to another session; give each call a fresh id`, "CONFLICT");
    if (row && row.method !== call.method) throw new RunStateError(`call id '${call.callId}' was a ${row.method} call; give each call a fresh id`, "CONFLICT");
    if (row) rows.push(row);
  }
  if (rows.length < calls.length) {
    const predecessor = after === null ? null : await readCall(db, after);
    if (predecessor && predecessor.runId !== sessionId) {
      throw new RunStateError(`call '${after}', which these calls follow, belongs to another session`, "CONFLICT");
    }
    const job = await sessionJob(db, sessionId);
    const why = `${job.status}${job.reason ? `: ${job.reason}` : ""}`;
    if (terminalJobStates.has(job.status)) throw new RunStateError(`session ${sessionId} has ended (${why}); open a new one`, "CONFLICT");
    // The call they follow is still on its way, or was submitted by a request that committed after this statement
    // began (on PostgreSQL each statement sees the rows committed before it): either way, they are submitted on the
    // next look.
    if (after !== null) return null;
    throw new RunStateError(`calls of session ${sessionId} could not be submitted (it is ${why}); send them again`, "CONFLICT");
  }
  return rows;
}

/** Waits for the rows' answers in order until `until`, putting each answer in its row's place. */
async function waitForAnswers(
  db: Database,
  sessionId: string,
  rows: CallRow[],
  answers: Map<string, { woken: Promise<unknown> }>,
  until: number,
  signal?: AbortSignal,
): Promise<void> {
  for (let i = 0; i < rows.length; i++) {
    let row = rows[i]!;
    while (unanswered(row)) {
      const left = until - Date.now();
      if (left <= 0 || signal?.aborted) return; // the rest are returned as they stand
      const answered = (await within(answers.get(row.id)!.woken, Math.min(left, POLL_MS), signal)) as CallRow | null;
      row = answered ?? (await readCall(db, row.id))!;
      if (unanswered(row)) {
        // The session may have ended with this call unanswered (its worker lost, the session cancelled).
        const job = await sessionJob(db, sessionId);
        if (terminalJobStates.has(job.status)) {
          throw new RunStateError(
            `session ${sessionId} ended (${job.status}${job.reason ? `: ${job.reason}` : ""}) before answering this ${row.method} call`,
            "CONFLICT",
          );
        }
      }
      rows[i] = row;
    }
  }
}

/**
 * The session (run) of a session job the worker holds, as a statement's first part: every take and answer asks it
 * within its own statement, since a job moves to another worker when its lease lapses or it resumes, and the one
 * that lost it must be refused. No row: the worker does not hold it.
 */
function heldSessionSql(workerId: string, jobId: string) {
  return sql`held as (
    select ${jobs.runId} as run_id from ${jobs}
    where ${jobs.id} = ${jobId} and ${jobs.workerId} = ${workerId} and ${jobs.kind} = 'session' and ${jobs.runId} is not null)`;
}

function notHeld(workerId: string, jobId: string): RunStateError {
  return new RunStateError(`worker ${workerId} holds no session job '${jobId}'`, "CONFLICT");
}

/**
 * The session of each session job met, by job id: fixed for the job's life (who holds it is not: each statement
 * checks that), so that a take can listen for the session's calls before its statement runs.
 */
const sessionOfJob = new Map<string, string>();
const SESSIONS_REMEMBERED = 10_000;

function rememberSession(jobId: string, sessionId: string): void {
  if (sessionOfJob.size >= SESSIONS_REMEMBERED) sessionOfJob.clear();
  sessionOfJob.set(jobId, sessionId);
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

/** Calls' rows by their ids (those that exist). */
async function readCalls(db: Database, callIds: string[]): Promise<Map<string, CallRow>> {
  const rows = await db.select(callColumns).from(sessionCalls).where(inArray(sessionCalls.id, callIds));
  return new Map(rows.map((row) => [row.id, row]));
}

/**
 * A call as its worker takes it: its arguments as the JSON text stored, which the worker parses, so that the server
 * neither parses nor re-encodes them and every path (handed over, taken, taken again) gives the worker the same.
 */
export type TakenSessionCall = { id: string; method: SessionMethod; argsJson: string };
/** A worker's answer to a call: its result as JSON text (stored as it is), or the error the call raised. */
export type SessionAnswer = { callId: string; resultJson?: string; error?: string | null };

/** The most JSON of arguments one take hands a worker when it hands several calls (one call is handed whatever its size). */
const TAKE_ARGS_BYTES = 16 * 1024 * 1024;

/**
 * The session's next calls in order, up to `max` of them and TAKE_ARGS_BYTES of arguments (at least one), marked
 * running; waits up to `waitMs` for one. Calls queued together (a client's request of several) are so taken in one
 * round trip, and the worker runs them back to back.
 */
export async function takeSessionCalls(db: Database, input: { workerId: string; jobId: string; waitMs: number; max: number }): Promise<TakenSessionCall[]> {
  const until = Date.now() + input.waitMs;
  for (;;) {
    const known = sessionOfJob.get(input.jobId);
    // Listening before looking: a call submitted while the statement runs wakes the wait below. A job not met
    // before is looked at once first, for its session.
    const submitted = known === undefined ? null : listen(`calls:${known}`);
    try {
      const { sessionId, taken } = await takeNow(db, input.workerId, input.jobId, input.max);
      if (taken.length > 0) return taken;
      if (!submitted || sessionId !== known) {
        rememberSession(input.jobId, sessionId);
        continue;
      }
      const left = until - Date.now();
      if (left <= 0) return [];
      // Calls handed over with the wake (see submitCalls) are already marked running; the rest stay so until taken.
      const handed = (await within(submitted.woken, Math.min(left, POLL_MS))) as TakenSessionCall[] | null;
      if (handed) return handed.slice(0, input.max);
    } finally {
      submitted?.stop();
    }
  }
}

/**
 * The next calls of the session of a job the worker holds, in order (see `takeSessionCalls`), marked running, in
 * one statement with the hold's check; none when none is waiting.
 */
async function takeNow(db: Database, workerId: string, jobId: string, max: number): Promise<{ sessionId: string; taken: TakenSessionCall[] }> {
  // Calls left running (their worker stopped mid-call and the session was placed again) are run again: their
  // answers never reached anyone. Then the queued ones, oldest first.
  const result = await db.execute(sql`
    with ${heldSessionSql(workerId, jobId)},
    taken as (
      update ${sessionCalls} set state = 'running'
      where ${sessionCalls.id} in (
        select id from (
          select id, row_number() over (order by seq) as n, sum(octet_length(args)) over (order by seq) as bytes
          from ${sessionCalls} where ${sessionCalls.runId} = (select run_id from held) and ${inArray(sessionCalls.state, ["queued", "running"])}
        ) unanswered
        where n = 1 or (n <= ${max} and bytes <= ${TAKE_ARGS_BYTES})
      )
      returning ${sessionCalls.id} as id, ${sessionCalls.seq} as seq, ${sessionCalls.method} as method, ${sessionCalls.args} as args
    )
    select held.run_id as session_id, taken.id, taken.seq, taken.method, taken.args from held left join taken on true`);
  const rows = (result as unknown as { rows: { session_id: string; id: string | null; seq: number | string; method: string; args: string }[] }).rows;
  if (rows.length === 0) throw notHeld(workerId, jobId);
  const taken = rows
    .filter((row) => row.id !== null)
    .sort((a, b) => Number(a.seq) - Number(b.seq))
    .map((row) => ({ id: row.id!, method: row.method as SessionMethod, argsJson: row.args }));
  return { sessionId: rows[0]!.session_id, taken };
}

/**
 * The worker's answers to calls, in one statement, each waking its client. A call keeps its first answer: an
 * answer sent again (its response lost with the connection) changes nothing.
 */
export async function answerSessionCalls(db: Database, input: { workerId: string; jobId: string; answers: SessionAnswer[] }): Promise<void> {
  if (input.answers.length === 0) return;
  const values = sql.join(
    input.answers.map((answer) =>
      answer.error
        ? sql`(${answer.callId}::text, 'failed', null::text, ${answer.error}::text)`
        : sql`(${answer.callId}::text, 'done', ${answer.resultJson ?? "null"}::text, null::text)`,
    ),
    sql`, `,
  );
  // The hold's check and the answers in one statement: a row with a null id is the hold alone (nothing answered).
  const answered = await db.execute(sql`
    with ${heldSessionSql(input.workerId, input.jobId)},
    answered as (
      update ${sessionCalls} set state = given.state::session_call_state, result = given.result, error = given.error, answered_at = now()
      from (values ${values}) as given (id, state, result, error)
      where ${sessionCalls.id} = given.id and ${sessionCalls.runId} = (select run_id from held) and ${inArray(sessionCalls.state, ["queued", "running"])}
      returning ${sessionCalls.id} as id, ${sessionCalls.method} as method
    )
    select held.run_id as session_id, answered.id, answered.method from held left join answered on true`);
  const rows = (answered as unknown as { rows: { session_id: string; id: string | null; method: string }[] }).rows;
  if (rows.length === 0) throw notHeld(input.workerId, input.jobId);
  const sessionId = rows[0]!.session_id;
  // Each client is woken with its call's row as now stored, made here from the answer (not read back).
  const byId = new Map(input.answers.map((answer) => [answer.callId, answer]));
  for (const row of rows) {
    if (row.id === null) continue;
    const answer = byId.get(row.id)!;
    const stored: CallRow = answer.error
      ? { id: row.id, runId: sessionId, state: "failed", result: null, error: answer.error, method: row.method }
      : { id: row.id, runId: sessionId, state: "done", result: answer.resultJson ?? "null", error: null, method: row.method };
    wake(`answer:${row.id}`, stored);
  }
}

/**
 * A worker's round trip: its answers to the calls it ran, then (with `take`) the session's next calls, taken as
 * `takeSessionCalls` would once the answers are stored and their clients woken. A busy worker so makes one request
 * per batch of calls.
 */
export async function exchangeSessionCalls(
  db: Database,
  input: { workerId: string; jobId: string; answers: SessionAnswer[]; take?: { waitMs: number; max: number } },
): Promise<{ calls: TakenSessionCall[] }> {
  await answerSessionCalls(db, input);
  if (!input.take) return { calls: [] };
  // A turn of the event loop first, so that the woken clients' responses are written before the take's statement
  // holds the thread (the embedded database runs on it).
  if (input.answers.length > 0) await new Promise<void>((resolve) => setImmediate(resolve));
  return { calls: await takeSessionCalls(db, { workerId: input.workerId, jobId: input.jobId, ...input.take }) };
}

/** The base a session's model was opened on (its run's config), or null when `sessionId` is no run. */
export async function sessionBase(db: Database, sessionId: string): Promise<string | null> {
  const [session] = await db.select({ config: runs.config }).from(runs).where(eq(runs.id, sessionId));
  return session ? session.config.agent.base : null;
}
