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
  /** This step's reward (a finite number), the acting agent's; may be left out when `rewards` is given. */
  reward?: number;
  /**
   * Each agent's reward from this step, under a protocol with several agents: `{ X: 1, O: -1 }` for a zero-sum win,
   * the same number for every agent when they cooperate. The acting agent's own reward is then `rewards[agent] ?? 0`.
   */
  rewards?: Record<string, number>;
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
  /** The system message every episode starts with; a function of the dataset row and, with several agents, of the agent (its role). */
  systemPrompt: string | ((sample: Sample | undefined, agent: string) => string);
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
  /** Turns the text of `agent` (the acting agent) into an action, or says why it cannot. */
  parseAction(text: string, state: State, agent: string): ParseResult<Action>;
  /** Applies the acting agent's action (turn-based protocols: `agent` is who acted). */
  step(state: State, action: Action, context: { rng: Rng; agent: string }): StepOutcome<State>;
  /**
   * Who acts next under a turn-based protocol: one of the protocol's agents. Left out, the agents act in the
   * protocol's order.
   */
  toAct?(state: State): string;
  /**
   * What `agent` sees now, under a protocol with several agents (hidden cards, a target only one of them knows).
   * Left out, every agent sees the step's `observation`.
   */
  observe?(state: State, agent: string): string;
  /**
   * The simultaneous protocol's step: every agent's action of the round at once (each parsed with
   * `parseAction(text, state, agent)`), applied in one move. Its outcome gives each agent's reward in `rewards`.
   */
  stepTogether?(state: State, actions: Record<string, Action>, context: { rng: Rng }): StepOutcome<State>;
  /** The environment's own picture of the state (a board), shown in the trajectory viewer. */
  render?(state: State): string;
  /**
   * The legal actions: a list, a function of the state, or a pattern the whole action matches (literals, `.`,
   * classes like `[a-z]` or `[^,]`, `\d \w \s`, groups `( )` and `(?: )`, `|`, `* + ? {n,m}`). Sampling is
   * constrained to them, so the policy cannot write an invalid action as long as agent.sampling.maxTokens covers the
   * longest one (plus its end); tool calls stay allowed.
   */
  actions?: readonly string[] | ((state: State, agent: string) => readonly string[]) | { pattern: string };
  /**
   * A demonstrator: the action a good player writes in this state. An SFT run with data 'demonstrator' imitates
   * it, and validation's dry run plays it so that a step() failing on real actions is caught before launch.
   */
  demonstrate?(state: State, agent: string): string;
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
  for (const fn of ["toAct", "observe", "stepTogether"] as const) {
    if (definition[fn] !== undefined && typeof definition[fn] !== "function") problems.push(`${fn} must be a function or left out`);
  }
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
 * The constraint of `agent`'s turn in `state`: the definition's actions, with its tools' calls (`@name(…)`) beside
 * them (not in a simultaneous round, which has no tools). Null when the definition declares no actions.
 */
export function legalActionsOf<State>(
  definition: EnvironmentDefinition<State, unknown, any>,
  state: State,
  agent = defaultAgent,
  withTools = true,
): ActionConstraint | null {
  const declared = definition.actions;
  if (declared === undefined) return null;
  let constraint: ActionConstraint;
  if (typeof declared === "function") constraint = { actions: checkActionList(declared(state, agent), "actions(state)") };
  else if (Array.isArray(declared)) constraint = { actions: [...declared] };
  else constraint = { pattern: (declared as { pattern: string }).pattern };
  const tools = withTools ? Object.keys(definition.tools ?? {}) : [];
  if (tools.length === 0) return constraint;
  const own = "pattern" in constraint ? `(?:${constraint.pattern})` : constraint.actions.map(escapePattern).join("|");
  return { pattern: `${own}|@(?:${tools.join("|")})\\(.*\\)` };
}

/**
 * A user function's answer that breaks the SDK's contract (a `toAct` naming no agent of the protocol, a reward for
 * an unknown agent): `fn` names the function, so the sandbox can point at it.
 */
export class EnvironmentContractError extends Error {
  constructor(
    readonly fn: string,
    message: string,
  ) {
    super(message);
    this.name = "ContractError";
  }
}

/** Who plays an episode: the protocol's agents, in order, and whether they act at once (the simultaneous protocol). */
export type Seats = { agents: readonly string[]; simultaneous: boolean };

/** The agent of a single-agent protocol, when the session is not told the protocol's. */
const defaultAgent = "agent";
const oneSeat: Seats = { agents: [defaultAgent], simultaneous: false };

export type SessionStep = {
  observation: string | null;
  /** The acting agent's reward (a simultaneous round's: the sum of every agent's). */
  reward: number;
  /** Every agent's reward, when the step gave per-agent rewards (always, for a simultaneous round). */
  rewards?: Record<string, number>;
  done: boolean;
  info: Record<string, Json>;
  metrics: Record<string, number>;
};

/** A simultaneous round's answer: a step's, with each agent's next observation and the agents whose action was invalid. */
export type SessionRound = SessionStep & {
  rewards: Record<string, number>;
  /** What each agent sees at the next round (null once the episode is done). */
  observations: Record<string, string> | null;
  /** The agents whose action did not parse, with the reason. */
  invalid: Record<string, string>;
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
  stepRewards: EnvironmentSession["stepRewards"];
  actor: EnvironmentSession["actor"];
  seats: EnvironmentSession["seats"];
  several: EnvironmentSession["several"];
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
  /** The last step's reward, with the step cost and, at the episode's end, the reward functions: the acting agent's. */
  private stepReward = 0;
  /** The last step's per-agent rewards (with the same additions), or null when it gave none. */
  private stepRewards: Record<string, number> | null = null;
  private breakdown: Record<string, number> = { env: 0 };
  /** The latest valid observation: an invalid action's answer repeats it, so agents that see only it keep the state. */
  private lastObservation = "";
  /** The episode's agents, and whether there are several (only then do toAct, observe and rewards count). */
  private seats: Seats = oneSeat;
  private several = false;
  /** The agent whose turn it is (turn-based); under the simultaneous protocol, the first agent. */
  private actor = defaultAgent;
  /** What `step` receives besides the state and action: one object, refilled each step (QuickJS makes an object in ~1 µs). */
  private readonly stepContext: { rng: Rng; agent: string } = { rng: this.rng, agent: defaultAgent };
  sample: Sample | undefined;

  constructor(readonly definition: EnvironmentDefinition<State, Action, Sample>) {}

  /** The system prompt of the first agent (the only one, under a single-agent protocol). */
  get systemPrompt(): string {
    return this.systemPromptOf(this.seats.agents[0]!);
  }

  /** `agent`'s system prompt: the definition's, or what its function answers for the episode's row and this agent. */
  systemPromptOf(agent: string): string {
    const prompt = this.definition.systemPrompt;
    return typeof prompt === "function" ? prompt(this.sample, agent) : prompt;
  }

  /** The agent to act next (turn-based), null once the episode is over. */
  get agent(): string | null {
    return this.finished ? null : this.actor;
  }

  /**
   * Starts an episode; the same seed (sample and level) always gives the same episode. `difficulty`, the level,
   * counts only for an environment that declares `difficulty`; left out, the episode plays its evaluation level.
   * `seats`: the protocol's agents (default one, "agent"). Returns what the first agent to act sees.
   */
  reset(seed: number, sample?: Sample, difficulty?: number, seats?: Seats): string {
    this.seats = seats ?? oneSeat;
    this.several = this.seats.agents.length > 1 || this.seats.simultaneous;
    if (this.seats.simultaneous) {
      if (typeof this.definition.stepTogether !== "function") {
        throw new EnvironmentContractError(
          "stepTogether",
          `the simultaneous protocol needs stepTogether(state, actions, { rng }) in environment '${this.definition.name}': it applies every agent's action of a round at once`,
        );
      }
      if (this.definition.tools && Object.keys(this.definition.tools).length > 0) {
        throw new EnvironmentContractError(
          "tools",
          "tools are not offered under the simultaneous protocol (every agent acts once a round); remove them or play turn-based",
        );
      }
    }
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
    this.stepReward = 0;
    this.stepRewards = null;
    // Never handed out (rewardBreakdown copies it): zeroed in place unless reward functions added their keys.
    if (this.definition.rewardFunctions) this.breakdown = { env: 0 };
    else this.breakdown.env = 0;
    this.lastObservation = observation;
    if (!this.several) {
      this.actor = this.seats.agents[0]!;
      return observation;
    }
    this.actor = this.seats.simultaneous ? this.seats.agents[0]! : this.nextActor();
    return this.observationOf(this.actor);
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

  /**
   * What `agent` sees now: `observe(state, agent)` when the environment defines it and the episode has several
   * agents, else the latest observation. A simultaneous round asks each agent with it.
   */
  observationOf(agent: string): string {
    if (this.state === undefined) throw new Error("observationOf() before reset()");
    if (!this.several || !this.definition.observe) return this.lastObservation;
    this.checkAgent(agent, "observationOf");
    const view = this.definition.observe(this.state, agent);
    if (typeof view !== "string")
      throw new EnvironmentContractError("observe", `observe() returned ${describe(view)} for agent '${agent}'; it must return a string`);
    return view;
  }

  /** Applies the acting agent's action text: a tool call, an invalid action, or an action the environment steps on. */
  step(actionText: string): SessionStep {
    const outcome = this.advance(actionText);
    const done = this.finished;
    const step: SessionStep = {
      observation: done ? null : (outcome.observation ?? ""),
      reward: this.stepReward,
      done,
      info: this.truncated ? { ...outcome.info, truncated: true } : { ...outcome.info },
      metrics: outcome.metrics ?? {},
    };
    if (this.stepRewards) step.rewards = { ...this.stepRewards };
    return step;
  }

  /**
   * @internal `step` without its answer, for a host that reads only what it needs (the sandbox's bridge, where QuickJS
   * takes ~0.5-1 µs an object): the action applied, and what the environment or the SDK answered it with, as is
   * (its info and metrics may be left out, and the episode's truncation is not in its info), except that with
   * several agents its observation is the next agent's. The step's reward with the step cost and, at the end, the
   * reward functions, the per-agent rewards, the next agent, whether the episode ended and the episode's counts are
   * the session's fields (`SessionFields`).
   */
  advance(actionText: string): Omit<StepOutcome<State>, "state"> {
    if (this.finished || this.state === undefined) throw new Error("step() called on a finished episode; call reset() first");
    if (this.seats.simultaneous) throw new Error("step() under the simultaneous protocol: a round is played with stepTogether(actions)");
    this.turn += 1;
    const agent = this.actor;
    const outcome = this.resolve(actionText, agent);
    if (outcome.info?.invalid === undefined && outcome.observation !== undefined) this.lastObservation = outcome.observation;
    const stepCost = this.definition.stepCost ?? 0;
    const given = outcome.rewards;
    let reward: number;
    let rewards: Record<string, number> | null = null;
    let stepTotal: number;
    if (given === undefined || !this.several) {
      reward = given === undefined && typeof outcome.reward === "number" ? outcome.reward : this.ownReward(outcome.reward, given, agent);
      reward += stepCost;
      stepTotal = reward;
    } else {
      rewards = this.checkedRewards(given, "step");
      reward = rewards[agent] ?? 0;
      if (outcome.reward !== undefined && outcome.reward !== reward) {
        throw new EnvironmentContractError(
          "step",
          `step() returned reward ${describe(outcome.reward)} and rewards.${agent} ${describe(rewards[agent])} for the acting agent '${agent}'; give its reward once (in rewards)`,
        );
      }
      if (stepCost !== 0) rewards[agent] = reward += stepCost;
      stepTotal = sumOf(rewards);
    }
    let { done } = outcome;
    if (!done && this.turn >= this.definition.maxTurns) {
      done = true;
      this.truncated = true;
    }
    this.breakdown.env! += stepTotal;
    this.total += stepTotal;
    this.finished = done;
    if (done && this.definition.rewardFunctions) {
      const added = this.scoreRewardFunctions();
      reward += added;
      if (rewards) rewards[agent] = reward;
    }
    this.stepReward = reward;
    this.stepRewards = rewards;
    if (!this.several || done) return outcome;
    const next = this.nextActor();
    this.actor = next;
    if (!this.definition.observe) return outcome;
    // With views, the next agent sees its own; what the SDK answered the actor (an invalid action's reason, a
    // tool's answer) goes to it only when it acts again.
    const view = this.observationOf(next);
    let observation = view;
    if (next === agent && outcome.info?.invalid !== undefined) observation = `Invalid action: ${String(outcome.info.invalid)}\n${view}`;
    else if (next === agent && outcome.info?.tool !== undefined) observation = outcome.observation ?? view;
    return { ...outcome, observation };
  }

  /**
   * Plays one round of the simultaneous protocol: `actions` holds exactly one text per agent (a missing or an unknown
   * agent is an error, never applied). Each is parsed with `parseAction(text, state, agent)`; when all parse, the
   * environment moves once (`stepTogether`). An action that does not parse costs its agent the invalid-action
   * penalty, and the round is not applied: the episode ends (`invalidAction.endEpisode`, the default) or the round
   * is played again from the same state.
   */
  stepTogether(actions: Record<string, string>): SessionRound {
    const { outcome, observations, invalid } = this.advanceTogether(actions);
    const done = this.finished;
    return {
      observation: done ? null : observations![this.seats.agents[0]!]!,
      observations,
      reward: this.stepReward,
      rewards: { ...this.stepRewards! },
      done,
      info: this.truncated ? { ...outcome.info, truncated: true } : { ...outcome.info },
      metrics: outcome.metrics ?? {},
      invalid,
    };
  }

  /**
   * @internal `stepTogether` as `advance` is to `step`: the outcome as is, each agent's next observation (null once
   * done) and the invalid actions; the rewards (`stepRewards`, their sum `stepReward`) are the session's fields.
   */
  advanceTogether(actions: Record<string, string>): {
    outcome: Omit<StepOutcome<State>, "state">;
    observations: Record<string, string> | null;
    invalid: Record<string, string>;
  } {
    if (this.finished || this.state === undefined) throw new Error("stepTogether() called on a finished episode; call reset() first");
    if (!this.seats.simultaneous) throw new Error("stepTogether() is the simultaneous protocol's; this episode is played turn by turn with step()");
    const { agents } = this.seats;
    checkRoundActions(actions, agents, this.turn + 1);
    this.turn += 1;
    const state = this.state;
    const parsed: Record<string, Action> = {};
    const invalid: Record<string, string> = {};
    let invalidCount = 0;
    for (const agent of agents) {
      const result = this.definition.parseAction(actions[agent]!, state, agent);
      if (result.ok) parsed[agent] = result.action;
      else {
        invalid[agent] = result.error;
        invalidCount += 1;
      }
    }
    const stepCost = this.definition.stepCost ?? 0;
    let outcome: Omit<StepOutcome<State>, "state">;
    let rewards: Record<string, number>;
    if (invalidCount > 0) {
      this.invalid += invalidCount;
      const rule = this.definition.invalidAction ?? { penalty: -1, endEpisode: true };
      rewards = {};
      for (const agent of Object.keys(invalid)) rewards[agent] = rule.penalty;
      outcome = { done: rule.endEpisode, info: { invalid: { ...invalid } }, metrics: { invalid_action: invalidCount } };
    } else {
      const moved = this.definition.stepTogether!(state, parsed, { rng: this.rng });
      if (moved.rewards === undefined) {
        throw new EnvironmentContractError(
          "stepTogether",
          `stepTogether() returned no rewards; it must return rewards: { ${agents.map((a) => `${a}: number`).join(", ")} } (an agent left out earns 0)`,
        );
      }
      rewards = this.checkedRewards(moved.rewards, "stepTogether");
      this.state = moved.state;
      if (moved.observation !== undefined) this.lastObservation = moved.observation;
      outcome = moved;
    }
    if (stepCost !== 0) for (const agent of agents) rewards[agent] = (rewards[agent] ?? 0) + stepCost;
    let { done } = outcome;
    if (!done && this.turn >= this.definition.maxTurns) {
      done = true;
      this.truncated = true;
    }
    const stepTotal = sumOf(rewards);
    this.breakdown.env! += stepTotal;
    this.total += stepTotal;
    this.finished = done;
    let reward = stepTotal;
    if (done && this.definition.rewardFunctions) {
      // an episode's reward functions go to the agent of its last turn, the round's last agent
      const last = agents[agents.length - 1]!;
      const added = this.scoreRewardFunctions();
      rewards[last] = (rewards[last] ?? 0) + added;
      reward += added;
    }
    this.stepReward = reward;
    this.stepRewards = rewards;
    let observations: Record<string, string> | null = null;
    if (!done) {
      observations = {};
      for (const agent of agents) {
        const view = this.observationOf(agent);
        observations[agent] = invalid[agent] === undefined ? view : `Invalid action: ${invalid[agent]}\n${view}`;
      }
    }
    return { outcome, observations, invalid };
  }

  /** The reward functions' values on the finished episode, each in the breakdown and the total; returns their sum. */
  private scoreRewardFunctions(): number {
    const summary = this.summary();
    let added = 0;
    for (const [name, fn] of Object.entries(this.definition.rewardFunctions!)) {
      const value = fn(summary);
      if (!Number.isFinite(value)) throw new Error(`reward function '${name}' returned ${value}; it must return a finite number`);
      this.breakdown[name] = value;
      added += value;
      this.total += value;
    }
    return added;
  }

  /** The acting agent's reward of a step without per-agent rewards (a single agent's `rewards` is read as its reward). */
  private ownReward(reward: number | undefined, rewards: Record<string, number> | undefined, agent: string): number {
    if (rewards !== undefined) {
      const own = this.checkedRewards(rewards, "step")[agent] ?? 0;
      if (reward !== undefined && reward !== own) {
        throw new EnvironmentContractError("step", `step() returned reward ${describe(reward)} and rewards.${agent} ${describe(own)}; give the reward once`);
      }
      return own;
    }
    if (typeof reward !== "number")
      throw new EnvironmentContractError("step", `step() returned reward ${describe(reward)}; reward must be a finite number (or give rewards)`);
    return reward;
  }

  /** A copy of a step's per-agent rewards, each for an agent of the episode and finite. */
  private checkedRewards(rewards: unknown, fn: "step" | "stepTogether"): Record<string, number> {
    if (rewards === null || typeof rewards !== "object" || Array.isArray(rewards)) {
      throw new EnvironmentContractError(
        fn,
        `${fn}() returned rewards ${describe(rewards)}; rewards must be an object of numbers by agent, e.g. { X: 1, O: -1 }`,
      );
    }
    const copy: Record<string, number> = {};
    for (const [agent, value] of Object.entries(rewards)) {
      if (!this.seats.agents.includes(agent)) {
        throw new EnvironmentContractError(
          fn,
          `${fn}() returned rewards.${agent}, but '${agent}' is not an agent of this protocol; its agents are ${this.seats.agents.join(", ")}`,
        );
      }
      if (typeof value !== "number" || !Number.isFinite(value)) {
        throw new EnvironmentContractError(fn, `${fn}() returned rewards.${agent} ${describe(value)}; a reward must be a finite number`);
      }
      copy[agent] = value;
    }
    return copy;
  }

  /** Who acts next: `toAct(state)`, checked, else the next agent in the protocol's order. */
  private nextActor(): string {
    const { agents } = this.seats;
    if (!this.definition.toAct) return agents[this.turn % agents.length]!;
    const agent = this.definition.toAct(this.state as State);
    if (typeof agent !== "string" || !agents.includes(agent)) {
      throw new EnvironmentContractError("toAct", `toAct() returned ${describe(agent)}; it must name one of the protocol's agents: ${agents.join(", ")}`);
    }
    return agent;
  }

  private checkAgent(agent: string, method: string): void {
    if (!this.seats.agents.includes(agent))
      throw new Error(`${method}('${agent}'): not an agent of this episode; its agents are ${this.seats.agents.join(", ")}`);
  }

  private resolve(actionText: string, agent: string): Omit<StepOutcome<State>, "state"> {
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
    const parsed = this.definition.parseAction(actionText, state, agent);
    if (!parsed.ok) return this.invalidAction(parsed.error);
    const context = this.stepContext;
    context.agent = agent;
    const outcome = this.definition.step(state, parsed.action, context);
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

  /**
   * The demonstrator's action for `agent` (default: the agent to act) in the current state (null without a
   * demonstrator, or once the episode is over).
   */
  demonstrate(agent: string = this.actor): string | null {
    if (this.state === undefined || this.finished || !this.definition.demonstrate) return null;
    const action = this.definition.demonstrate(this.state, agent);
    if (typeof action !== "string") throw new Error(`demonstrate() returned ${typeof action}; it must return the action's text`);
    return action;
  }

  /**
   * The legal actions of `agent`'s next turn (default: the agent to act); null when the environment declares none,
   * or the episode is over.
   */
  legalActions(agent: string = this.actor): ActionConstraint | null {
    if (this.state === undefined || this.finished) return null;
    return legalActionsOf(this.definition as EnvironmentDefinition<State, unknown, any>, this.state, agent, !this.seats.simultaneous);
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

function sumOf(rewards: Record<string, number>): number {
  let sum = 0;
  for (const key in rewards) sum += rewards[key]!;
  return sum;
}

/**
 * The barrier of a simultaneous round: exactly one action per agent of the episode. A missing agent, an unknown one
 * or a text that is not a string is an error, never applied.
 */
export function checkRoundActions(actions: Record<string, unknown>, agents: readonly string[], round: number): void {
  if (actions === null || typeof actions !== "object") throw new Error(`round ${round}: the actions must be an object { agent: text }`);
  for (const agent of Object.keys(actions)) {
    if (!agents.includes(agent)) throw new Error(`round ${round}: an action from '${agent}', which is not an agent of this episode (${agents.join(", ")})`);
  }
  for (const agent of agents) {
    if (typeof actions[agent] !== "string") throw new Error(`round ${round}: no action from agent '${agent}'; each agent acts exactly once a round`);
  }
}
