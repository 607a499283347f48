/** A refusal the caller should surface as is: the job was taken from this worker, or the worker lost its lease. */
export class WorkerConflictError extends Error {
  override name = "WorkerConflictError";
  constructor(
    message: string,
    readonly code: "NOT_FOUND" | "CONFLICT" | "PRECONDITION_FAILED",
  ) {
    super(message);
  }
}

/** A job that can never run on the devices known (it needs more memory or slots than any device has). */
export class JobRejectedError extends Error {
  override name = "JobRejectedError";
}

/** A run asked to do what its state does not allow (resume a running run, cancel a finished one). */
export class RunStateError extends Error {
  override name = "RunStateError";
  constructor(
    message: string,
    readonly code: "NOT_FOUND" | "CONFLICT",
  ) {
    super(message);
  }
}
