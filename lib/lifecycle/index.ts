/**
 * The life of a run and of the scheduler job that executes it: which states exist, and what may follow what.
 * One state machine for the database (its enums are these lists), for server/jobs (every change of a job's state
 * there is a conditional UPDATE from the states `transition` allows), for the scheduler's simulator, and for the
 * browser (status badges and filters). A run shows the state of its latest job, except that a job being placed
 * still shows its run as queued.
 */

export const jobStates = ["queued", "placing", "running", "paused", "completed", "failed", "cancelled"] as const;
export type JobState = (typeof jobStates)[number];

export const runStates = ["queued", "running", "paused", "completed", "failed", "cancelled"] as const;
export type RunState = (typeof runStates)[number];

/**
 * What a job does: train with RL, fine-tune on demonstrations, serve samples, evaluate, export a checkpoint, or
 * hold a remote training session (a script's calls of the training primitives, run on a worker).
 */
export const jobKinds = ["rl", "sft", "inference", "eval", "export", "session"] as const;
export type JobKind = (typeof jobKinds)[number];

/** States a job never leaves. */
export const terminalJobStates: ReadonlySet<JobState> = new Set(["completed", "failed", "cancelled"]);
export const terminalRunStates: ReadonlySet<RunState> = new Set(["completed", "failed", "cancelled"]);

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
  override name = "InvalidJobTransitionError";
  constructor(
    readonly from: JobState,
    readonly to: JobState,
  ) {
    const next = allowedNext[from];
    const accepted = next.length === 0 ? `'${from}' is final` : `from '${from}' a job may go to ${next.map((s) => `'${s}'`).join(", ")}`;
    super(`a job cannot go from '${from}' to '${to}': ${accepted}`);
  }
}

export function canTransition(from: JobState, to: JobState): boolean {
  return allowedNext[from].includes(to);
}

/** The states from which a job may go to `to`: the guard of every conditional UPDATE in server/jobs. */
export function statesLeadingTo(to: JobState): JobState[] {
  return jobStates.filter((from) => canTransition(from, to));
}

/** The state a run shows while its job is in `job`. */
export function runStateOf(job: JobState): RunState {
  return job === "placing" ? "queued" : job;
}

/** The record of one change of state, as the simulator keeps it. */
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
