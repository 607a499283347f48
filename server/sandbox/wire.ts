/**
 * The messages that cross the sandbox boundary, as JSON strings in both directions: a crossing's ops in
 * (GuestRequest), their answers out (GuestResponse).
 * The guest (guest/bridge.ts, inside QuickJS) and the host import these types only; the host re-validates every
 * answer, because user code shares the guest's realm and could tamper with it.
 */
import type { ActionConstraint } from "@/lib/sdk/action-space";
import type { DatasetRow, Difficulty, Json, Seats } from "@/lib/sdk/environment";

/**
 * One op, as a tuple: the guest parses a crossing's ops in one JSON.parse, and QuickJS parses a short array in
 * about 60% of the time of an object with the same fields.
 */
export type GuestOp =
  | [op: "configure", maxObservationChars: number]
  | [op: "describe"]
  | [op: "reset", slot: number, seed: number, sample: DatasetRow | null, difficulty?: number | null, seats?: Seats | null]
  | [op: "step", slot: number, action: string]
  | [op: "round", slot: number, actions: string[]]
  | [op: "render" | "summary" | "score", slot: number]
  | [op: "demonstrate", slot: number, agent?: string]
  | [op: "logs"];

/** The slot an op acts on, or null for the ops about the whole sandbox. */
export function slotOf(op: GuestOp): number | null {
  return op[0] === "configure" || op[0] === "describe" || op[0] === "logs" ? null : op[1];
}

/**
 * A crossing's ops as the guest receives them: a batch of steps, of simultaneous rounds (each round's actions in
 * the order of the episode's agents) or of resets by columns (QuickJS parses 64 steps as `["step", [slots],
 * [actions]]` in a third of the time it takes as 64 tuples), any other batch as its tuples. A reset's seats (the
 * protocol's agents) cross only for an episode that is not a single "agent"'s.
 */
export type GuestRequest =
  | [kind: "step", slots: number[], actions: string[]]
  | [kind: "round", slots: number[], actions: string[][]]
  | [kind: "reset", slots: number[], seeds: number[], samples: (DatasetRow | null)[] | 0, difficulties?: (number | null)[] | 0, seats?: (Seats | null)[]]
  | [kind: "ops", ops: GuestOp[]];

/** The JSON text of a crossing's request (see GuestRequest). */
export function encodeRequest(ops: GuestOp[]): string {
  const kind = ops[0]?.[0];
  if ((kind === "step" || kind === "round" || kind === "reset") && ops.every((op) => op[0] === kind)) {
    if (kind === "step" || kind === "round") return JSON.stringify([kind, ops.map((op) => op[1]), ops.map((op) => op[2])]);
    const resets = ops as Extract<GuestOp, [op: "reset", ...unknown[]]>[];
    const samples = resets.some((op) => op[3] !== null) ? resets.map((op) => op[3]) : 0;
    const columns: unknown[] = ["reset", resets.map((op) => op[1]), resets.map((op) => op[2]), samples];
    // The levels of an environment that declares difficulty, and the seats of a protocol with several agents (or
    // one not named "agent"); neither crosses when no reset has one.
    const levels = resets.some((op) => op[4] !== undefined && op[4] !== null);
    const seated = resets.some((op) => op[5] !== undefined && op[5] !== null);
    if (levels || seated) columns.push(levels ? resets.map((op) => op[4] ?? null) : 0);
    if (seated) columns.push(resets.map((op) => op[5] ?? null));
    return JSON.stringify(columns);
  }
  return JSON.stringify(["ops", ops]);
}

/**
 * Keys a run cannot carry in info (at any depth), as a metric's name or as a reward function's name: the run's
 * reports (superjson) refuse them as prototype pollution, so the guest and the host refuse them where the user's
 * code returns them, the same in validation's dry run as in a run. A state may hold them (it is never reported).
 */
export function isReservedKey(key: string): boolean {
  return key === "__proto__" || key === "constructor" || key === "prototype";
}

/** Why a reserved key (see `isReservedKey`) is refused, after the path that holds it. */
export function reservedKeyReason(key: string): string {
  return `'${key}' is not allowed as a key: a run's reports refuse '__proto__', 'constructor' and 'prototype' (in info, metric names, reward function names); rename it`;
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
 * A crossing's answers, as the host receives them: one flat JSON array holding each op's record in turn (V8's
 * JSON.parse spends more on each array it makes than on the values in it, and QuickJS's JSON.stringify more on
 * each object and array than on anything else). A record is its length and its values, `n, v1, ..., vn`: the
 * guest answers each op with the JSON text `[n, v1, ..., vn]` (one JSON.stringify call) and the sandbox's thread
 * joins the answers without their brackets. A failed op's record is `-1, failure` (a GuestFailure).
 * The values of each op (the *Wire types): configure none; describe, logs, render, summary and score one value.
 */
export const FAILED = -1;

/** One answer per op: each op's record in `results` starts at `starts[i]` (its length); `ms`, each op's time. */
export type GuestResponse = { ms: number[]; results: unknown[]; starts: Int32Array };

/**
 * What a reset or a step of an episode with several agents answers beyond a single agent's, by agent: the agent to
 * act next (turn-based; null once done, or in a simultaneous round), each agent's system prompt (a reset, when the
 * definition's systemPrompt is a function), the step's per-agent rewards, and in a simultaneous round each agent's
 * next observation, legal actions (actions as a function of the state) and invalid action.
 */
export type GuestSeatValue = {
  actor: string | null;
  prompts: Record<string, string> | null;
  rewards: Record<string, number> | null;
  views: Record<string, string> | null;
  legal: Record<string, ActionConstraint> | null;
  invalid: Record<string, string> | null;
};

/**
 * A reset's seat values (after its GuestResetWire values): `actor, prompts | 0, views | 0, legal | 0`, each list
 * in the order of the episode's agents.
 */
export const RESET_SEAT_FIELDS = 4;
/**
 * A step's or a round's seat values (before its metrics): `actor | null, rewards | 0, views | 0, legal | 0,
 * invalid | 0`; views and legal are lists in the order of the episode's agents.
 */
export const STEP_SEAT_FIELDS = 5;

/**
 * `legalActions`: the next turn's, when the environment's actions depend on the state (else the description's).
 * `seat`: an episode with several agents' (see GuestSeatValue), else undefined.
 */
export type GuestResetValue = {
  observation: string;
  systemPrompt: string;
  render: string | null;
  legalActions: ActionConstraint | null;
  seat?: GuestSeatValue;
};
/**
 * `render` is `true` when it is the observation itself (a board game's usually is): the text crosses once.
 * `systemPrompt` is `true` when it is the one the sandbox's previous reset answered (the host keeps it): a
 * definition's prompt is usually the same string for every episode.
 */
export type GuestResetWire =
  | [n: 3, observation: string, systemPrompt: string | true, render: string | null | true]
  | [n: 4, observation: string, systemPrompt: string | true, render: string | null | true, legalActions: ActionConstraint];

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

export type GuestStepValue = {
  observation: string | null;
  reward: number;
  done: boolean;
  info: Record<string, Json>;
  metrics: Record<string, number>;
  render: string | null;
  end: GuestEpisodeEnd | null;
  /** The next turn's legal actions, when they depend on the state and the episode goes on. */
  legalActions: ActionConstraint | null;
  /** An episode with several agents' (see GuestSeatValue), else undefined. */
  seat?: GuestSeatValue;
};

/**
 * A step's record (a simultaneous round's alike, its observation the first agent's): an unfinished episode's step, `4 + 2k, observation, reward, info, render, key1, value1, ...`
 * (its k metrics as pairs; `5 + 2k` with the next turn's legal actions after the render when the description's
 * actions are "state"); the last step, `10 + 2k, null, reward, info, render`, the episode's end (`turns,
 * totalReward, truncated, invalidActions, score, breakdown`), then the metrics. Whether the episode is done is
 * the observation being null. `info` is 0 when empty; `breakdown` null when the definition has no reward
 * functions (it is then `{ env: totalReward }`). An episode with several agents has its seat values (STEP_SEAT_FIELDS)
 * before the metrics.
 */
export type GuestStepWire =
  | [n: number, observation: string, reward: number, info: Record<string, Json> | 0, render: string | null | true, ...metrics: (string | number)[]]
  | [
      n: number,
      observation: null,
      reward: number,
      info: Record<string, Json> | 0,
      render: string | null,
      turns: number,
      totalReward: number,
      truncated: boolean,
      invalidActions: number,
      score: number,
      breakdown: Record<string, number> | null,
      ...metrics: (string | number)[],
    ];
/** Where the metrics start in a step's values (GuestStepWire, after its length): unfinished, and the last step. */
export const STEP_FIELDS = 4;
export const LAST_STEP_FIELDS = 10;

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
  /** Whether the definition has a demonstrator (`demonstrate(state)`). */
  hasDemonstrator: boolean;
  /** The declared levels of difficulty (what the RL trainer's curriculum moves through), or null: none. */
  difficulty: Difficulty | null;
  /** Which of the functions for several agents the definition declares. */
  multiAgent: { toAct: boolean; observe: boolean; stepTogether: boolean };
  /**
   * The legal actions: one constraint for every turn, "state" when each reset's and unfinished step's record
   * carries its own (after the render), or null when the environment declares none.
   */
  actions: ActionConstraint | "state" | null;
  /** The export the definition was found under ("default" or a name). */
  exportName: string;
};

/** The global the bridge takes (and deletes) before user code runs, to hand the host its entry point. */
export const registerGlobal = "__tinkerlab_register";

/**
 * The process's CPU time in milliseconds, all threads together. While the host thread waits on a call, the
 * sandbox's thread is what runs, so the CPU an op used is at most the smaller of this clock's advance and the
 * wall clock's: a thread descheduled on a busy machine is not charged for the wait.
 */
export const processCpuMs: () => number =
  typeof process !== "undefined" && typeof process.cpuUsage === "function"
    ? () => {
        const { user, system } = process.cpuUsage();
        return (user + system) / 1000;
      }
    : // A browser worker has no CPU clock: there an op is charged its wall time.
      () => performance.now();
