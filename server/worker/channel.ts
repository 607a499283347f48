/**
 * How a worker reaches the scheduler's tables. Two ways, one set of operations (server/worker/job-store.ts):
 * - over HTTP, through the server's `worker` tRPC router (TINKERLAB_SERVER_URL + TINKERLAB_WORKER_TOKEN); the
 *   server's scheduler places jobs and the worker hears of them at its heartbeat;
 * - straight to PostgreSQL (DATABASE_URL): the worker runs scheduling passes itself (the same policy, in a locking
 *   transaction, see server/scheduler/service.ts), writes its reports directly, and LISTENs for NOTIFYs so that it
 *   acts on new work at once; a slow poll covers a lost connection or a missed notice.
 */
import pg from "pg";
import { sql } from "drizzle-orm";
import { openDatabase, type DatabaseHandle } from "../db";
import { createPackingPolicy } from "../scheduler/policy";
import { JOBS_CHANNEL, schedulerTick, type JobsNotice } from "../scheduler/service";
import { claimJob, finishJob, heartbeat, leaveWorker, recordCheckpoint, registerWorker, storeReport, type ClaimedJob, type DeviceSpec, type FinishOutcome, type ReportInput, type StopWhy } from "./job-store";
import { createWorkerApi } from "./worker-api";

/** NOTIFY channel on which database workers announce a run's new metrics, so servers can wake its live streams. */
export const RUN_DATA_CHANNEL = "tinkerlab_run_data";

export interface WorkerChannel {
  /** "server http://…" or "database host:port/name", for logs. */
  readonly describe: string;
  register(input: { hostname: string; pid: number; backend: string; devices: DeviceSpec[] }): Promise<{ workerId: string }>;
  heartbeat(workerId: string): Promise<{ assignments: string[]; stops: { jobId: string; why: StopWhy }[] }>;
  claim(workerId: string, jobId: string): Promise<ClaimedJob>;
  report(input: ReportInput): Promise<unknown>;
  checkpoint(input: { workerId: string; jobId: string; step: number; path: string; sizeBytes: number }): Promise<unknown>;
  finish(input: { workerId: string; jobId: string; outcome: FinishOutcome; reason: string | null }): Promise<unknown>;
  leave(workerId: string): Promise<unknown>;
  /** A scheduling pass run by this worker (database workers only). */
  schedule?(): Promise<void>;
  /** Calls `wake` when there may be news for `workerId` (database workers: a NOTIFY). */
  listen?(workerId: string, wake: (why: "placed" | "changed") => void): Promise<void>;
  close(): Promise<void>;
}

export function httpChannel(serverUrl: string, token: string): WorkerChannel {
  const api = createWorkerApi(serverUrl, token);
  return {
    describe: `server ${serverUrl}`,
    register: (input) => api.worker.register.mutate(input),
    heartbeat: (workerId) => api.worker.heartbeat.mutate({ workerId, running: [] }),
    claim: (workerId, jobId) => api.worker.claim.mutate({ workerId, jobId }),
    report: (input) => api.worker.report.mutate(input),
    checkpoint: (input) => api.worker.checkpoint.mutate(input),
    finish: (input) => api.worker.finish.mutate(input),
    leave: (workerId) => api.worker.leave.mutate({ workerId }),
    close: async () => {},
  };
}

export async function databaseChannel(databaseUrl: string, options: { log?: (line: string) => void } = {}): Promise<WorkerChannel> {
  const log = options.log ?? (() => {});
  const handle: DatabaseHandle = await openDatabase({ databaseUrl });
  if (handle.kind !== "postgres") throw new Error("a database worker needs a PostgreSQL server in DATABASE_URL");
  const { db } = handle;
  const policy = createPackingPolicy();
  let listener: pg.Client | null = null;
  let closed = false;

  /** Keeps one LISTEN connection open, reconnecting every 2 s after a loss; the worker polls meanwhile. */
  const startListening = (workerId: string, wake: (why: "placed" | "changed") => void) => {
    const attempt = async () => {
      if (closed) return;
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
      let lost = false;
      const onLost = (why: string) => {
        if (lost || closed) return;
        lost = true;
        if (listener === client) listener = null;
        log(`lost the LISTEN connection (${why}); polling until it is back`);
        client.end().catch(() => {});
        setTimeout(() => void attempt(), 2_000);
      };
      client.on("notification", (message) => {
        if (message.channel !== JOBS_CHANNEL) return;
        let notice: JobsNotice = {};
        try {
          notice = JSON.parse(message.payload ?? "{}");
        } catch {
          // Not one of ours: treat it as "something changed".
        }
        if (notice.placedOn?.includes(workerId)) wake("placed");
        if (notice.queued || notice.freed) wake("changed");
      });
      client.on("error", (error) => onLost(error.message));
      client.on("end", () => onLost("connection ended"));
      listener = client;
      try {
        await client.connect();
        await client.query(`LISTEN ${JOBS_CHANNEL}`);
        // Whatever happened while no one listened is picked up by the next pass.
        wake("changed");
      } catch (error) {
        onLost(error instanceof Error ? error.message : String(error));
      }
    };
    return attempt();
  };

  return {
    describe: `database ${handle.location}`,
    register: (input) => registerWorker(db, input),
    heartbeat: (workerId) => heartbeat(db, workerId),
    claim: (workerId, jobId) => claimJob(db, workerId, jobId),
    async report(input) {
      const runId = await storeReport(db, input);
      await db.execute(sql`select pg_notify(${RUN_DATA_CHANNEL}, ${runId})`);
    },
    checkpoint: (input) => recordCheckpoint(db, input),
    async finish(input) {
      const { runId } = await finishJob(db, input);
      await db.execute(sql`select pg_notify(${RUN_DATA_CHANNEL}, ${runId})`);
    },
    leave: (workerId) => leaveWorker(db, workerId),
    async schedule() {
      await schedulerTick(db, policy);
    },
    listen: (workerId, wake) => startListening(workerId, wake),
    async close() {
      closed = true;
      await listener?.end().catch(() => {});
      await handle.close();
    },
  };
}

/**
 * The server's side of the notices, on PostgreSQL: new or freed work wakes its scheduler at once, and a database
 * worker's report wakes the live streams of that run (they would otherwise see it at their next poll).
 */
export function listenAsServer(databaseUrl: string, on: { jobs: () => void; runData: (runId: string) => void }) {
  let client: pg.Client | null = null;
  let closed = false;
  const attempt = async () => {
    if (closed) return;
    const current = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
    let lost = false;
    const onLost = () => {
      if (lost || closed) return;
      lost = true;
      current.end().catch(() => {});
      setTimeout(() => void attempt(), 2_000);
    };
    current.on("notification", (message) => {
      if (message.channel === RUN_DATA_CHANNEL && message.payload) on.runData(message.payload);
      else if (message.channel === JOBS_CHANNEL) on.jobs();
    });
    current.on("error", onLost);
    current.on("end", onLost);
    client = current;
    try {
      await current.connect();
      await current.query(`LISTEN ${JOBS_CHANNEL}; LISTEN ${RUN_DATA_CHANNEL}`);
    } catch {
      onLost();
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
