/**
 * The guest half of the sandbox: bundled with the user's files and evaluated inside QuickJS before them. It
 * hardens the realm, holds one `EnvironmentSession` per slot, and answers ops (reset, step, render, summary,
 * score): the sandbox's thread hands it a crossing's batch of ops as one JSON string (`begin`, a GuestRequest),
 * then calls `next` once per op, which adds that op's answer to the batch's records, and takes the records as one
 * JSON string (`take`) at the end (see GuestResponse).
 *
 * It also checks what the user's functions return (the contract) where the SDK would silently coerce: a reward
 * "1" or NaN, a done of 1, an async step. The host checks every answer again; this half only makes the errors
 * precise (it knows which function and which field) and keeps oversized values from being serialized at all.
 */
import {
  type DatasetRow,
  type EnvironmentDefinition,
  type Json,
  type Seats,
  type SessionFields,
  type StepOutcome,
  EnvironmentContractError,
  EnvironmentSession,
  defineEnvironment,
  legalActionsOf,
} from "@/lib/sdk/environment";
import { Rng } from "@/lib/model/rng";
import {
  type EnvironmentDescription,
  FAILED,
  type GuestFailure,
  type GuestOp,
  type GuestRequest,
  type GuestSummaryWire,
  RESET_SEAT_FIELDS,
  isReservedKey,
  reservedKeyReason,
} from "../wire";

type AnyDefinition = EnvironmentDefinition<unknown, unknown, DatasetRow>;
type Register = (begin: (request: string) => void, next: () => number, take: () => string) => void;

// Captured before any user module is evaluated: user code may replace the globals, not these bindings.
const global = globalThis as unknown as Record<string, unknown>;
const stringify = JSON.stringify;
const parseJson = JSON.parse;
const isFiniteNumber = Number.isFinite;
const isArray = Array.isArray;
const objectKeys = Object.keys;
const getPrototypeOf = Object.getPrototypeOf;
const defineProperty = Object.defineProperty;
const apply = Reflect.apply;
const StringOf = String;

const register = global.__tinkerlab_register as Register;
delete global.__tinkerlab_register;

class ContractViolation extends Error {
  constructor(
    readonly fn: string,
    message: string,
  ) {
    super(message);
    this.name = "ContractError";
  }
}

class SizeViolation extends Error {
  constructor(
    readonly what: string,
    readonly length: number,
  ) {
    super(`${what} is ${length} characters`);
    this.name = "LimitError";
  }
}

hardenRealm();
const logs: string[] = [];
installConsole();

let maxChars = 100_000;
let definition: AnyDefinition | null = null;
let description: EnvironmentDescription | null = null;
const sessions: EnvironmentSession<unknown, unknown, DatasetRow>[] = [];
/** A tool's broken answer, raised after the step (the SDK turns a throwing tool into an observation). */
let pendingViolation: ContractViolation | null = null;
/** No reward functions: an episode's breakdown is its total as "env", which the host writes itself. */
let breakdownIsTotal = true;
/** Whether each reset's and unfinished step's record carries the next turn's legal actions (actions as a function of the state). */
let actionsByState = false;
/** The batch being answered (a GuestRequest's columns), and the index of its next op. */
let kind: GuestRequest[0] = "ops";
let ops: GuestOp[] = [];
let slots: number[] = [];
let actions: string[] = [];
let seeds: number[] = [];
let samples: (DatasetRow | null)[] | 0 = 0;
let difficulties: (number | null)[] | 0 = 0;
let seatsOfResets: (Seats | null)[] | 0 = 0;
let roundActions: string[][] = [];
let cursor = 0;
/**
 * The batch's records so far (see GuestResponse), serialized in one JSON.stringify call when the thread takes
 * them (`take`): in QuickJS each call costs ~1-2 µs before any work, and each answer's string another crossing.
 */
let records: unknown[] = [];
/** The characters of text the records hold; past `takeChars`, `next` asks the thread to take them at once. */
let recordChars = 0;
const takeChars = 250_000;
/** The system prompt of the last reset answered: a reset with the same one answers `true` in its place. */
let lastSystemPrompt: string | null = null;

/** Called once by the generated entry, after the user's modules have been evaluated. */
export function install(userModule: Record<string, unknown>): void {
  const { exportName, value } = findDefinition(userModule);
  defineEnvironment(value as AnyDefinition); // the SDK's own checks, with its messages, for undecorated exports too
  definition = guardDefinition(value as AnyDefinition);
  breakdownIsTotal = objectKeys(definition.rewardFunctions ?? {}).length === 0;
  description = {
    name: definition.name,
    description: typeof definition.description === "string" ? definition.description : null,
    data: definition.data?.kind === "dataset" ? { kind: "dataset", dataset: StringOf(definition.data.dataset) } : { kind: "free" },
    maxTurns: definition.maxTurns,
    tools: definition.tools ? objectKeys(definition.tools) : [],
    scoreName: typeof definition.scoreName === "string" ? definition.scoreName : null,
    hasRender: typeof definition.render === "function",
    hasDemonstrator: typeof definition.demonstrate === "function",
    difficulty: copyDifficulty(definition.difficulty),
    multiAgent: {
      toAct: typeof definition.toAct === "function",
      observe: typeof definition.observe === "function",
      stepTogether: typeof definition.stepTogether === "function",
    },
    actions: typeof definition.actions === "function" ? "state" : definition.actions === undefined ? null : legalActionsOf(definition, undefined),
    exportName,
  };
  actionsByState = description.actions === "state";
  register(begin, next, take);
}

/** The declared levels as plain numbers (defineEnvironment has checked them), or null. */
function copyDifficulty(declared: AnyDefinition["difficulty"]): EnvironmentDescription["difficulty"] {
  if (!declared) return null;
  const { min, max, start, evaluation } = declared;
  return { min, max, ...(start === undefined ? {} : { start }), ...(evaluation === undefined ? {} : { evaluation }) };
}

/** Takes a crossing's ops (the host's JSON text, parsed once for the whole batch). */
function begin(text: string): void {
  const request = parseJson(text) as GuestRequest;
  kind = request[0];
  if (request[0] === "step") {
    slots = request[1];
    actions = request[2];
  } else if (request[0] === "round") {
    slots = request[1];
    roundActions = request[2];
  } else if (request[0] === "reset") {
    slots = request[1];
    seeds = request[2];
    samples = request[3];
    difficulties = request[4] || 0;
    seatsOfResets = request[5] ?? 0;
  } else ops = request[1];
  cursor = 0;
  records = [];
  recordChars = 0;
}

/**
 * Runs the batch's next op and adds its record (`n, ...values`, or `-1, failure`) to the batch's. Returns 1 when
 * the records hold so much text that the thread should take them now, else 0.
 */
function next(): number {
  const i = cursor++;
  const start = records.length;
  try {
    pendingViolation = null;
    if (kind === "step") step(slots[i]!, actions[i]!);
    else if (kind === "round") step(slots[i]!, "", roundActions[i]!);
    else if (kind === "reset") {
      reset(
        slots[i]!,
        seeds[i]!,
        samples === 0 ? null : samples[i]!,
        difficulties === 0 ? null : difficulties[i]!,
        seatsOfResets === 0 ? null : seatsOfResets[i]!,
      );
    } else answer(ops[i]!);
    if (pendingViolation) throw pendingViolation;
  } catch (error) {
    records.length = start;
    records.push(FAILED, describeFailure(error));
  }
  return recordChars > takeChars ? 1 : 0;
}

/** The records added since the last take, as the JSON text of one array. */
function take(): string {
  const text = stringify(records);
  records = [];
  recordChars = 0;
  return text;
}

/** A reset's record (GuestResetWire), with an episode with several agents' seat values after it. */
function reset(slot: number, seed: number, sample: DatasetRow | null, difficulty: number | null, seats: Seats | null): void {
  const session = (sessions[slot] ??= new EnvironmentSession(definition!));
  const observation = checkSize("observation", session.reset(seed, sample ?? undefined, difficulty ?? undefined, seats ?? undefined));
  const render = checkSize("render", session.render() ?? null);
  const systemPrompt = checkSize("systemPrompt", session.systemPrompt);
  const samePrompt = systemPrompt === lastSystemPrompt;
  const renderOrSame = render !== null && render === observation ? true : render;
  const start = records.length;
  if (actionsByState) {
    const legal = session.legalActions();
    recordChars += checkJsonSize("actions(state)", legal);
    records.push(4, observation, samePrompt ? true : systemPrompt, renderOrSame, legal);
  } else records.push(3, observation, samePrompt ? true : systemPrompt, renderOrSame);
  lastSystemPrompt = systemPrompt;
  recordChars += observation.length + (samePrompt ? 0 : systemPrompt.length) + (render === null ? 0 : render.length);
  const fields = session as unknown as SessionFields;
  if (!fields.several) return;
  const agents = fields.seats.agents;
  const together = fields.seats.simultaneous;
  const prompts = typeof definition!.systemPrompt === "function" ? agents.map((agent) => checkSize("systemPrompt", session.systemPromptOf(agent))) : 0;
  const views = together ? agents.map((agent) => checkSize("observation", session.observationOf(agent))) : 0;
  const legal = together && actionsByState ? agents.map((agent) => session.legalActions(agent)) : 0;
  for (const text of [...(prompts || []), ...(views || [])]) recordChars += text.length;
  if (legal !== 0) recordChars += checkJsonSize("actions(state)", legal);
  records.push(fields.actor, prompts, views, legal);
  (records[start] as number) += RESET_SEAT_FIELDS;
}

/**
 * A step's record (GuestStepWire), or with `list` (the actions in the order of the episode's agents) a simultaneous
 * round's: what `session.step` would answer, read from the step's outcome as it is (`advance`) and from the
 * session's fields, rather than from the answer `step` builds and a summary, so that a step makes no object of its
 * own: an arithmetic step took 7.3 µs in QuickJS this way against 8.2. An episode with several agents adds its seat
 * values before the metrics; a round's observation is the first agent's.
 */
function step(slot: number, action: string, list: string[] | null = null): void {
  const session = sessionAt(slot);
  const fields = session as unknown as SessionFields;
  let outcome: Omit<StepOutcome<unknown>, "state">;
  let observation: string | null;
  let seat: unknown[] | null = null;
  if (list === null) {
    outcome = session.advance(action);
    observation = fields.finished ? null : checkSize("observation", outcome.observation ?? "");
    if (fields.several) seat = [fields.finished ? null : fields.actor, fields.stepRewards ?? 0, 0, 0, 0];
  } else {
    const played = playRound(session, list);
    outcome = played.outcome;
    observation = played.observation;
    seat = played.seat;
  }
  const done = fields.finished;
  const truncated = fields.truncated;
  const render = checkSize("render", session.render() ?? null);
  // info, the one value whose size is not known yet, is measured only when it has something in it; an episode
  // cut short at maxTurns says so in it, as `step` does
  const given = outcome.info;
  const info = truncated ? { ...given, truncated: true } : given === undefined || objectKeys(given).length === 0 ? 0 : given;
  if (info !== 0) recordChars += checkJsonSize("info", info);
  const start = records.length;
  if (done) {
    const breakdown = breakdownIsTotal ? null : session.rewardBreakdown();
    records.push(0, null, fields.stepReward, info, render, fields.turn, fields.total, truncated, fields.invalid, session.score(), breakdown);
  } else {
    records.push(0, observation, fields.stepReward, info, render !== null && render === observation ? true : render);
    if (actionsByState) {
      const legal = session.legalActions();
      recordChars += checkJsonSize("actions(state)", legal);
      records.push(legal);
    }
  }
  if (seat !== null) for (let v = 0; v < seat.length; v++) records.push(seat[v]);
  const metrics = outcome.metrics as Record<string, number> | MetricPairs | undefined;
  if (metrics === undefined) {
    // none
  } else if (isArray(metrics)) for (let m = 0; m < metrics.length; m++) records.push(metrics[m]);
  else {
    // metrics the SDK made itself (an invalid action's, a tool call's): plain objects of numbers
    const keys = objectKeys(metrics);
    for (let m = 0; m < keys.length; m++) records.push(keys[m], metrics[keys[m]!]);
  }
  records[start] = records.length - start - 1;
  recordChars += (observation === null ? 0 : observation.length) + (render === null ? 0 : render.length);
}

/**
 * Plays a simultaneous round (`list`: the actions in the order of the episode's agents): its outcome, the first
 * agent's next observation, and the seat values with each agent's observation, legal actions and invalid action.
 */
function playRound(
  session: EnvironmentSession<unknown, unknown, DatasetRow>,
  list: string[],
): { outcome: Omit<StepOutcome<unknown>, "state">; observation: string | null; seat: unknown[] } {
  const fields = session as unknown as SessionFields;
  const agents = fields.seats.agents;
  if (!isArray(list) || list.length !== agents.length) throw new Error(`a round needs ${agents.length} actions, one per agent`);
  const byAgent: Record<string, string> = {};
  for (let a = 0; a < agents.length; a++) byAgent[agents[a]!] = list[a]!;
  const { outcome, observations, invalid } = session.advanceTogether(byAgent);
  const views = observations === null ? 0 : agents.map((agent) => checkSize("observation", observations[agent]!));
  const legal = views !== 0 && actionsByState ? agents.map((agent) => session.legalActions(agent)) : 0;
  if (views !== 0) for (let a = 1; a < views.length; a++) recordChars += views[a]!.length;
  if (legal !== 0) recordChars += checkJsonSize("actions(state)", legal);
  const invalidOrNone = objectKeys(invalid).length === 0 ? 0 : invalid;
  return { outcome, observation: views === 0 ? null : views[0]!, seat: [null, fields.stepRewards ?? 0, views, legal, invalidOrNone] };
}

/** The record of an op other than a batch's reset or step (one at a time, rare: see GuestRequest). */
function answer(op: GuestOp): void {
  switch (op[0]) {
    case "configure":
      maxChars = op[1];
      records.push(0);
      return;
    case "describe":
      records.push(1, description);
      return;
    case "logs": {
      const lines = logs.splice(0, logs.length);
      for (let i = 0; i < lines.length; i++) recordChars += lines[i]!.length;
      records.push(1, lines);
      return;
    }
    case "reset":
      return reset(op[1], op[2], op[3], op[4] ?? null, op[5] ?? null);
    case "step":
      return step(op[1], op[2]);
    case "round":
      return step(op[1], "", op[2]);
    case "render": {
      const render = checkSize("render", sessionAt(op[1]).render() ?? null);
      recordChars += render === null ? 0 : render.length;
      records.push(1, render);
      return;
    }
    case "summary": {
      const session = sessionAt(op[1]);
      const { state, turns, totalReward, done, truncated, invalidActions } = session.summary();
      const value: GuestSummaryWire = {
        turns,
        totalReward,
        done,
        truncated,
        invalidActions,
        breakdown: session.rewardBreakdown(),
        stateJson: stateAsJson(state),
      };
      recordChars += value.stateJson === null ? 0 : value.stateJson.length;
      records.push(1, value);
      return;
    }
    case "score":
      records.push(1, sessionAt(op[1]).score());
      return;
    case "demonstrate": {
      const action = checkSize("demonstrate", sessionAt(op[1]).demonstrate(op[2] ?? undefined));
      recordChars += action === null ? 0 : action.length;
      records.push(1, action);
      return;
    }
  }
}

function sessionAt(slot: number) {
  const session = sessions[slot];
  if (!session) throw new Error(`slot ${slot} has no episode; reset it first`);
  return session;
}

/**
 * The state is informational (the trajectory viewer): its JSON text, which the host parses; null when it does not
 * serialize, or is too big.
 */
function stateAsJson(state: unknown): string | null {
  try {
    const text = stringify(state);
    return text === undefined || text.length > maxChars ? null : text;
  } catch {
    return null;
  }
}

function checkSize<T extends string | null>(what: string, text: T): T {
  if (typeof text === "string" && text.length > maxChars) throw new SizeViolation(what, text.length);
  return text;
}

/** The length of a value's JSON text, which must be within the limit. */
function checkJsonSize(what: string, value: unknown): number {
  const text = stringify(value);
  if (text.length > maxChars) throw new SizeViolation(`${what} as JSON`, text.length);
  return text.length;
}

// ---- finding and guarding the user's definition ----

function isDefinitionLike(value: unknown): boolean {
  return (
    value !== null && typeof value === "object" && typeof (value as AnyDefinition).reset === "function" && typeof (value as AnyDefinition).step === "function"
  );
}

function findDefinition(userModule: Record<string, unknown>): { exportName: string; value: unknown } {
  if (isDefinitionLike(userModule.default)) return { exportName: "default", value: userModule.default };
  const named = objectKeys(userModule).filter((key) => key !== "default" && isDefinitionLike(userModule[key]));
  if (named.length === 1) return { exportName: named[0]!, value: userModule[named[0]!] };
  if (named.length === 0) {
    throw new ContractViolation("module", "the entry file exports no environment; write `export default defineEnvironment({ ... })`");
  }
  throw new ContractViolation("module", `the entry file exports several environments (${named.join(", ")}); make the one to run the default export`);
}

/**
 * What the guards below answer the SDK with, one object each, refilled on every call: the SDK reads a guarded
 * reset's, parseAction's or step's answer at once, copying the values it keeps, and holds on to none of these
 * objects (nor does any user code see them), while QuickJS takes ~1 µs to make an object of six fields. The one
 * exception is a step's: `advance` hands it back to this bridge's `step`, which reads it before the next step
 * refills it (user code that runs meanwhile, a render or a score, cannot reach it).
 */
const resetAnswer: { state: unknown; observation: string } = { state: undefined, observation: "" };
const parsedAction: { ok: true; action: unknown } = { ok: true, action: undefined };
const stepOutcome: StepOutcome<unknown> = {
  state: undefined,
  observation: undefined,
  reward: 0,
  rewards: undefined,
  done: false,
  info: undefined,
  metrics: undefined,
};

/**
 * The definition with every user function wrapped so that what it returns is checked and copied into plain
 * values once (a getter runs once; a Proxy is read once), with errors that name the function and the field.
 */
function guardDefinition(user: AnyDefinition): AnyDefinition {
  const systemPrompt = user.systemPrompt;
  const guarded: AnyDefinition = {
    ...user,
    systemPrompt:
      typeof systemPrompt === "function"
        ? (sample, agent) => expectString("systemPrompt", "its return value", apply(systemPrompt, user, [sample, agent]))
        : expectString("systemPrompt", "systemPrompt", systemPrompt),
    reset(context) {
      const result = user.reset(context);
      if (result === null || typeof result !== "object") {
        throw new ContractViolation("reset", `reset() must return { state, observation }; got ${describeValue(result)}`);
      }
      const { state, observation } = result as { state: unknown; observation: unknown };
      if (typeof observation !== "string") rejectPromise("reset", result);
      resetAnswer.state = state;
      resetAnswer.observation = expectString("reset", "observation", observation);
      return resetAnswer;
    },
    parseAction(text, state, agent) {
      const result = user.parseAction(text, state, agent);
      if (result === null || typeof result !== "object") {
        throw new ContractViolation("parseAction", `parseAction() must return { ok: true, action } or { ok: false, error }; got ${describeValue(result)}`);
      }
      const { ok, action, error } = result as { ok: unknown; action: unknown; error: unknown };
      if (ok === true) {
        parsedAction.action = action;
        return parsedAction;
      }
      if (ok === false) return { ok: false, error: expectString("parseAction", "error", error) };
      rejectPromise("parseAction", result);
      throw new ContractViolation("parseAction", `parseAction() returned ok ${describeValue(ok)}; ok must be true or false`);
    },
    step: checkedOutcome("step", user),
    toAct:
      typeof user.toAct === "function"
        ? (state) => {
            const agent = user.toAct!(state);
            if (typeof agent !== "string") throw new ContractViolation("toAct", `toAct() returned ${describeValue(agent)}; it must return an agent's name`);
            return agent;
          }
        : undefined,
    observe: typeof user.observe === "function" ? (state, agent) => expectString("observe", "its return value", user.observe!(state, agent)) : undefined,
    stepTogether: typeof user.stepTogether === "function" ? (checkedOutcome("stepTogether", user) as AnyDefinition["stepTogether"]) : undefined,
    render: typeof user.render === "function" ? (state) => expectString("render", "its return value", user.render!(state)) : undefined,
    tools: user.tools ? guardTools(user.tools) : undefined,
    rewardFunctions: user.rewardFunctions ? guardRewardFunctions(user.rewardFunctions) : undefined,
    score:
      typeof user.score === "function"
        ? (summary) => {
            const value = user.score!(summary);
            if (typeof value !== "number" || value - value !== 0) {
              throw new ContractViolation("score", `score() returned ${describeValue(value)}; a score must be a finite number`);
            }
            return value;
          }
        : undefined,
  };
  return guarded;
}

/**
 * The user's `step` (or `stepTogether`), guarded: its outcome checked and copied into `stepOutcome`: the reward (or the per-agent rewards, a
 * fresh object) finite, done a boolean, the observation text, info JSON, the metrics as pairs.
 */
function checkedOutcome(fn: "step" | "stepTogether", user: AnyDefinition): AnyDefinition["step"] {
  // The check is in the guard itself, not a function it calls: each call costs QuickJS a few tenths of a µs.
  return (state, action, context) => {
    const result = (user[fn] as AnyDefinition["step"])(state, action, context);
    if (result === null || typeof result !== "object") {
      throw new ContractViolation(fn, `${fn}() must return { state, reward, done, observation? }; got ${describeValue(result)}`);
    }
    const outcome = result as Record<string, unknown>;
    const { state: next, observation, reward, rewards, done, info, metrics } = outcome;
    // finite: x - x is 0 for every finite number, NaN for NaN and the infinities (cheaper than Number.isFinite)
    if ((reward !== undefined || (rewards === undefined && fn === "step")) && (typeof reward !== "number" || reward - reward !== 0)) {
      rejectPromise(fn, result);
      throw new ContractViolation(fn, `${fn}() returned reward ${describeValue(reward)}; reward must be a finite number`);
    }
    if (typeof done !== "boolean") {
      throw new ContractViolation(fn, `${fn}() returned done ${describeValue(done)}; done must be true or false`);
    }
    if (observation !== undefined && observation !== null && typeof observation !== "string") {
      throw new ContractViolation(fn, `${fn}() returned observation ${describeValue(observation)}; observation must be a string or left out`);
    }
    stepOutcome.rewards = rewards === undefined ? undefined : checkRewards(fn, rewards);
    stepOutcome.state = next;
    stepOutcome.observation = (observation ?? undefined) as string | undefined;
    stepOutcome.reward = reward as number | undefined;
    stepOutcome.done = done;
    stepOutcome.info = info === undefined ? undefined : checkInfo(info);
    stepOutcome.metrics = metrics === undefined ? undefined : (checkMetrics(metrics) as unknown as Record<string, number>);
    return stepOutcome;
  };
}

/** Per-agent rewards, read once into a fresh object of finite numbers (the SDK checks the agents' names). */
function checkRewards(fn: string, rewards: unknown): Record<string, number> {
  if (rewards === null || typeof rewards !== "object" || isArray(rewards)) {
    throw new ContractViolation(fn, `${fn}() returned rewards ${describeValue(rewards)}; rewards must be an object of numbers by agent, e.g. { X: 1, O: -1 }`);
  }
  const copy: Record<string, number> = {};
  const keys = objectKeys(rewards);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (isReservedKey(key)) throw new ContractViolation(fn, fn + "() returned rewards." + key + ": " + reservedKeyReason(key));
    const value = (rewards as Record<string, unknown>)[key];
    if (typeof value !== "number" || value - value !== 0) {
      throw new ContractViolation(fn, `${fn}() returned rewards.${key} ${describeValue(value)}; a reward must be a finite number`);
    }
    copy[key] = value;
  }
  return copy;
}

function guardTools(tools: NonNullable<AnyDefinition["tools"]>): NonNullable<AnyDefinition["tools"]> {
  const guarded: NonNullable<AnyDefinition["tools"]> = {};
  for (const name of objectKeys(tools)) {
    const tool = tools[name]!;
    guarded[name] = {
      description: StringOf(tool.description),
      run(args, state) {
        const answer = tool.run(args, state);
        if (typeof answer === "string") return answer;
        pendingViolation ??= new ContractViolation(`tools.${name}.run`, `tool '${name}' returned ${describeValue(answer)}; a tool must return a string`);
        return "";
      },
    };
  }
  return guarded;
}

function guardRewardFunctions(functions: NonNullable<AnyDefinition["rewardFunctions"]>): NonNullable<AnyDefinition["rewardFunctions"]> {
  const guarded: NonNullable<AnyDefinition["rewardFunctions"]> = {};
  for (const name of objectKeys(functions)) {
    // a reward function's name is a key of each episode's reward breakdown, which a run reports
    if (isReservedKey(name)) throw new ContractViolation(`rewardFunctions.${name}`, `rewardFunctions.${name}: ${reservedKeyReason(name)}`);
    const fn = functions[name]!;
    guarded[name] = (summary) => {
      const value = apply(fn, functions, [summary]);
      if (typeof value !== "number" || !isFiniteNumber(value)) {
        throw new ContractViolation(`rewardFunctions.${name}`, `reward function '${name}' returned ${describeValue(value)}; a reward must be a finite number`);
      }
      return value;
    };
  }
  return guarded;
}

/**
 * Called on the way to a contract error, so that an async function's Promise (which has none of the fields
 * expected) is named as such; a well-formed answer is not searched for a `then`.
 */
function rejectPromise(fn: string, value: object): void {
  if (typeof (value as { then?: unknown }).then === "function") {
    throw new ContractViolation(fn, `${fn}() returned a Promise; environment functions must be synchronous (no async/await)`);
  }
}

function expectString(fn: string, field: string, value: unknown): string {
  if (typeof value === "string") return value;
  const where =
    field === "its return value" ? `${fn}() returned ${describeValue(value)}` : `${fn === field ? "" : `${fn}() returned `}${field} ${describeValue(value)}`;
  throw new ContractViolation(fn, `${where}; ${field === "its return value" ? "it" : field} must be a string`);
}

/**
 * A step's metrics, read once and checked, as key-value pairs: the form they cross in (GuestStepWire), made
 * here instead of a copied object (QuickJS adds properties to a new object slowly, and serializes an object's
 * keys more slowly than an array's strings). The SDK passes a step's metrics through untouched, so the bridge
 * receives these pairs back in the outcome `advance` returns (and objects for the metrics the SDK makes itself).
 */
type MetricPairs = (string | number)[];

function checkMetrics(metrics: unknown): MetricPairs {
  if (metrics === null || typeof metrics !== "object" || isArray(metrics)) {
    throw new ContractViolation("step", `step() returned metrics ${describeValue(metrics)}; metrics must be an object of numbers`);
  }
  const pairs: MetricPairs = [];
  const keys = objectKeys(metrics);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (isReservedKey(key)) throw new ContractViolation("step", "step() returned metrics." + key + ": " + reservedKeyReason(key));
    const value = (metrics as Record<string, unknown>)[key];
    // finite: x - x is 0 for every finite number, NaN for NaN and the infinities (cheaper than Number.isFinite)
    if (typeof value !== "number" || value - value !== 0) {
      throw new ContractViolation("step", `step() returned metrics.${key} ${describeValue(value)}; metrics must be finite numbers`);
    }
    pairs.push(key, value);
  }
  return pairs;
}

function checkInfo(info: unknown): Record<string, Json> {
  if (info === null || typeof info !== "object" || isArray(info)) {
    throw new ContractViolation("step", `step() returned info ${describeValue(info)}; info must be an object of JSON values`);
  }
  return toJson(info, "info", 0) as Record<string, Json>;
}

/**
 * A plain copy of a JSON value; anything else (NaN, a function, a Map, a cycle) names its path. (Loops and `+`,
 * not map, for...of or template literals, which QuickJS runs several times slower.)
 */
function toJson(value: unknown, path: string, depth: number): Json {
  if (depth > 32) throw new ContractViolation("step", `step() returned ${path} nested deeper than 32 levels`);
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (isFiniteNumber(value)) return value;
    throw new ContractViolation("step", `step() returned ${path} ${describeValue(value)}; info values must be JSON (finite numbers)`);
  }
  if (isArray(value)) {
    const copy: Json[] = [];
    for (let i = 0; i < value.length; i++) copy.push(toJson(value[i], path + "[" + i + "]", depth + 1));
    return copy;
  }
  if (typeof value === "object" && (getPrototypeOf(value) === Object.prototype || getPrototypeOf(value) === null)) {
    const copy: Record<string, Json> = {};
    const keys = objectKeys(value);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      // refused rather than carried: a run could not report it (and a "__proto__" assigned would set the prototype)
      if (isReservedKey(key)) throw new ContractViolation("step", "step() returned " + path + "." + key + ": " + reservedKeyReason(key));
      copy[key] = toJson((value as Record<string, unknown>)[key], path + "." + key, depth + 1);
    }
    return copy;
  }
  throw new ContractViolation("step", `step() returned ${path} ${describeValue(value)}; info values must be JSON`);
}

function describeValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return `${stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)} (a string)`;
    case "number":
      return `${StringOf(value)}${isFiniteNumber(value) ? " (a number)" : ""}`;
    case "boolean":
      return `${StringOf(value)} (a boolean)`;
    case "undefined":
      return "undefined";
    case "function":
      return "a function";
    case "bigint":
      return `${StringOf(value)}n (a bigint)`;
    case "symbol":
      return "a symbol";
    default:
      return value === null ? "null" : isArray(value) ? "an array" : "an object";
  }
}

function describeFailure(error: unknown): GuestFailure {
  try {
    if (error instanceof ContractViolation || error instanceof EnvironmentContractError)
      return { kind: "contract", name: error.name, message: error.message, fn: error.fn };
    if (error instanceof SizeViolation) {
      return { kind: "limit", name: error.name, message: error.message, what: error.what, length: error.length };
    }
    if (error instanceof Error) {
      const stack = typeof error.stack === "string" ? error.stack.slice(0, 4_000) : undefined;
      return { kind: "runtime", name: StringOf(error.name).slice(0, 100), message: StringOf(error.message).slice(0, 2_000), stack };
    }
    return { kind: "runtime", name: "NonErrorThrown", message: `threw a non-Error value: ${describeValue(error)}` };
  } catch {
    return { kind: "runtime", name: "NonErrorThrown", message: "threw a value that could not be described (reading it threw)" };
  }
}

// ---- the realm ----

/**
 * Nothing in QuickJS reaches the host, so eval and the Function constructor cannot escape; they are removed
 * anyway, so code that relies on them fails here as it would under a strict content security policy.
 */
function hardenRealm(): void {
  // biome-ignore lint/suspicious/noShadowRestrictedNames: the stand-in is named as what it replaces, for stack traces
  const blocked = function Function() {
    throw new EvalError("code generation (eval, new Function) is disabled in the sandbox");
  };
  const prototypes = [Function.prototype, getPrototypeOf(async function () {}), getPrototypeOf(function* () {}), getPrototypeOf(async function* () {})];
  defineProperty(blocked, "prototype", { value: Function.prototype });
  for (const prototype of prototypes) defineProperty(prototype, "constructor", { value: blocked, writable: false, configurable: false });
  defineProperty(global, "Function", { value: blocked, writable: false, configurable: false });
  delete global.eval;
  // Reproducible randomness comes from the episode's `rng`; Math.random is seeded too so that runs replay.
  const fallback = new Rng(0x5eed);
  defineProperty(Math, "random", { value: () => fallback.uniform(), writable: false, configurable: false });
}

/** console.* collects up to 200 lines, returned by validate() and shown in the editor. */
function installConsole(): void {
  const write =
    (level: string) =>
    (...args: unknown[]) => {
      if (logs.length >= 200) return;
      const parts = args.map((arg) => {
        if (typeof arg === "string") return arg;
        try {
          return stringify(arg) ?? StringOf(arg);
        } catch {
          return describeValue(arg);
        }
      });
      const line = `${level === "log" ? "" : `[${level}] `}${parts.join(" ")}`;
      logs.push(line.length > 1_000 ? `${line.slice(0, 1_000)}…` : line);
    };
  global.console = { log: write("log"), info: write("info"), warn: write("warn"), error: write("error"), debug: write("debug") };
}
