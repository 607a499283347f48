/**
 * The life of a scheduler job. Every change of state goes through `transition`, so the database-backed scheduler,
 * the simulator and the API agree on what may follow what, and every change carries the reason a user will read.
 */

export const jobStates = ["queued", "placing", "running", "paused", "completed", "failed", "cancelled"] as const;
export type JobState = (typeof jobStates)[number];

/** States a job never leaves. */
export const terminalJobStates: ReadonlySet<JobState> = new Set(["completed", "failed", "cancelled"]);

const allowedNext: Readonly<Record<JobState, readonly JobState[]>> = {
  // failed from queued: rejected at submit (it can never fit) or its run was deleted.
  queued: ["placing", "paused", "cancelled", "failed"],
  // queued from placing: the worker could not take it (lost lease, base failed to load) and it waits again.
  placing: ["running", "queued", "paused", "failed", "cancelled"],
  // queued from running: preempted or its worker died; it resumes from its last checkpoint.
  running: ["completed", "failed", "cancelled", "paused", "queued"],
  // A resumed job queues again: it needs a placement like any other.
  paused: ["queued", "cancelled"],
  completed: [],
  failed: [],
  cancelled: [],
};

export class InvalidJobTransitionError extends Error {
  constructor(
    readonly from: JobState,
    readonly to: JobState,
  ) {
    const next = allowedNext[from];
    const accepted = next.length === 0 ? `'${from}' is final` : `from '${from}' a job may go to ${next.map((s) => `'${s}'`).join(", ")}`;
    super(`a job cannot go from '${from}' to '${to}': ${accepted}`);
    this.name = "InvalidJobTransitionError";
  }
}

export function canTransition(from: JobState, to: JobState): boolean {
  return allowedNext[from].includes(to);
}

/** The record of one change of state, as the scheduler stores it. */
export interface JobTransition {
  from: JobState;
  to: JobState;
  reason: string;
  at: number;
}

/** Checks a change of state and returns its record; throws `InvalidJobTransitionError` when it is not allowed. */
export function transition(from: JobState, to: JobState, reason: string, at: number): JobTransition {
  if (!canTransition(from, to)) throw new InvalidJobTransitionError(from, to);
  if (reason.trim() === "") throw new Error(`a job going from '${from}' to '${to}' needs a reason`);
  return { from, to, reason, at };
}
