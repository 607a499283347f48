/**
 * Environments: what an agent sees, what it may do, and what it earns.
 *
 * A user describes an environment as pure functions of an explicit state (`reset`, `parseAction`, `step`,
 * `render`), so the runtime can run many episodes side by side, in the sandbox or natively, and replay any of
 * them from its seed. `EnvironmentSession` wraps a definition into the gym-like object the protocols drive:
 * `reset(seed, sample?)` → first observation, `step(actionText)` → { observation, reward, done, info, metrics }.
 */
import { Rng } from "@/lib/model/rng";
import { ActionAutomaton, checkActionList, type ActionConstraint } from "./action-space";

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

export type ParseResult<Action> = { ok: true; action: Action } | { ok: false; error: string };

export type StepOutcome<State> = {
  state: State;
  /** What the agent sees next; omitted when the episode is done. */
  observation?: string;
  reward: number;
  done: boolean;
  info?: Record<string, Json>;
  /** Numbers summed over each episode, then averaged over episodes into the run's env/NAME metrics, e.g. {won: 1}. */
  metrics?: Record<string, number>;
};

export type Tool<State> = {
  description: string;
  /** The tool's answer, shown to the agent as the next observation. Throwing an Error answers `error: <its message>`. */
  run(args: string, state: State): string;
};

export type DatasetRow = Record<string, string | number | boolean | null>;

export type EnvironmentDefinition<State, Action, Sample extends DatasetRow = DatasetRow> = {
  name: string;
  description?: string;
  /** "free": the environment makes its own problems from the seed; "dataset": it reads one row per episode. */
  data: { kind: "free" } | { kind: "dataset"; dataset: string };
  systemPrompt: string | ((sample: Sample | undefined) => string);
  /**
   * Turns before the episode is cut off (tool calls and invalid actions count as turns). A cut-off episode is done
   * and marked truncated; its reward functions still run.
   */
  maxTurns: number;
  /** What an unparseable action costs, and whether the episode goes on after one. */
  invalidAction?: { penalty: number; endEpisode: boolean };
  /** Added to every step's reward, tool calls and invalid actions included: a number ≤ 0, e.g. -0.01 for a text world. */
  stepCost?: number;
  /**
   * Levels of difficulty, whole numbers from `min` to `max` (see Difficulty): the RL trainer keeps drawing
   * episodes at the level where the policy succeeds sometimes but not always, and `reset` receives the level.
   */
  difficulty?: Difficulty;
  /**
   * Starts an episode. `difficulty` is the episode's level when the environment declares `difficulty` (training
   * picks it; evaluation and every other episode play `difficulty.evaluation ?? difficulty.max`), else undefined.
   */
  reset(context: { seed: number; rng: Rng; sample?: Sample; difficulty?: number }): { state: State; observation: string };
  parseAction(text: string, state: State): ParseResult<Action>;
  step(state: State, action: Action, context: { rng: Rng }): StepOutcome<State>;
  /** The environment's own picture of the state (a board), shown in the trajectory viewer. */
  render?(state: State): string;
  /**
   * The legal actions: a list, a function of the state, or a pattern the whole action matches (literals, `.`,
   * classes like `[a-z]` or `[^,]`, `\d \w \s`, groups `( )` and `(?: )`, `|`, `* + ? {n,m}`). Sampling is
   * constrained to them, so the policy cannot write an invalid action as long as agent.sampling.maxTokens covers the
   * longest one (plus its end); tool calls stay allowed.
   */
  actions?: readonly string[] | ((state: State) => readonly string[]) | { pattern: string };
  /**
   * A demonstrator: the action a good player writes in this state. An SFT run with data 'demonstrator' imitates
   * it, and validation's dry run plays it so that a step() failing on real actions is caught before launch.
   */
  demonstrate?(state: State): string;
  /** Tools the agent may call with `@name(args)`; the answer comes back as the next observation. */
  tools?: Record<string, Tool<State>>;
  /**
   * Extra reward functions, scored once on the finished episode and added to its last step's reward. Each is
   * reported apart (reward/NAME) beside the environment's own step rewards (reward/env).
   */
  rewardFunctions?: Record<string, (summary: EpisodeSummary<State>) => number>;
  /** The headline score of a finished episode for evaluation (e.g. accuracy: 1 if solved). */
  score?(summary: EpisodeSummary<State>): number;
  /** Name of the score, e.g. "accuracy", "solved", "win_rate". */
  scoreName?: string;
};

/**
 * An environment's levels: whole numbers from `min` to `max`. Training starts at `start` (default `min`);
 * evaluation plays `evaluation` (default `max`), so the held-out score measures the whole task.
 */
export type Difficulty = { min: number; max: number; start?: number; evaluation?: number };

const difficultyFields = ["min", "max", "start", "evaluation"] as const;

/**
 * What is wrong with a `difficulty` declaration, one message per field (empty when it is right): the SDK's check,
 * and the sandbox host's of what the guest reports.
 */
export function difficultyProblems(value: unknown): string[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return [`difficulty must be an object { min, max, start?, evaluation? } of whole numbers; got ${describe(value)}`];
  }
  const record = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(record)) {
    if (!(difficultyFields as readonly string[]).includes(key))
      problems.push(`difficulty.${key} is not a field of difficulty; its fields are min, max, start, evaluation`);
  }
  const whole = (key: (typeof difficultyFields)[number], optional: boolean): number | null => {
    const field = record[key];
    if (field === undefined && optional) return null;
    if (typeof field !== "number" || !Number.isSafeInteger(field) || field < 0 || field > 1_000_000) {
      problems.push(`difficulty.${key} must be a whole number from 0 to 1000000${optional ? " or left out" : ""}; got ${describe(field)}`);
      return null;
    }
    return field;
  };
  const min = whole("min", false);
  const max = whole("max", false);
  if (min !== null && max !== null && min > max) problems.push(`difficulty.max must be at least difficulty.min (${min}); got ${max}`);
  for (const key of ["start", "evaluation"] as const) {
    const level = whole(key, true);
    if (level !== null && min !== null && max !== null && min <= max && (level < min || level > max)) {
      problems.push(`difficulty.${key} must be a level from difficulty.min to difficulty.max (${min} to ${max}); got ${level}`);
    }
  }
  return problems;
}

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

export type EpisodeSummary<State> = {
  state: State;
  turns: number;
  totalReward: number;
  done: boolean;
  truncated: boolean;
  invalidActions: number;
};

const TOOL_CALL = /^\s*@([A-Za-z_][A-Za-z0-9_]*)\((.*)\)\s*$/s;

/** Checks a definition once, at the point it is made, so a mistake names the field instead of failing mid-run. */
export function defineEnvironment<State, Action, Sample extends DatasetRow = DatasetRow>(
  definition: EnvironmentDefinition<State, Action, Sample>,
): EnvironmentDefinition<State, Action, Sample> {
  const problems: string[] = [];
  if (typeof definition.name !== "string" || !/^[a-z0-9][a-z0-9-]{0,63}$/.test(definition.name)) {
    problems.push(`name must be 1-64 lowercase letters, digits or '-'; got ${JSON.stringify(definition.name)}`);
  }
  if (!Number.isInteger(definition.maxTurns) || definition.maxTurns < 1 || definition.maxTurns > 1000) {
    problems.push(`maxTurns must be a whole number from 1 to 1000; got ${String(definition.maxTurns)}`);
  }
  for (const fn of ["reset", "parseAction", "step"] as const) {
    if (typeof definition[fn] !== "function") problems.push(`${fn} must be a function`);
  }
  if (definition.demonstrate !== undefined && typeof definition.demonstrate !== "function") problems.push("demonstrate must be a function of the state");
  if (definition.invalidAction && !Number.isFinite(definition.invalidAction.penalty)) {
    problems.push(`invalidAction.penalty must be a finite number; got ${String(definition.invalidAction.penalty)}`);
  }
  if (definition.stepCost !== undefined && (!Number.isFinite(definition.stepCost) || definition.stepCost > 0)) {
    problems.push(`stepCost must be a finite number ≤ 0; got ${String(definition.stepCost)}`);
  }
  if (definition.difficulty !== undefined) problems.push(...difficultyProblems(definition.difficulty));
  const actions = definition.actions;
  if (actions !== undefined && typeof actions !== "function") {
    try {
      new ActionAutomaton(Array.isArray(actions) ? { actions: [...actions] } : { pattern: (actions as { pattern: string }).pattern });
    } catch (error) {
      problems.push(`actions: ${(error as Error).message}`);
    }
  }
  if (problems.length) throw new Error(`defineEnvironment: ${problems.join("; ")}`);
  return definition;
}

/** A literal's text as a pattern (lib/sdk/action-space.ts): every special character escaped. */
export function escapePattern(text: string): string {
  return text.replace(/[\\.^$|?*+()[\]{}\-\/]/g, (c) => `\\${c}`);
}

/**
 * The constraint of a turn in `state`: the definition's actions, with its tools' calls (`@name(…)`) beside them.
 * Null when the definition declares no actions.
 */
export function legalActionsOf<State>(definition: EnvironmentDefinition<State, unknown, any>, state: State): ActionConstraint | null {
  const declared = definition.actions;
  if (declared === undefined) return null;
  let constraint: ActionConstraint;
  if (typeof declared === "function") constraint = { actions: checkActionList(declared(state), "actions(state)") };
  else if (Array.isArray(declared)) constraint = { actions: [...declared] };
  else constraint = { pattern: (declared as { pattern: string }).pattern };
  const tools = Object.keys(definition.tools ?? {});
  if (tools.length === 0) return constraint;
  const own = "pattern" in constraint ? `(?:${constraint.pattern})` : constraint.actions.map(escapePattern).join("|");
  return { pattern: `${own}|@(?:${tools.join("|")})\\(.*\\)` };
}

export type SessionStep = {
  observation: string | null;
  reward: number;
  done: boolean;
  info: Record<string, Json>;
  metrics: Record<string, number>;
};

/**
 * @internal What a session keeps of its episode, read from its private fields by name (so a field renamed here
 * fails to compile): the sandbox's bridge reads them after `advance` (`session as unknown as SessionFields`)
 * instead of through a summary or getters, since QuickJS takes ~0.5-1 µs to make an object and ~0.1 µs a call
 * (test/unit/sandbox checks the two agree).
 */
export type SessionFields = Readonly<{
  finished: EnvironmentSession["finished"];
  truncated: EnvironmentSession["truncated"];
  stepReward: EnvironmentSession["stepReward"];
  turn: EnvironmentSession["turn"];
  total: EnvironmentSession["total"];
  invalid: EnvironmentSession["invalid"];
}>;

/** One episode at a time of one environment: the object a protocol drives. */
export class EnvironmentSession<State = unknown, Action = unknown, Sample extends DatasetRow = DatasetRow> {
  private state: State | undefined;
  private rng = new Rng(0);
  private turn = 0;
  private total = 0;
  private invalid = 0;
  private finished = true;
  private truncated = false;
  /** The last step's reward, with the step cost and, at the episode's end, the reward functions. */
  private stepReward = 0;
  private breakdown: Record<string, number> = { env: 0 };
  /** The latest valid observation: an invalid action's answer repeats it, so agents that see only it keep the state. */
  private lastObservation = "";
  sample: Sample | undefined;

  constructor(readonly definition: EnvironmentDefinition<State, Action, Sample>) {}

  get systemPrompt(): string {
    const prompt = this.definition.systemPrompt;
    return typeof prompt === "function" ? prompt(this.sample) : prompt;
  }

  /**
   * Starts an episode; the same seed (sample and level) always gives the same episode. `difficulty`, the level,
   * counts only for an environment that declares `difficulty`; left out, the episode plays its evaluation level.
   */
  reset(seed: number, sample?: Sample, difficulty?: number): string {
    // The same draws as a new Rng(seed); reseeding the session's own costs less in the sandbox's interpreter.
    Rng.reseed(this.rng, seed);
    this.sample = sample;
    const { state, observation } = this.definition.reset({ seed, rng: this.rng, sample, difficulty: this.levelOf(difficulty) });
    this.state = state;
    this.turn = 0;
    this.total = 0;
    this.invalid = 0;
    this.finished = false;
    this.truncated = false;
    // Never handed out (rewardBreakdown copies it): zeroed in place unless reward functions added their keys.
    if (this.definition.rewardFunctions) this.breakdown = { env: 0 };
    else this.breakdown.env = 0;
    this.lastObservation = observation;
    return observation;
  }

  /** The level an episode plays: the one asked for, else the evaluation level; undefined without `difficulty`. */
  private levelOf(difficulty: number | undefined): number | undefined {
    const declared = this.definition.difficulty;
    if (!declared) return undefined;
    if (difficulty === undefined || difficulty === null) return declared.evaluation ?? declared.max;
    if (!Number.isInteger(difficulty) || difficulty < declared.min || difficulty > declared.max) {
      throw new Error(`difficulty ${String(difficulty)} is not a level of environment '${this.definition.name}' (${declared.min} to ${declared.max})`);
    }
    return difficulty;
  }

  /** Applies the agent's action text: a tool call, an invalid action, or an action the environment steps on. */
  step(actionText: string): SessionStep {
    const outcome = this.advance(actionText);
    const done = this.finished;
    return {
      observation: done ? null : (outcome.observation ?? ""),
      reward: this.stepReward,
      done,
      info: this.truncated ? { ...outcome.info, truncated: true } : { ...outcome.info },
      metrics: outcome.metrics ?? {},
    };
  }

  /**
   * @internal `step` without its answer, for a host that reads only what it needs (the sandbox's bridge, where QuickJS
   * takes ~0.5-1 µs an object): the action applied, and what the environment or the SDK answered it with, as is
   * (its info and metrics may be left out, and the episode's truncation is not in its info). The step's reward
   * with the step cost and, at the end, the reward functions, whether the episode ended and the episode's counts
   * are the session's fields (`SessionFields`).
   */
  advance(actionText: string): Omit<StepOutcome<State>, "state"> {
    if (this.finished || this.state === undefined) throw new Error("step() called on a finished episode; call reset() first");
    this.turn += 1;
    const outcome = this.resolve(actionText);
    if (outcome.info?.invalid === undefined && outcome.observation !== undefined) this.lastObservation = outcome.observation;
    const stepCost = this.definition.stepCost ?? 0;
    let { reward, done } = outcome;
    reward += stepCost;
    if (!done && this.turn >= this.definition.maxTurns) {
      done = true;
      this.truncated = true;
    }
    this.breakdown.env! += reward;
    this.total += reward;
    this.finished = done;
    if (done && this.definition.rewardFunctions) {
      const summary = this.summary();
      for (const [name, fn] of Object.entries(this.definition.rewardFunctions)) {
        const value = fn(summary);
        if (!Number.isFinite(value)) throw new Error(`reward function '${name}' returned ${value}; it must return a finite number`);
        this.breakdown[name] = value;
        reward += value;
        this.total += value;
      }
    }
    this.stepReward = reward;
    return outcome;
  }

  private resolve(actionText: string): Omit<StepOutcome<State>, "state"> {
    const state = this.state as State;
    const toolCall = this.definition.tools ? TOOL_CALL.exec(actionText) : null;
    if (toolCall) {
      const [, name, args] = toolCall;
      const tool = this.definition.tools![name!];
      if (!tool) {
        return this.invalidAction(`unknown tool '${name}'; tools: ${Object.keys(this.definition.tools!).join(", ")}`);
      }
      let answer: string;
      try {
        answer = tool.run(args!, state);
      } catch (error) {
        answer = `error: ${error instanceof Error ? error.message : String(error)}`;
      }
      return { observation: answer, reward: 0, done: false, info: { tool: name!, args: args! }, metrics: { tool_calls: 1 } };
    }
    const parsed = this.definition.parseAction(actionText, state);
    if (!parsed.ok) return this.invalidAction(parsed.error);
    const outcome = this.definition.step(state, parsed.action, { rng: this.rng });
    this.state = outcome.state;
    return outcome;
  }

  private invalidAction(error: string): Omit<StepOutcome<State>, "state"> {
    this.invalid += 1;
    const rule = this.definition.invalidAction ?? { penalty: -1, endEpisode: true };
    return {
      observation: `Invalid action: ${error}\n${this.lastObservation}`,
      reward: rule.penalty,
      done: rule.endEpisode,
      info: { invalid: error },
      metrics: { invalid_action: 1 },
    };
  }

  render(): string | undefined {
    return this.state !== undefined && this.definition.render ? this.definition.render(this.state) : undefined;
  }

  /** The demonstrator's action in the current state (null without a demonstrator, or once the episode is over). */
  demonstrate(): string | null {
    if (this.state === undefined || this.finished || !this.definition.demonstrate) return null;
    const action = this.definition.demonstrate(this.state);
    if (typeof action !== "string") throw new Error(`demonstrate() returned ${typeof action}; it must return the action's text`);
    return action;
  }

  /** The legal actions of the next turn (null when the environment declares none, or the episode is over). */
  legalActions(): ActionConstraint | null {
    if (this.state === undefined || this.finished) return null;
    return legalActionsOf(this.definition as EnvironmentDefinition<State, unknown, any>, this.state);
  }

  /** The episode's return so far, by reward function: "env" for the step rewards, then each extra function. */
  rewardBreakdown(): Record<string, number> {
    return { ...this.breakdown };
  }

  /** Invalid actions in this episode so far (what `summary().invalidActions` says, without making a summary). */
  get invalidActions(): number {
    return this.invalid;
  }

  summary(): EpisodeSummary<State> {
    if (this.state === undefined) throw new Error("summary() before reset()");
    return {
      state: this.state,
      turns: this.turn,
      totalReward: this.total,
      done: this.finished,
      truncated: this.truncated,
      invalidActions: this.invalid,
    };
  }

  /** The episode's headline score: the definition's own, else 1 when the return is positive. */
  score(): number {
    if (this.state === undefined) throw new Error("score() before reset()");
    // no summary is made when the definition has no score of its own
    return this.definition.score ? this.definition.score(this.summary()) : this.total > 0 ? 1 : 0;
  }
}
