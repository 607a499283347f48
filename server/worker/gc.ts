/**
 * V8's garbage collector and the sandbox's thread on a machine with few cores.
 *
 * A training step allocates enough for V8 to start marking the old generation soon after, and by default it
 * marks concurrently, on its own helper threads, through the rollout that follows. A rollout of a custom
 * environment relies on a second core for the sandbox's thread (`server/sandbox/lanes.ts`: it steps one lane
 * while the policy samples another); on a two-core machine the marking helpers took that core, so the thread
 * woke late and ran slowly. Measured on this project's 2-core VMs (arithmetic, 32 × 8, each rollout followed by
 * its policy update as in the RL loop, native and sandboxed alternating; docs/SANDBOX.md): the
 * sandbox added 13.5–24.0% to a rollout with concurrent marking and 5.5–12.4% without (medians of runs), while
 * native rollouts, training steps and sampling (`bench:train`, tokens/s) were as fast either way. The main thread then marks in V8's
 * incremental steps, which the native path pays alike.
 *
 * The flag is given when the process starts (`rolloutProcessFlags`; a worker gives it to its job host, where
 * rollouts run): V8 warns that flags changed at run time may crash it, and `--single-threaded-gc` set that way did
 * (a failed check in the collector's marker).
 */
import os from "node:os";

/** The Node flag that keeps V8's marking on the main thread. */
export const mainThreadMarkingFlag = "--no-concurrent-marking";

/** Whether a process that plays rollouts on a machine with `cores` cores should mark on its main thread: fewer than three. */
export function marksOnMainThread(cores = os.availableParallelism()): boolean {
  return cores < 3;
}

/** The Node flags a process that plays rollouts (a worker, `bench:sandbox`) starts with on this machine. */
export function rolloutProcessFlags(cores = os.availableParallelism()): string[] {
  return marksOnMainThread(cores) ? [mainThreadMarkingFlag] : [];
}

/** The flags of `rolloutProcessFlags` this process was not started with (a worker started by hand may lack them). */
export function missingRolloutFlags(cores = os.availableParallelism()): string[] {
  return rolloutProcessFlags(cores).filter((flag) => !process.execArgv.includes(flag));
}

/** Whether this process was started marking on its main thread only. */
export function startedMarkingOnMainThread(): boolean {
  return process.execArgv.includes(mainThreadMarkingFlag);
}
