/**
 * The checks every answer from the guest gets before anything else reads it: types, sizes, JSON, reserved
 * keys. User code shares the guest's realm with the bridge, so nothing it sends is trusted. The server's pool
 * (sandboxed-environment.ts) and the browser's episode player (components/episode) read answers through these.
 * Plain functions, no Node.js: this file runs in a browser worker too.
 */
import { automatonFor, checkActionList, type ActionConstraint } from "@/lib/sdk/action-space";
import { type Difficulty, type EpisodeSummary, type Json, type Seats, difficultyProblems } from "@/lib/sdk/environment";
import { SandboxError, SandboxLimitError, formatCount } from "./errors";
import {
  type EnvironmentDescription,
  type GuestEpisodeEnd,
  type GuestResetValue,
  type GuestSeatValue,
  type GuestStepValue,
  LAST_STEP_FIELDS,
  RESET_SEAT_FIELDS,
  STEP_FIELDS,
  STEP_SEAT_FIELDS,
  isReservedKey,
  reservedKeyReason,
} from "./wire";

export type SandboxedSummary = EpisodeSummary<Json> & { breakdown: Record<string, number> };

/**
 * Reads the answers of resets and steps (GuestResetWire, GuestStepWire) of one environment: its actions' kind
 * says whether each answer carries the next turn's legal actions, and the last system prompt is kept for the
 * resets that refer to it.
 */
export class AnswerReader {
  private lastSystemPrompt: string | null = null;

  constructor(
    private readonly actions: EnvironmentDescription["actions"],
    private readonly limits: { maxObservationChars: number },
  ) {}

  /**
   * A reset's values (GuestResetWire); `seats`, the episode's agents when there are several (their seat values
   * follow, RESET_SEAT_FIELDS), else null.
   */
  checkReset(values: unknown[], at: number, n: number, where: Where, seats: Seats | null = null): GuestResetValue {
    const byState = this.actions === "state";
    const fields = byState ? 4 : 3;
    if (n !== fields + (seats ? RESET_SEAT_FIELDS : 0)) throw new SandboxError("contract", `${where.label}: the answer is malformed`);
    const observation = values[at];
    const systemPrompt = values[at + 1];
    const render = values[at + 2];
    const text = this.text(observation, where, "the observation");
    let prompt: string;
    if (systemPrompt === true) {
      if (this.lastSystemPrompt === null) throw new SandboxError("contract", `${where.label}: the system prompt refers to a previous one that is not there`);
      prompt = this.lastSystemPrompt;
    } else prompt = this.lastSystemPrompt = this.text(systemPrompt, where, "the system prompt");
    const legalActions = byState ? checkConstraint(values[at + 3], `${where.label}: actions(state)`) : null;
    const seat = seats ? this.resetSeat(values, at + fields, seats, where) : undefined;
    return { observation: text, systemPrompt: prompt, render: this.renderOf(render, text, where), legalActions, seat };
  }

  /**
   * A step's values (GuestStepWire): the observation, reward, info and render, the episode's end when the
   * observation is null, then the metrics as pairs.
   */
  checkStep(values: unknown[], at: number, n: number, where: Where, seats: Seats | null = null): GuestStepValue {
    const observation = values[at];
    const done = observation === null;
    const byState = !done && this.actions === "state";
    const own = done ? LAST_STEP_FIELDS : byState ? STEP_FIELDS + 1 : STEP_FIELDS;
    const fields = own + (seats ? STEP_SEAT_FIELDS : 0);
    if (n < fields || (n - fields) % 2 !== 0) throw new SandboxError("contract", `${where.label}: the answer is malformed`);
    const text = done ? null : this.text(observation, where, "the observation");
    const info = values[at + 2];
    return {
      observation: text,
      reward: finiteIn(values[at + 1], where, "the reward"),
      done,
      info: info === 0 ? {} : jsonRecord(info, `${where.label}: info`),
      metrics: metricPairs(values, at + fields, at + n, where),
      render: this.renderOf(values[at + 3], text, where),
      end: done ? checkEnd(values, at + STEP_FIELDS, where) : null,
      legalActions: byState ? checkConstraint(values[at + STEP_FIELDS], `${where.label}: actions(state)`) : null,
      seat: seats ? this.stepSeat(values, at + own, seats, done, where) : undefined,
    };
  }

  /** A reset's seat values (`actor, prompts | 0, views | 0, legal | 0`). */
  private resetSeat(values: unknown[], at: number, seats: Seats, where: Where): GuestSeatValue {
    return {
      actor: agentIn(values[at], seats, where),
      prompts: this.byAgent(values[at + 1], seats, where, (value) => this.text(value, where, "a system prompt")),
      rewards: null,
      views: this.byAgent(values[at + 2], seats, where, (value) => this.text(value, where, "an observation")),
      legal: this.byAgent(values[at + 3], seats, where, (value) => checkConstraint(value, `${where.label}: actions(state)`)),
      invalid: null,
    };
  }

  /** A step's or a round's seat values (`actor | null, rewards | 0, views | 0, legal | 0, invalid | 0`). */
  private stepSeat(values: unknown[], at: number, seats: Seats, done: boolean, where: Where): GuestSeatValue {
    const actor = values[at];
    const rewards = values[at + 1];
    const invalid = values[at + 4];
    return {
      actor: actor === null && (done || seats.simultaneous) ? null : agentIn(actor, seats, where),
      prompts: null,
      rewards: rewards === 0 ? null : agentRecord(rewards, seats, where, "rewards", (value, what) => finite(value, what)),
      views: this.byAgent(values[at + 2], seats, where, (value) => this.text(value, where, "an observation")),
      legal: this.byAgent(values[at + 3], seats, where, (value) => checkConstraint(value, `${where.label}: actions(state)`)),
      invalid: invalid === 0 ? null : agentRecord(invalid, seats, where, "invalid", (value, what) => textOf(value, what)),
    };
  }

  /** A list with one value per agent, in the order of the episode's agents, as a record by agent (0: none). */
  private byAgent<T>(value: unknown, seats: Seats, where: Where, check: (value: unknown) => T): Record<string, T> | null {
    if (value === 0) return null;
    if (!Array.isArray(value) || value.length !== seats.agents.length) throw new SandboxError("contract", `${where.label}: the answer is malformed`);
    const record: Record<string, T> = {};
    for (const [i, agent] of seats.agents.entries()) record[agent] = check(value[i]);
    return record;
  }

  /** A render as sent: text, null, or `true` for "the observation itself". */
  private renderOf(value: unknown, observation: string | null, where: Where): string | null {
    if (value === true) {
      if (observation === null) throw new SandboxError("contract", `${where.label}: the render refers to an observation that is not there`);
      return observation;
    }
    return value === null ? null : this.text(value, where, "the render");
  }

  /** Text within maxObservationChars: `field` of the answer to `where`. */
  text(value: unknown, where: Where, field: string): string {
    if (typeof value === "string" && value.length <= this.limits.maxObservationChars) return value;
    const what = `${where.label}: ${field}`;
    if (typeof value !== "string") throw new SandboxError("contract", `${what} must be a string`);
    throw new SandboxLimitError(
      "maxObservationChars",
      this.limits.maxObservationChars,
      value.length,
      `${what} is ${formatCount(value.length)} characters; limit maxObservationChars=${formatCount(this.limits.maxObservationChars)}`,
    );
  }
}

/** One of the episode's agents, as the guest named it. */
function agentIn(value: unknown, seats: Seats, where: Where): string {
  if (typeof value === "string" && seats.agents.includes(value)) return value;
  throw new SandboxError("contract", `${where.label}: the agent to act must be one of ${seats.agents.join(", ")}; got ${String(value)}`);
}

/** A record by agent (each key one of the episode's agents), its values checked and copied. */
function agentRecord<T>(value: unknown, seats: Seats, where: Where, field: string, check: (value: unknown, what: string) => T): Record<string, T> {
  const record = object(value, `${where.label}: ${field}`);
  const copy: Record<string, T> = {};
  for (const [agent, item] of Object.entries(record)) {
    if (!seats.agents.includes(agent)) throw new SandboxError("contract", `${where.label}: ${field}.${agent}: '${agent}' is not an agent of this episode`);
    copy[agent] = check(item, `${where.label}: ${field}.${agent}`);
  }
  return copy;
}

function textOf(value: unknown, what: string): string {
  if (typeof value !== "string") throw new SandboxError("contract", `${what} must be a string`);
  return value;
}

export function object(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new SandboxError("contract", `${what}: the answer must be an object`);
  return value as Record<string, unknown>;
}

export function finite(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) throw new SandboxError("contract", `${what} must be a finite number; got ${String(value)}`);
  return value;
}

/**
 * Whose answer a check reads, for its message: an op's budget, whose label is made only when a message reads it
 * (a rollout checks hundreds of answers each crossing, and a message's text cost more than the check).
 */
export type Where = { readonly label: string };

/** `finite` of `field` of the answer to `where`. */
function finiteIn(value: unknown, where: Where, field: string): number {
  // x - x is 0 for every finite number, NaN for NaN and the infinities
  return typeof value === "number" && value - value === 0 ? value : finite(value, `${where.label}: ${field}`);
}

function wholeIn(value: unknown, where: Where, field: string): number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : whole(value, `${where.label}: ${field}`);
}

/**
 * A fresh copy of a step's info: a key a run could not report (`isReservedKey`) is refused, naming its path, as
 * the guest refuses it.
 */
function jsonRecord(value: unknown, what: string): Record<string, Json> {
  object(value, what);
  return copyJson(value, what, 0, true) as Record<string, Json>;
}

/**
 * A fresh copy of a JSON value (`what` names it, and its parts' paths follow); with `refuseReserved`, keys
 * such as "constructor" are refused, else (a state) they are kept as plain data, never prototypes.
 */
function copyJson(value: unknown, what: string, depth: number, refuseReserved = false): Json {
  if (depth > 64) throw new SandboxError("contract", `${what} is nested deeper than 64 levels`);
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") return finite(value, what);
  if (Array.isArray(value)) return value.map((item, i) => copyJson(item, `${what}[${i}]`, depth + 1, refuseReserved));
  if (typeof value === "object") {
    const copy: Record<string, Json> = {};
    for (const [key, item] of Object.entries(value)) {
      if (refuseReserved && isReservedKey(key)) throw new SandboxError("contract", `${what}.${key}: ${reservedKeyReason(key)}`);
      Object.defineProperty(copy, key, {
        value: copyJson(item, `${what}.${key}`, depth + 1, refuseReserved),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  }
  throw new SandboxError("contract", `${what} must be JSON`);
}

/** Metrics sent as key-value pairs (`values[from]` to `values[to - 1]`), as a fresh record; a reserved name is refused. */
function metricPairs(values: unknown[], from: number, to: number, where: Where): Record<string, number> {
  const copy: Record<string, number> = {};
  for (let i = from; i < to; i += 2) {
    const key = values[i];
    if (typeof key !== "string") throw new SandboxError("contract", `${where.label}: metrics: a metric's name must be a string; got ${String(key)}`);
    if (isReservedKey(key)) throw new SandboxError("contract", `${where.label}: metrics.${key}: ${reservedKeyReason(key)}`);
    copy[key] = finiteIn(values[i + 1], where, `metrics.${key}`);
  }
  return copy;
}

/** A record of numbers (a reward breakdown: "env" and the reward functions' names), copied; a reserved name is refused. */
function numberRecord(value: unknown, what: string): Record<string, number> {
  const record = object(value, what);
  const copy: Record<string, number> = {};
  for (const [key, item] of Object.entries(record)) {
    if (isReservedKey(key)) throw new SandboxError("contract", `${what}.${key}: ${reservedKeyReason(key)}`);
    copy[key] = finite(item, `${what}.${key}`);
  }
  return copy;
}

/** An episode's end (`turns, totalReward, truncated, invalidActions, score, breakdown`) from `at` in a step's values. */
function checkEnd(values: unknown[], at: number, where: Where): GuestEpisodeEnd {
  const truncated = values[at + 2];
  if (typeof truncated !== "boolean") throw new SandboxError("contract", `${where.label}: truncated must be true or false`);
  const total = finiteIn(values[at + 1], where, "the total reward");
  const breakdown = values[at + 5];
  return {
    turns: wholeIn(values[at], where, "turns"),
    totalReward: total,
    truncated,
    invalidActions: wholeIn(values[at + 3], where, "invalidActions"),
    score: finiteIn(values[at + 4], where, "the score"),
    breakdown: breakdown === null ? { env: total } : numberRecord(breakdown, `${where.label}: the reward breakdown`),
  };
}

export function whole(value: unknown, what: string): number {
  const n = finite(value, what);
  if (!Number.isInteger(n) || n < 0) throw new SandboxError("contract", `${what} must be a whole number`);
  return n;
}

/** The state the guest sent as JSON text (null when it had none that serializes), parsed and copied. */
function stateFromJson(value: unknown, label: string): Json {
  if (value === null) return null;
  if (typeof value !== "string") throw new SandboxError("contract", `${label}: the state must be JSON text or null`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new SandboxError("contract", `${label}: the state is not valid JSON`);
  }
  return copyJson(parsed, `${label}: the state`, 0);
}

export function checkSummary(value: unknown, label: string): SandboxedSummary {
  const record = object(value, label);
  if (typeof record.done !== "boolean" || typeof record.truncated !== "boolean") {
    throw new SandboxError("contract", `${label}: done and truncated must be true or false`);
  }
  return {
    state: stateFromJson(record.stateJson, label),
    turns: whole(record.turns, `${label}: turns`),
    totalReward: finite(record.totalReward, `${label}: the total reward`),
    done: record.done,
    truncated: record.truncated,
    invalidActions: whole(record.invalidActions, `${label}: invalidActions`),
    breakdown: numberRecord(record.breakdown, `${label}: the reward breakdown`),
  };
}

export function checkDescription(value: unknown): EnvironmentDescription {
  const record = object(value, "the environment's description");
  const data = object(record.data, "the environment's data");
  if (typeof record.name !== "string" || typeof record.maxTurns !== "number" || typeof record.exportName !== "string") {
    throw new SandboxError("contract", "the environment's description is malformed");
  }
  return {
    name: record.name,
    description: typeof record.description === "string" ? record.description : null,
    data: data.kind === "dataset" && typeof data.dataset === "string" ? { kind: "dataset", dataset: data.dataset } : { kind: "free" },
    maxTurns: record.maxTurns,
    tools: Array.isArray(record.tools) ? record.tools.filter((tool): tool is string => typeof tool === "string") : [],
    scoreName: typeof record.scoreName === "string" ? record.scoreName : null,
    hasRender: record.hasRender === true,
    hasDemonstrator: record.hasDemonstrator === true,
    difficulty: checkDifficulty(record.difficulty),
    multiAgent: checkMultiAgent(record.multiAgent),
    actions:
      record.actions === "state"
        ? "state"
        : record.actions === null || record.actions === undefined
          ? null
          : checkConstraint(record.actions, "the environment's actions"),
    exportName: record.exportName,
  };
}

/** Which functions for several agents the guest says the definition declares (none, when it says nothing). */
function checkMultiAgent(value: unknown): EnvironmentDescription["multiAgent"] {
  const record = value !== null && typeof value === "object" ? (value as Record<string, unknown>) : {};
  return { toAct: record.toAct === true, observe: record.observe === true, stepTogether: record.stepTogether === true };
}

/** The declared levels as the guest sent them, checked again (user code shares the guest's realm). */
function checkDifficulty(value: unknown): Difficulty | null {
  if (value === null || value === undefined) return null;
  const problems = difficultyProblems(value);
  if (problems.length > 0) throw new SandboxError("contract", `the environment's description is malformed: ${problems.join("; ")}`);
  const { min, max, start, evaluation } = value as Difficulty;
  return { min, max, ...(start === undefined ? {} : { start }), ...(evaluation === undefined ? {} : { evaluation }) };
}

/** A legal-actions constraint as the guest sent it, checked again here (user code shares the guest's realm). */
function checkConstraint(value: unknown, label: string): ActionConstraint {
  const record = object(value, label);
  try {
    if (typeof record.pattern === "string" && record.actions === undefined) return automatonFor({ pattern: record.pattern }) && { pattern: record.pattern };
    return { actions: checkActionList(record.actions, "actions") };
  } catch (error) {
    throw new SandboxError("contract", `${label}: ${(error as Error).message}`);
  }
}
