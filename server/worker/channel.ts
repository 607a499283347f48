/**
 * How a worker reaches the scheduler's tables. Two ways, one set of operations (server/jobs):
 * - over HTTP, through the server's `worker` tRPC router (TINKERLAB_SERVER_URL + TINKERLAB_WORKER_TOKEN); the
 *   server's scheduler places jobs and the worker hears of them at its heartbeat;
 * - straight to PostgreSQL (DATABASE_URL): the worker runs scheduling passes itself (the same policy, in a locking
 *   transaction, see server/jobs/scheduling.ts), writes its reports directly, and LISTENs for NOTIFYs so that it
 *   acts on new work at once; a slow poll covers a lost connection or a missed notice.
 */
import pg from "pg";
import { sql } from "drizzle-orm";
import { type CheckpointKind, openDatabase, type DatabaseHandle } from "../db";
import {
  claimJob,
  finishJob,
  heartbeat,
  JOBS_CHANNEL,
  leaveWorker,
  recordCheckpoint,
  registerWorker,
  schedulerTick,
  setAsideCheckpoint,
  storeReport,
  exchangeSessionCalls,
  type ClaimedJob,
  type DeviceSpec,
  type FinishOutcome,
  type JobsNotice,
  type ReportInput,
  type SessionAnswer,
  type StopWhy,
  type TakenSessionCall,
  type WorkerStatus,
} from "../jobs";
import { createPackingPolicy } from "../scheduler";
import { createWorkerApi } from "./worker-api";

/** NOTIFY channel on which database workers announce a run's new metrics, so servers can wake its live streams. */
export const RUN_DATA_CHANNEL = "tinkerlab_run_data";

export interface WorkerChannel {
  /** "server http://…" or "database host:port/name", for logs. */
  readonly describe: string;
  register(input: { hostname: string; pid: number; backend: string; devices: DeviceSpec[] }): Promise<{ workerId: string }>;
  heartbeat(workerId: string, status?: WorkerStatus): Promise<{ assignments: string[]; stops: { jobId: string; why: StopWhy }[] }>;
  claim(workerId: string, jobId: string): Promise<ClaimedJob>;
  report(input: ReportInput): Promise<unknown>;
  checkpoint(input: { workerId: string; jobId: string; step: number; path: string; sizeBytes: number; kind?: CheckpointKind }): Promise<unknown>;
  /** A checkpoint found damaged on loading: set aside; answers the run's newest good checkpoint before it, if any. */
  setAside(input: {
    workerId: string;
    jobId: string;
    checkpointId: string;
    reason: string;
  }): Promise<{ next: { id: string; path: string; step: number } | null }>;
  finish(input: { workerId: string; jobId: string; outcome: FinishOutcome; reason: string | null }): Promise<unknown>;
  /** Leaves, its jobs going back to the queue; `why` goes to their runs' logs. */
  leave(workerId: string, why?: string): Promise<unknown>;
  /**
   * A session job's round trip (server/jobs/sessions.ts): its answers to the calls it ran, then, with `take`, the
   * session's next calls in order (up to `max`), waiting up to `waitMs` for one; none when none came.
   */
  sessionExchange(input: {
    workerId: string;
    jobId: string;
    answers: SessionAnswer[];
    take?: { waitMs: number; max: number };
  }): Promise<{ calls: TakenSessionCall[] }>;
  /** A scheduling pass run by this worker (database workers only). */
  schedule?(): Promise<void>;
  /** Calls `wake` when there may be news for `workerId` (database workers: a NOTIFY). */
  listen?(workerId: string, wake: (why: "placed" | "changed") => void): Promise<void>;
  close(): Promise<void>;
}

/**
 * A channel for running one job in this process without a server (benches, tests): `runJob` reports and records
 * checkpoints through the given handlers; the calls a worker loop makes (register, claim, …) are refused.
 */
export function inProcessChannel(on: {
  report?(input: ReportInput): void;
  checkpoint?(input: { step: number; path: string }): void;
  /** Without it, a damaged checkpoint fails the job. */
  setAside?(input: { checkpointId: string; reason: string }): { next: { id: string; path: string; step: number } | null };
}): WorkerChannel {
  const refuse = () => Promise.reject(new Error("an in-process channel runs one job: runJob does not call this"));
  return {
    describe: "in process",
    register: refuse,
    heartbeat: refuse,
    claim: refuse,
    report: async (input) => on.report?.(input),
    checkpoint: async (input) => {
      on.checkpoint?.(input);
      return {};
    },
    setAside: async (input) => (on.setAside ? on.setAside(input) : refuse()),
    finish: refuse,
    leave: refuse,
    sessionExchange: refuse,
    close: async () => {},
  };
}

export function httpChannel(serverUrl: string, token: string): WorkerChannel {
  // Every call goes alone, in its own request, the moment it is made: a batch waits a timer for company, and alone
  // each reaches the web server's direct route (server/api/direct.ts), past Next.js's routing, which a heartbeat
  // must not wait on when the server is busy.
  const api = createWorkerApi(serverUrl, token, { batch: false });
  return {
    describe: `server ${serverUrl}`,
    register: (input) => api.worker.register.mutate(input),
    heartbeat: (workerId, status = {}) => api.worker.heartbeat.mutate({ workerId, running: status.running ?? [], lagMs: status.lagMs ?? 0 }),
    claim: (workerId, jobId) => api.worker.claim.mutate({ workerId, jobId }),
    report: (input) => api.worker.report.mutate(input),
    checkpoint: (input) => api.worker.checkpoint.mutate(input),
    setAside: (input) => api.worker.setAside.mutate(input),
    finish: (input) => api.worker.finish.mutate(input),
    leave: (workerId, why) => api.worker.leave.mutate({ workerId, why }),
    sessionExchange: (input) => api.worker.sessionExchange.mutate(input),
    close: async () => {},
  };
}

export async function databaseChannel(databaseUrl: string, options: { log?: (line: string) => void } = {}): Promise<WorkerChannel> {
  const log = options.log ?? (() => {});
  const handle: DatabaseHandle = await openDatabase({ databaseUrl });
  if (handle.kind !== "postgres") throw new Error("a database worker needs a PostgreSQL server in DATABASE_URL");
  const { db } = handle;
  const policy = createPackingPolicy();
  let listener: { close(): Promise<void> } | null = null;

  const startListening = async (workerId: string, wake: (why: "placed" | "changed") => void) => {
    // A worker that registers again (its job host died) listens for its new id only.
    await listener?.close();
    listener = keepListening(databaseUrl, [JOBS_CHANNEL], {
      notice: (_, payload) => {
        let notice: JobsNotice = {};
        try {
          notice = JSON.parse(payload);
        } catch {
          // Not one of ours: treat it as "something changed".
          notice = { queued: true };
        }
        if (notice.placedOn?.includes(workerId)) wake("placed");
        if (notice.queued || notice.freed) wake("changed");
      },
      // Whatever happened while no one listened is picked up by the next pass.
      listening: () => wake("changed"),
      lost: (why) => log(`lost the LISTEN connection (${why}); polling until it is back`),
    });
  };

  return {
    describe: `database ${handle.location}`,
    register: (input) => registerWorker(db, input),
    heartbeat: (workerId, status) => heartbeat(db, workerId, status),
    claim: (workerId, jobId) => claimJob(db, workerId, jobId),
    async report(input) {
      const runId = await storeReport(db, input);
      await db.execute(sql`select pg_notify(${RUN_DATA_CHANNEL}, ${runId})`);
    },
    checkpoint: (input) => recordCheckpoint(db, input),
    setAside: (input) => setAsideCheckpoint(db, input),
    async finish(input) {
      const { runId } = await finishJob(db, input);
      await db.execute(sql`select pg_notify(${RUN_DATA_CHANNEL}, ${runId})`);
    },
    leave: (workerId, why) => leaveWorker(db, workerId, why),
    sessionExchange: (input) => exchangeSessionCalls(db, input),
    async schedule() {
      await schedulerTick(db, policy);
    },
    listen: (workerId, wake) => startListening(workerId, wake),
    async close() {
      await listener?.close();
      await handle.close();
    },
  };
}

/**
 * The server's side of the notices, on PostgreSQL: new or freed work wakes its scheduler at once, and a database
 * worker's report wakes the live streams of that run (they would otherwise see it at their next poll).
 */
export function listenAsServer(databaseUrl: string, on: { jobs: () => void; runData: (runId: string) => void }) {
  return keepListening(databaseUrl, [JOBS_CHANNEL, RUN_DATA_CHANNEL], {
    notice: (channel, payload) => (channel === RUN_DATA_CHANNEL ? on.runData(payload) : on.jobs()),
  });
}

/** One LISTEN connection kept open: after a loss it reconnects every 2 s (callers poll meanwhile). */
function keepListening(
  databaseUrl: string,
  channels: string[],
  on: { notice: (channel: string, payload: string) => void; listening?: () => void; lost?: (why: string) => void },
): { close(): Promise<void> } {
  let client: pg.Client | null = null;
  let closed = false;
  const attempt = async () => {
    if (closed) return;
    const current = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
    let lost = false;
    const onLost = (why: string) => {
      if (lost || closed) return;
      lost = true;
      on.lost?.(why);
      current.end().catch(() => {});
      setTimeout(() => void attempt(), 2_000);
    };
    current.on("notification", (message) => {
      if (channels.includes(message.channel)) on.notice(message.channel, message.payload ?? "");
    });
    current.on("error", (error) => onLost(error.message));
    current.on("end", () => onLost("connection ended"));
    client = current;
    try {
      await current.connect();
      for (const channel of channels) await current.query(`LISTEN ${channel}`);
      on.listening?.();
    } catch (error) {
      onLost(error instanceof Error ? error.message : String(error));
    }
  };
  void attempt();
  return {
    async close() {
      closed = true;
      await client?.end().catch(() => {});
    },
  };
}
