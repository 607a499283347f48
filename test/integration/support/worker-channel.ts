import type { DatabaseHandle } from "@/server/db";
import { claimJob, finishJob, heartbeat, recordCheckpoint, registerWorker, setAsideCheckpoint, storeReport } from "@/server/jobs";
import type { WorkerChannel } from "@/server/worker/channel";

/** The worker's side of server/jobs, straight on this database (as a database worker's channel is). */
export function channelOn(database: DatabaseHandle["db"]): WorkerChannel {
  return {
    describe: "test database",
    register: (input) => registerWorker(database, input),
    heartbeat: (workerId) => heartbeat(database, workerId),
    claim: (workerId, jobId) => claimJob(database, workerId, jobId),
    report: (input) => storeReport(database, input),
    checkpoint: (input) => recordCheckpoint(database, input),
    setAside: (input) => setAsideCheckpoint(database, input),
    finish: (input) => finishJob(database, input),
    leave: async () => ({}),
    close: async () => {},
  };
}
