/**
 * The messages that cross the sandbox boundary, as JSON strings in both directions: one op in, one result out.
 * The guest (guest/bridge.ts, inside QuickJS) and the host import these types only; the host re-validates every
 * answer, because user code shares the guest's realm and could tamper with it.
 */
import type { DatasetRow, Json } from "@/lib/sdk/environment";

/**
 * One op, as a tuple: the guest parses a crossing's ops in one JSON.parse, and QuickJS parses a short array in
 * about 60% of the time of an object with the same fields.
 */
export type GuestOp =
  | [op: "configure", maxObservationChars: number]
  | [op: "describe"]
  | [op: "reset", slot: number, seed: number, sample: DatasetRow | null]
  | [op: "step", slot: number, action: string]
  | [op: "render" | "summary" | "score", slot: number]
  | [op: "logs"];

/** The slot an op acts on, or null for the ops about the whole sandbox. */
export function slotOf(op: GuestOp): number | null {
  return op[0] === "configure" || op[0] === "describe" || op[0] === "logs" ? null : op[1];
}

export type GuestFailure = {
  kind: "runtime" | "contract" | "limit";
  name: string;
  message: string;
  stack?: string;
  /** For a contract failure: the user function whose answer broke it, e.g. "step". */
  fn?: string;
  /** For a size limit: what was too large and how large it was. */
  what?: string;
  length?: number;
};

/**
 * One op's answer: `[true, value]` or `[false, failure]`. Values that cross on every step are arrays, not objects
 * (the *Wire types): QuickJS serializes an array in about half the time of an object with the same fields.
 */
export type GuestResult = [true, unknown] | [false, GuestFailure];

/** One answer per op, with the milliseconds each op took (measured around the op by the sandbox's thread). */
export type GuestResponse = { ms: number[]; results: GuestResult[] };

export type GuestResetValue = { observation: string; systemPrompt: string; render: string | null };
/** `render` is `true` when it is the observation itself (a board game's usually is): the text crosses once. */
export type GuestResetWire = [observation: string, systemPrompt: string, render: string | null | true];

/**
 * An episode's end, sent with its last step. The final state is not: serializing it cost as much as the rest of
 * the end (a gomoku board: ~7 µs in QuickJS), and a rollout never reads it; the host asks for it (the summary
 * op) when a caller reads `summary().state`.
 */
export type GuestEpisodeEnd = {
  turns: number;
  totalReward: number;
  truncated: boolean;
  invalidActions: number;
  score: number;
  /** The return by reward function: "env" for the step rewards, then each of the definition's rewardFunctions. */
  breakdown: Record<string, number>;
};

export type GuestEpisodeEndWire = [
  turns: number,
  totalReward: number,
  truncated: boolean,
  invalidActions: number,
  score: number,
  /** null when the definition has no reward functions: the breakdown is then `{ env: totalReward }`. */
  breakdown: Record<string, number> | null,
];

export type GuestStepValue = {
  observation: string | null;
  reward: number;
  done: boolean;
  info: Record<string, Json>;
  metrics: Record<string, number>;
  render: string | null;
  end: GuestEpisodeEnd | null;
};

export type GuestStepWire = [
  observation: string | null,
  reward: number,
  done: boolean,
  info: Record<string, Json>,
  metrics: Record<string, number>,
  render: string | null | true,
  end: GuestEpisodeEndWire | null,
];

/**
 * The summary op's answer (rare: an episode's end comes with its last step), with the state as JSON text, which
 * the host parses (null when it does not serialize, or is longer than maxObservationChars).
 */
export type GuestSummaryWire = Omit<GuestEpisodeEnd, "score"> & { done: boolean; stateJson: string | null };

export type EnvironmentDescription = {
  name: string;
  description: string | null;
  data: { kind: "free" } | { kind: "dataset"; dataset: string };
  maxTurns: number;
  tools: string[];
  scoreName: string | null;
  hasRender: boolean;
  /** The export the definition was found under ("default" or a name). */
  exportName: string;
};

/** The global the bridge takes (and deletes) before user code runs, to hand the host its entry point. */
export const registerGlobal = "__tinkerlab_register";

/**
 * The memory the host thread shares with the sandbox's thread (24 bytes): as Int32, [ANSWERED] is 1 once the
 * batch's answer is posted, [CURRENT_OP] the index of the op running (-1 for none); as Float64, [OP_STARTED_AT]
 * when that op started (epoch milliseconds) and [OP_CPU_AT] the process's CPU clock then (`processCpuMs`).
 */
export const sharedBytes = 24;
export const ANSWERED = 0;
export const CURRENT_OP = 1;
export const OP_STARTED_AT = 1;
export const OP_CPU_AT = 2;

/**
 * The process's CPU time in milliseconds, all threads together. While the host thread waits on a call, the
 * sandbox's thread is what runs, so the CPU an op used is at most the smaller of this clock's advance and the
 * wall clock's: a thread descheduled on a busy machine is not charged for the wait.
 */
export function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
