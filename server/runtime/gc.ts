/**
 * V8's garbage collector and the sandbox's thread on a machine with few cores.
 *
 * A training step allocates enough for V8 to start marking the old generation soon after, and by default it
 * marks concurrently, on its own helper threads, through the rollout that follows. A rollout of a custom
 * environment relies on a second core for the sandbox's thread (`server/sandbox/lanes.ts`: it steps one lane
 * while the policy samples another); on a two-core machine the marking helpers took that core, so the thread
 * woke late and ran slowly. Measured on this project's 2-core VMs (arithmetic, 32 × 8, each rollout followed by
 * its policy update as in the RL loop, native and sandboxed alternating; docs/SANDBOX.md, eighth session): the
 * sandbox added 15–23% to a rollout with concurrent marking and 6–10% without, while native rollouts, training
 * steps (`bench:train`, tokens/s) and sampling were as fast either way. The main thread then does the marking
 * in V8's incremental steps, which the native path pays alike.
 */
import os from "node:os";
import v8 from "node:v8";

/** Whether a process on a machine with `cores` cores should mark without helper threads: fewer than three. */
export function marksOnMainThread(cores: number): boolean {
  return cores < 3;
}

let limited = false;

/**
 * Turns off concurrent marking in this process when the machine has fewer than three cores (the host thread,
 * the sandbox's thread, and none to spare). Call it early, before the heap grows: a worker does at start, and
 * `bench:sandbox` does to measure what a worker plays. Returns whether marking is now on the main thread only.
 */
export function limitBackgroundGc(cores = os.availableParallelism()): boolean {
  if (!marksOnMainThread(cores)) return false;
  if (!limited) v8.setFlagsFromString("--no-concurrent-marking");
  limited = true;
  return true;
}
