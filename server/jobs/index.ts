/**
 * The one owner of runs and jobs in the database: their lifecycle (launch, claim, report, stop, resume, finish,
 * expire leases), the scheduling passes that place jobs, and the workers' leases. Each operation is a transaction
 * guarded by the state machine of lib/lifecycle. Routers and workers call these; nothing else writes the runs and
 * jobs tables (test/unit/architecture.test.ts checks it).
 */
export { JobRejectedError, RunStateError, WorkerConflictError } from "./errors";
export {
  claimJob,
  finishJob,
  launchRun,
  recordCheckpoint,
  setAsideCheckpoint,
  resumeRun,
  runNameStamp,
  stopRun,
  type ClaimedJob,
  type FinishOutcome,
  type NewRun,
} from "./lifecycle";
export { storeReport, type MetricPointInput, type ReportInput, type RolloutInput } from "./reports";
export { clusterState, schedulerTick, submitJob, type SubmitJob } from "./scheduling";
export { JOBS_CHANNEL, notifyJobs, type JobsNotice } from "./notify";
export { expireLeases, LEASE_SECONDS, leaveWorker, workerProcessEnded } from "./leases";
export { heartbeat, registerWorker, type DeviceSpec, type StopWhy, type WorkerStatus } from "./workers";
export { startSchedulerLoop } from "./loop";
export { describeLineage, isCheckpointBase, resolveBase, UnknownBaseError, type BaseSource } from "./bases";
export { liveWorkers, schedulerOverview } from "./overview";
export {
  answerSessionCalls,
  callSession,
  callSessionMany,
  DEFAULT_LEASE_SECONDS,
  MAX_CALLS_PER_REQUEST,
  MAX_LEASE_SECONDS,
  openSession,
  sessionBase,
  sessionMethods,
  exchangeSessionCalls,
  takeSessionCalls,
  type SessionAnswer,
  type SessionCallAnswer,
  type SessionCallInput,
  type SessionCallRow,
  type SessionMethod,
  type TakenSessionCall,
} from "./sessions";
export { jobCost, type JobCost, overCostLimit } from "./admission";
export { mergeReports, REPORT_LIMITS, ReportQueue } from "./report-queue";
export { deleteRun, renameRun, RunChangeError, setRunArchived, setRunNotes, tagRun } from "./run-meta";
export {
  ensureServing,
  SERVING_ENVIRONMENT,
  SERVING_RETRY_AFTER_FAILURE_S,
  SERVING_TEMPLATE,
  servingJobOf,
  type ServingNeed,
  type ServingState,
} from "./serving";
