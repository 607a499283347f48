/**
 * The guest half of the sandbox: bundled with the user's files and evaluated inside QuickJS before them. It
 * hardens the realm, holds one `EnvironmentSession` per slot, and answers ops (reset, step, render, summary,
 * score): the sandbox's thread hands it a crossing's batch of ops as one JSON string (`begin`), then calls `next`
 * once per op, which answers that op with one JSON string.
 *
 * It also checks what the user's functions return (the contract) where the SDK would silently coerce: a reward
 * "1" or NaN, a done of 1, an async step. The host checks every answer again; this half only makes the errors
 * precise (it knows which function and which field) and keeps oversized values from being serialized at all.
 */
import { type DatasetRow, type EnvironmentDefinition, type Json, EnvironmentSession, defineEnvironment } from "@/lib/sdk/environment";
import { Rng } from "@/lib/model/rng";
import type { EnvironmentDescription, GuestEpisodeEndWire, GuestFailure, GuestOp, GuestResetWire, GuestStepWire, GuestSummaryWire } from "../wire";

type AnyDefinition = EnvironmentDefinition<unknown, unknown, DatasetRow>;
type Register = (begin: (request: string) => void, next: () => string) => void;

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
/** The batch being answered, and the index of its next op. */
let batch: GuestOp[] = [];
let cursor = 0;

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
    exportName,
  };
  register(begin, next);
}

/** Takes a crossing's ops (the host's JSON text, parsed once for the whole batch). */
function begin(request: string): void {
  batch = parseJson(request) as GuestOp[];
  cursor = 0;
}

/** Runs the batch's next op; its result (`[true, value]` or `[false, failure]`) as JSON text. */
function next(): string {
  const op = batch[cursor++]!;
  try {
    pendingViolation = null;
    const value = answer(op);
    if (pendingViolation) throw pendingViolation;
    return "[true," + value + "]";
  } catch (error) {
    return stringify([false, describeFailure(error)]);
  }
}

/**
 * An op's value as JSON text, from one JSON.stringify call: in QuickJS each call has a high fixed cost (~1-1.5 µs,
 * as much as a small object inside it), so the answer is one array, not fields serialized one by one.
 */
function answer(op: GuestOp): string {
  switch (op[0]) {
    case "configure":
      maxChars = op[1];
      return "null";
    case "describe":
      return stringify(description);
    case "logs":
      return stringify(logs.splice(0, logs.length));
    case "reset": {
      const session = (sessions[op[1]] ??= new EnvironmentSession(definition!));
      const observation = checkSize("observation", session.reset(op[2], op[3] ?? undefined));
      const render = checkSize("render", session.render() ?? null);
      const value: GuestResetWire = [observation, checkSize("systemPrompt", session.systemPrompt), render !== null && render === observation ? true : render];
      return stringify(value);
    }
    case "step": {
      const session = sessionAt(op[1]);
      const step = session.step(op[2]);
      const observation = checkSize("observation", step.observation);
      const render = checkSize("render", session.render() ?? null);
      const value: GuestStepWire = [
        observation,
        step.reward,
        step.done,
        step.info,
        step.metrics,
        render !== null && render === observation ? true : render,
        step.done ? episodeEnd(session) : null,
      ];
      const text = stringify(value);
      // A value whose whole answer fits the limit has no field over it; info, the one field not checked yet, is
      // serialized alone only when the whole is over it.
      if (text.length > maxChars) checkJsonSize("info", step.info);
      return text;
    }
    case "render":
      return stringify(checkSize("render", sessionAt(op[1]).render() ?? null));
    case "summary": {
      const session = sessionAt(op[1]);
      const { state, turns, totalReward, done, truncated, invalidActions } = session.summary();
      const value: GuestSummaryWire = { turns, totalReward, done, truncated, invalidActions, breakdown: session.rewardBreakdown(), stateJson: stateAsJson(state) };
      return stringify(value);
    }
    case "score":
      return stringify(sessionAt(op[1]).score());
  }
}

function sessionAt(slot: number) {
  const session = sessions[slot];
  if (!session) throw new Error(`slot ${slot} has no episode; reset it first`);
  return session;
}

/**
 * The final state is left out (see GuestEpisodeEnd): the host asks for it only when it is read. So is the reward
 * breakdown when there are no reward functions (it is then `{ env: totalReward }`, the same sums in the same order).
 */
function episodeEnd(session: EnvironmentSession<unknown, unknown, DatasetRow>): GuestEpisodeEndWire {
  const summary = session.summary();
  const breakdown = breakdownIsTotal ? null : session.rewardBreakdown();
  return [summary.turns, summary.totalReward, summary.truncated, summary.invalidActions, session.score(), breakdown];
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

function checkJsonSize(what: string, value: unknown): void {
  const text = stringify(value);
  if (text.length > maxChars) throw new SizeViolation(`${what} as JSON`, text.length);
}

// ---- finding and guarding the user's definition ----

function isDefinitionLike(value: unknown): boolean {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof (value as AnyDefinition).reset === "function" &&
    typeof (value as AnyDefinition).step === "function"
  );
}

function findDefinition(userModule: Record<string, unknown>): { exportName: string; value: unknown } {
  if (isDefinitionLike(userModule.default)) return { exportName: "default", value: userModule.default };
  const named = objectKeys(userModule).filter((key) => key !== "default" && isDefinitionLike(userModule[key]));
  if (named.length === 1) return { exportName: named[0]!, value: userModule[named[0]!] };
  if (named.length === 0) {
    throw new ContractViolation(
      "module",
      "the entry file exports no environment; write `export default defineEnvironment({ ... })`",
    );
  }
  throw new ContractViolation(
    "module",
    `the entry file exports several environments (${named.join(", ")}); make the one to run the default export`,
  );
}

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
        ? (sample) => expectString("systemPrompt", "its return value", apply(systemPrompt, user, [sample]))
        : expectString("systemPrompt", "systemPrompt", systemPrompt),
    reset(context) {
      const result = user.reset(context);
      if (result === null || typeof result !== "object") {
        throw new ContractViolation("reset", `reset() must return { state, observation }; got ${describeValue(result)}`);
      }
      const { state, observation } = result as { state: unknown; observation: unknown };
      if (typeof observation !== "string") rejectPromise("reset", result);
      return { state, observation: expectString("reset", "observation", observation) };
    },
    parseAction(text, state) {
      const result = user.parseAction(text, state);
      if (result === null || typeof result !== "object") {
        throw new ContractViolation(
          "parseAction",
          `parseAction() must return { ok: true, action } or { ok: false, error }; got ${describeValue(result)}`,
        );
      }
      const { ok, action, error } = result as { ok: unknown; action: unknown; error: unknown };
      if (ok === true) return { ok: true, action };
      if (ok === false) return { ok: false, error: expectString("parseAction", "error", error) };
      rejectPromise("parseAction", result);
      throw new ContractViolation("parseAction", `parseAction() returned ok ${describeValue(ok)}; ok must be true or false`);
    },
    step(state, action, context) {
      const result = user.step(state, action, context);
      if (result === null || typeof result !== "object") {
        throw new ContractViolation("step", `step() must return { state, reward, done, observation? }; got ${describeValue(result)}`);
      }
      const outcome = result as Record<string, unknown>;
      const { state: next, observation, reward, done, info, metrics } = outcome;
      if (typeof reward !== "number" || !isFiniteNumber(reward)) {
        rejectPromise("step", result);
        throw new ContractViolation("step", `step() returned reward ${describeValue(reward)}; reward must be a finite number`);
      }
      if (typeof done !== "boolean") {
        throw new ContractViolation("step", `step() returned done ${describeValue(done)}; done must be true or false`);
      }
      if (observation !== undefined && observation !== null && typeof observation !== "string") {
        throw new ContractViolation(
          "step",
          `step() returned observation ${describeValue(observation)}; observation must be a string or left out`,
        );
      }
      return {
        state: next,
        observation: (observation ?? undefined) as string | undefined,
        reward,
        done,
        info: info === undefined ? undefined : checkInfo(info),
        metrics: metrics === undefined ? undefined : checkMetrics(metrics),
      };
    },
    render:
      typeof user.render === "function"
        ? (state) => expectString("render", "its return value", user.render!(state))
        : undefined,
    tools: user.tools ? guardTools(user.tools) : undefined,
    rewardFunctions: user.rewardFunctions ? guardRewardFunctions(user.rewardFunctions) : undefined,
    score:
      typeof user.score === "function"
        ? (summary) => {
            const value = user.score!(summary);
            if (typeof value !== "number" || !isFiniteNumber(value)) {
              throw new ContractViolation("score", `score() returned ${describeValue(value)}; a score must be a finite number`);
            }
            return value;
          }
        : undefined,
  };
  return guarded;
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
        pendingViolation ??= new ContractViolation(
          `tools.${name}.run`,
          `tool '${name}' returned ${describeValue(answer)}; a tool must return a string`,
        );
        return "";
      },
    };
  }
  return guarded;
}

function guardRewardFunctions(functions: NonNullable<AnyDefinition["rewardFunctions"]>): NonNullable<AnyDefinition["rewardFunctions"]> {
  const guarded: NonNullable<AnyDefinition["rewardFunctions"]> = {};
  for (const name of objectKeys(functions)) {
    const fn = functions[name]!;
    guarded[name] = (summary) => {
      const value = apply(fn, functions, [summary]);
      if (typeof value !== "number" || !isFiniteNumber(value)) {
        throw new ContractViolation(
          `rewardFunctions.${name}`,
          `reward function '${name}' returned ${describeValue(value)}; a reward must be a finite number`,
        );
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
  const where = field === "its return value" ? `${fn}() returned ${describeValue(value)}` : `${fn === field ? "" : `${fn}() returned `}${field} ${describeValue(value)}`;
  throw new ContractViolation(fn, `${where}; ${field === "its return value" ? "it" : field} must be a string`);
}

function checkMetrics(metrics: unknown): Record<string, number> {
  if (metrics === null || typeof metrics !== "object" || isArray(metrics)) {
    throw new ContractViolation("step", `step() returned metrics ${describeValue(metrics)}; metrics must be an object of numbers`);
  }
  const copy: Record<string, number> = {};
  const keys = objectKeys(metrics);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const value = (metrics as Record<string, unknown>)[key];
    if (typeof value !== "number" || !isFiniteNumber(value)) {
      throw new ContractViolation("step", `step() returned metrics.${key} ${describeValue(value)}; metrics must be finite numbers`);
    }
    setData(copy, key, value);
  }
  return copy;
}

/** Sets a copy's property as plain data: a key "__proto__" stays a key (assigning it would set the prototype). */
function setData<T>(copy: Record<string, T>, key: string, value: T): void {
  if (key === "__proto__") defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true });
  else copy[key] = value;
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
      setData(copy, key, toJson((value as Record<string, unknown>)[key], path + "." + key, depth + 1));
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
    if (error instanceof ContractViolation) return { kind: "contract", name: error.name, message: error.message, fn: error.fn };
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
  const blocked = function Function() {
    throw new EvalError("code generation (eval, new Function) is disabled in the sandbox");
  };
  const prototypes = [
    Function.prototype,
    getPrototypeOf(async function () {}),
    getPrototypeOf(function* () {}),
    getPrototypeOf(async function* () {}),
  ];
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
