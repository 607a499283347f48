/**
 * A user's environment, run in the sandbox, offered two ways:
 *  - `SandboxedEnvironmentPool`: many episodes (slots) in one sandbox; `resetMany` / `stepMany` move any number
 *    of them in one boundary crossing, without blocking this thread. This is what keeps the sandbox cheap.
 *  - `SandboxedSession`: one slot with the surface of the SDK's `EnvironmentSession` (reset, step, render,
 *    summary, score, systemPrompt), so `runEpisodes` can drive it unchanged. `runSandboxedEpisodes` wraps
 *    `runEpisodes` so that each round's steps are sent as one batch and the sessions answer from it.
 *
 * Every answer from the guest is checked here again (types, sizes, JSON), since the guest is not trusted.
 * Any error fails the pool: later calls throw the same error, which names the limit or the user's line.
 */
import type { ActionConstraint } from "@/lib/sdk/action-space";
import { type DatasetRow, type EnvironmentSession, type Json, type Seats, type SessionRound, type SessionStep, checkRoundActions } from "@/lib/sdk/environment";
import { type ActRequest, type ActResponse, type EpisodeStart, type Protocol, RoundBarrier, type Trajectory, runEpisodes } from "@/lib/sdk/protocol";
import type { ChatMessage } from "@/lib/model/chat";
import { AnswerReader, type SandboxedSummary, checkDescription, checkSummary, finite } from "./answers";
import { type CompiledEnvironment, type SourceFiles, compileEnvironment, locateFunction } from "./compile";
import { SandboxError, SandboxLimitError, formatCount } from "./errors";
import { type SandboxLimits, type SandboxLimitsInput, resolveSandboxLimits } from "./limits";
import { LaneSchedule, laneShape, laneStarts } from "./lanes";
import { type OpBudget, QuickJSSandbox, type SandboxProbe, classifyFatal, stoppedAtText } from "./quickjs-host";
import {
  type EnvironmentDescription,
  type GuestEpisodeEnd,
  type GuestFailure,
  type GuestOp,
  type GuestResetValue,
  type GuestResponse,
  type GuestSeatValue,
  type GuestStepValue,
  FAILED,
  slotOf,
} from "./wire";

export type SandboxSource = CompiledEnvironment | { files: SourceFiles; entry?: string };

export type SandboxedReset = GuestResetValue;
export type SandboxedStep = GuestStepValue;
export type { SandboxedSummary };

/**
 * One crossing's ops, their budgets, and the check each answer gets: op `index`'s values are the `n` from `at`
 * in the crossing's flat array of records (see GuestResponse).
 */
type Batch<T> = { ops: GuestOp[]; budgets: OpBudget[]; kind: string; check: (values: unknown[], at: number, n: number, index: number) => T };

/** The check of an op answered with one value. */
function one<T>(label: string, check: (value: unknown) => T): Batch<T>["check"] {
  return (values, at, n) => {
    if (n !== 1) throw new SandboxError("contract", `${label}: the answer is malformed`);
    return check(values[at]);
  };
}

function crossingLabel(batch: Batch<unknown>): string {
  return batch.ops.length === 1 ? batch.budgets[0]!.label : `a batch of ${batch.ops.length} ${batch.kind} calls`;
}

/**
 * The longest this thread blocks for a batch's answer when it has nothing else to do (`waitForAnswer`): a rollout's
 * last crossing takes ~0.5 ms; a slower environment's batch is then waited for in the event loop, so that a worker's
 * heartbeats and a stop request are not held up by it.
 */
const syncWaitMs = 20;

/** Slots per pool: a batch of rollouts is at most this many episodes side by side. */
const maxSlots = 65_536;

/**
 * Slots per bank. `runSandboxedEpisodes` plays a batch in one bank and resets the next batch's episodes (when it
 * is told them) in the other, so a batch of at most this many episodes can be prepared while another plays.
 */
export const bankSlots = maxSlots / 2;

/**
 * One episode's start: its slot, seed, dataset row and level of difficulty (for an environment that declares
 * levels; left out, its evaluation level), its number in its batch for messages (default: the slot), and the
 * protocol's agents (default: one, "agent").
 */
export type SlotStart = { slot: number; seed: number; sample?: DatasetRow; difficulty?: number; index?: number; seats?: Seats };

/** Whether an episode's seats are a single "agent"'s, which need not cross (the guest's session assumes them). */
function isOneSeat(seats: Seats | undefined): boolean {
  return !seats || (seats.agents.length === 1 && seats.agents[0] === "agent" && !seats.simultaneous);
}

/** Whether an episode has several agents: its answers carry seat values (see GuestSeatValue). */
function severalSeats(seats: Seats | undefined): Seats | null {
  return seats && (seats.agents.length > 1 || seats.simultaneous) ? seats : null;
}

function sameSeats(a: Seats | undefined, b: Seats | undefined): boolean {
  if (isOneSeat(a) || isOneSeat(b)) return isOneSeat(a) && isOneSeat(b);
  return a!.simultaneous === b!.simultaneous && a!.agents.length === b!.agents.length && a!.agents.every((agent, i) => agent === b!.agents[i]);
}

/** What a batch of episodes starts from, one each (`runSandboxedEpisodes`). */
type EpisodeStartSpec = { seed: number; sample?: DatasetRow; difficulty?: number };

/** Whether two starts are the same episode: the same seed, the same dataset row (the object), the same level. */
function sameStart(a: EpisodeStartSpec, b: EpisodeStartSpec): boolean {
  return a.seed === b.seed && a.sample === b.sample && a.difficulty === b.difficulty;
}

/** One episode's next action, or (`actions`, in the order of its agents) a simultaneous round's. */
export type SlotStep = { slot: number; action: string } | { slot: number; actions: string[] };

/** Episodes reset ahead of the batch they belong to (see `runSandboxedEpisodes`' `next`): where, and for which starts. */
type Prepared = { base: number; starts: readonly EpisodeStartSpec[] };

type Slot = {
  /** Counts the slot's resets, so that a summary's final state is fetched only from its own episode. */
  episode: number;
  /** The episode's number in its batch, as messages name it (the slot itself unless the reset said otherwise). */
  index: number;
  seed: number;
  sample: DatasetRow | undefined;
  difficulty: number | undefined;
  turns: number;
  done: boolean;
  cpuMs: number;
  systemPrompt: string;
  render: string | null;
  /** The next turn's legal actions, when they depend on the state. */
  legalActions: ActionConstraint | null;
  /** The protocol's agents, when there are several (see GuestSeatValue); null for a single agent. */
  seats: Seats | null;
  /** The seats the episode was reset with, as given (to match a batch's reset with the session's own). */
  seatsGiven: Seats | undefined;
  /** The agent to act next (turn-based). */
  actor: string;
  /** Each agent's system prompt, when the definition's is a function of the agent. */
  prompts: Record<string, string> | null;
  /** A simultaneous round's: each agent's observation and (actions by state) legal actions. */
  views: Record<string, string> | null;
  legalByAgent: Record<string, ActionConstraint> | null;
  end: GuestEpisodeEnd | null;
  /** Answers fetched in a batch, waiting for the session's own call. */
  pendingReset: GuestResetValue | null;
  pendingStep: GuestStepValue | null;
  /** The action `pendingStep` answered (a simultaneous round's, in the order of the agents). */
  pendingAction: string | string[];
  /**
   * The summary and score of an unfinished episode as of its last step, once asked for: a rollout reads the
   * summary twice and the score once for an episode cut short, each a crossing of its own.
   */
  summaryCache: SandboxedSummary | null;
  scoreCache: number | null;
};

/**
 * What an op on one episode may spend: the per-call limit, or what is left of the episode's budget if that is
 * less. Labelled only when a message reads it: a rollout makes hundreds each crossing and reads none of them.
 */
class EpisodeOpBudget implements OpBudget {
  readonly ms: number;
  readonly limit: OpBudget["limit"];

  constructor(
    limits: SandboxLimits,
    /** What the episode has spent before this op (nothing, for its reset). */
    readonly spentBeforeMs: number,
    private readonly op: "reset" | "step" | "round" | "summary" | "score" | "demonstrate",
    /** A step's number in its episode. */
    private readonly turn: number,
    private readonly index: number,
    private readonly seed: number,
    /** Validation's budget for all the pool's ops and what they have spent (see `dryRunCpuMs`), or null. */
    readonly dryRun: { ms: number; spentBeforeMs: number } | null = null,
  ) {
    const remaining = limits.cpuMsPerEpisode - spentBeforeMs;
    this.limit = remaining < limits.cpuMsPerCall ? "cpuMsPerEpisode" : "cpuMsPerCall";
    this.ms = this.limit === "cpuMsPerEpisode" ? Math.max(remaining, 0) : limits.cpuMsPerCall;
    if (dryRun && dryRun.ms - dryRun.spentBeforeMs < this.ms) {
      this.limit = "dryRunCpuMs";
      this.ms = Math.max(dryRun.ms - dryRun.spentBeforeMs, 0);
    }
  }

  get label(): string {
    const episode = `episode ${this.index} (seed ${this.seed})`;
    return this.op === "step" || this.op === "round" ? `${this.op} ${this.turn} of ${episode}` : `${this.op} of ${episode}`;
  }

  /** The user's function the op calls (a summary calls none of its own). */
  get fn(): string | null {
    return this.op === "summary" ? null : this.op === "round" ? "stepTogether" : this.op;
  }
}

export class SandboxedEnvironmentPool {
  /** By slot (arrays of the pool's size from the start: V8 keeps them fast however the slots are filled). */
  private readonly slots: (Slot | undefined)[] = new Array<Slot | undefined>(maxSlots);
  private readonly sessionsBySlot: (SandboxedSession | undefined)[] = new Array<SandboxedSession | undefined>(maxSlots);
  /** The bank whose episodes were reset ahead for a batch that has not played yet. */
  private prepared: Prepared | null = null;
  /** CPU milliseconds the episodes' ops have spent in all, against `dryRunCpuMs` (validation's dry run). */
  private spentMs = 0;
  /** The step ops answered and the CPU milliseconds they took, for validation's projection of an episode. */
  readonly stepCpu = { steps: 0, ms: 0 };
  /** Checks the resets' and steps' answers, and keeps the last system prompt a reset may refer to. */
  private readonly answers: AnswerReader;

  private constructor(
    private readonly sandbox: QuickJSSandbox,
    readonly environment: EnvironmentDescription,
    readonly limits: SandboxLimits,
    /** What the episodes' ops may spend in all (validation's dry run), or null: no such budget. */
    readonly dryRunCpuMs: number | null,
  ) {
    this.answers = new AnswerReader(environment.actions, limits);
  }

  /**
   * Compiles (unless given a compiled bundle) and loads the environment; throws a SandboxError on failure.
   * `dryRunCpuMs` bounds the CPU time of all the episodes' ops together (validation's dry run): each op may
   * spend at most what is left, so the op that exhausts it is stopped inside the user's code, at its line.
   */
  static async create(source: SandboxSource, options: { limits?: SandboxLimitsInput; dryRunCpuMs?: number } = {}): Promise<SandboxedEnvironmentPool> {
    const limits = resolveSandboxLimits(options.limits);
    const dryRunCpuMs = options.dryRunCpuMs ?? null;
    if (dryRunCpuMs !== null && !(Number.isFinite(dryRunCpuMs) && dryRunCpuMs > 0)) {
      throw new Error(`dryRunCpuMs must be a positive number of milliseconds; got ${String(dryRunCpuMs)}`);
    }
    let compiled: CompiledEnvironment;
    if ("code" in source) compiled = source;
    else {
      const result = await compileEnvironment(source.files, { entry: source.entry });
      if (!result.ok) {
        const first = result.diagnostics[0]!;
        const where = first.file ? ` (at ${first.file}:${first.line}:${first.column})` : "";
        throw new SandboxError("syntax", `${first.message}${where}`, {
          location: first.file ? { file: first.file, line: first.line ?? 1, column: first.column ?? 1 } : null,
        });
      }
      compiled = result.compiled;
    }
    const sandbox = await QuickJSSandbox.create(compiled, limits);
    try {
      const budget: OpBudget = { ms: limits.cpuMsPerCall, limit: "cpuMsPerCall", spentBeforeMs: 0, label: "describing the environment" };
      const response = sandbox.call([["configure", limits.maxObservationChars], ["describe"]], [budget, budget], "describing the environment");
      const at = response.starts[1]!;
      const [n, description] = [response.results[at], response.results[at + 1]];
      if (n !== 1) throw new SandboxError("runtime", `describing the environment failed: ${String((description as GuestFailure | undefined)?.message)}`);
      return new SandboxedEnvironmentPool(sandbox, checkDescription(description), limits, dryRunCpuMs);
    } catch (error) {
      sandbox.dispose();
      throw error;
    }
  }

  /** Resolves once the sandbox's thread has exited: after dispose(), or after the watchdog stopped it. */
  get stopped(): Promise<void> {
    return this.sandbox.stopped;
  }

  /** The error that failed this pool, if one did. */
  get failure(): SandboxError | null {
    return this.sandbox.failed;
  }

  /**
   * Starts (or restarts) an episode in each slot: one crossing for all of them, during which this thread is free
   * (see `QuickJSSandbox.answerAsync`). One batch at a time per pool. Resolves with the checked answers; with
   * `readLater`, as soon as the sandbox has answered (it can take another batch), with a function that checks the
   * answer and applies it, to be called once: until then the slots hold their previous episodes. A rollout reads
   * a lane's answer when its thread would otherwise wait (`runSandboxedEpisodes`).
   */
  resetMany(starts: SlotStart[], options?: { readLater?: false }): Promise<SandboxedReset[]>;
  resetMany(starts: SlotStart[], options: { readLater: true }): Promise<() => SandboxedReset[]>;
  async resetMany(starts: SlotStart[], options: { readLater?: boolean } = {}): Promise<SandboxedReset[] | (() => SandboxedReset[])> {
    const settle = await this.runLater(this.resetBatch(starts));
    const read = () => this.afterResets(starts, settle());
    return options.readLater ? read : read();
  }

  /** Applies one action in each slot, in one crossing, as `resetMany` does (`readLater` included). */
  stepMany(steps: SlotStep[], options?: { readLater?: false }): Promise<SandboxedStep[]>;
  stepMany(steps: SlotStep[], options: { readLater: true }): Promise<() => SandboxedStep[]>;
  async stepMany(steps: SlotStep[], options: { readLater?: boolean } = {}): Promise<SandboxedStep[] | (() => SandboxedStep[])> {
    const settle = await this.runLater(this.stepBatch(steps));
    const read = () => this.afterSteps(steps, settle());
    return options.readLater ? read : read();
  }

  /**
   * @internal Settles the pending batch now if the sandbox has answered it (see `QuickJSSandbox.takeIfAnswered`):
   * its promise's callbacks then run before this thread's next task.
   */
  takeIfAnswered(): void {
    this.sandbox.takeIfAnswered();
  }

  /** Installs a bench's hooks (null: removes them): crossings' times, the host's sandbox work, its blocked waits. */
  installProbe(probe: SandboxProbe | null): void {
    this.sandbox.probe = probe;
  }

  /** @internal The batch posted is still running (false once it has been answered and taken). */
  get awaitingAnswer(): boolean {
    return this.sandbox.awaitingAnswer;
  }

  /**
   * @internal Blocks until the pending batch is answered, for up to `maxMs` (default `syncWaitMs`), and settles it
   * (see `QuickJSSandbox.waitForAnswer`): for when this thread has nothing else to do but wait for it. True when
   * the batch was settled; false when it is still running (its promise settles later, as usual).
   */
  waitForAnswer(maxMs = syncWaitMs): boolean {
    return this.sandbox.waitForAnswer(maxMs);
  }

  private resetBatch(starts: SlotStart[]): Batch<GuestResetValue> {
    const startedAt = this.sandbox.hostWorkStart();
    const ops: GuestOp[] = [];
    const budgets: OpBudget[] = [];
    for (const { slot, seed, sample, difficulty, index = slot, seats } of starts) {
      checkSlot(slot);
      if (!Number.isInteger(seed)) throw new SandboxError("runtime", `seed must be a whole number; got ${String(seed)}`);
      ops.push(
        isOneSeat(seats) ? ["reset", slot, seed, sample ?? null, difficulty ?? null] : ["reset", slot, seed, sample ?? null, difficulty ?? null, seats!],
      );
      budgets.push(new EpisodeOpBudget(this.limits, 0, "reset", 0, index, seed, this.dryRunSpent()));
    }
    this.sandbox.logHostWork("build", ops.length, startedAt);
    return {
      ops,
      budgets,
      kind: "reset",
      check: (values, at, n, i) => this.answers.checkReset(values, at, n, budgets[i]!, severalSeats(starts[i]!.seats)),
    };
  }

  private afterResets(starts: SlotStart[], values: GuestResetValue[]): SandboxedReset[] {
    for (let i = 0; i < values.length; i++) {
      const value = values[i]!;
      const { slot, seed, sample, difficulty, index = slot, seats } = starts[i]!;
      const state = this.slotState(slot);
      state.episode += 1;
      state.index = index;
      state.seed = seed;
      state.sample = sample;
      state.difficulty = difficulty;
      state.turns = 0;
      state.done = false;
      state.systemPrompt = value.systemPrompt;
      state.render = value.render;
      state.legalActions = value.legalActions;
      state.seats = severalSeats(seats);
      state.seatsGiven = seats;
      state.actor = value.seat?.actor ?? seats?.agents[0] ?? "agent";
      state.prompts = value.seat?.prompts ?? null;
      state.views = value.seat?.views ?? null;
      state.legalByAgent = value.seat?.legal ?? null;
      state.end = null;
      state.summaryCache = null;
      state.scoreCache = null;
      state.pendingReset = value;
      state.pendingStep = null;
    }
    return values;
  }

  private stepBatch(steps: SlotStep[]): Batch<GuestStepValue> {
    const startedAt = this.sandbox.hostWorkStart();
    const ops: GuestOp[] = [];
    const budgets: OpBudget[] = [];
    const seats: (Seats | null)[] = [];
    for (const step of steps) {
      const { slot } = step;
      const state = this.started(slot);
      const round = "actions" in step;
      const budget = this.opBudget(state, round ? "round" : "step");
      if (state.done) throw this.fail(new SandboxError("runtime", `${budget.label}: the episode has ended; reset it first`));
      if (round !== (state.seats?.simultaneous === true)) {
        const why = round
          ? "the episode is played turn by turn (one action a step)"
          : "the episode is played in simultaneous rounds (every agent's action at once)";
        throw this.fail(new SandboxError("runtime", `${budget.label}: ${why}`));
      }
      const texts = round ? step.actions : [step.action];
      if (round && texts.length !== state.seats!.agents.length) {
        throw this.fail(
          new SandboxError("runtime", `${budget.label}: a round takes one action per agent (${state.seats!.agents.join(", ")}); got ${texts.length}`),
        );
      }
      for (const action of texts) {
        if (typeof action !== "string") throw this.fail(new SandboxError("runtime", `${budget.label}: the action must be a string`));
        if (action.length > this.limits.maxActionChars) {
          throw this.fail(
            new SandboxLimitError(
              "maxActionChars",
              this.limits.maxActionChars,
              action.length,
              `${budget.label}: the action is ${formatCount(action.length)} characters; limit maxActionChars=${formatCount(this.limits.maxActionChars)}`,
            ),
          );
        }
      }
      if (state.turns >= this.limits.maxStepsPerEpisode) {
        throw this.fail(
          new SandboxLimitError(
            "maxStepsPerEpisode",
            this.limits.maxStepsPerEpisode,
            state.turns + 1,
            `episode ${state.index} (seed ${state.seed}) did not end within maxStepsPerEpisode=${formatCount(this.limits.maxStepsPerEpisode)} steps`,
          ),
        );
      }
      ops.push(round ? ["round", slot, step.actions] : ["step", slot, step.action]);
      budgets.push(budget);
      seats.push(state.seats);
    }
    this.sandbox.logHostWork("build", ops.length, startedAt);
    return { ops, budgets, kind: "step", check: (values, at, n, i) => this.answers.checkStep(values, at, n, budgets[i]!, seats[i]!) };
  }

  private afterSteps(steps: SlotStep[], values: GuestStepValue[]): SandboxedStep[] {
    for (let i = 0; i < values.length; i++) {
      const value = values[i]!;
      const step = steps[i]!;
      const state = this.slotState(step.slot);
      state.turns += 1;
      state.done = value.done;
      state.render = value.render;
      state.legalActions = value.legalActions;
      state.end = value.end;
      state.summaryCache = null;
      state.scoreCache = null;
      state.pendingStep = value;
      state.pendingAction = "actions" in step ? step.actions : step.action;
      const seat = value.seat;
      if (seat) {
        if (seat.actor !== null) state.actor = seat.actor;
        state.views = seat.views;
        state.legalByAgent = seat.legal;
      }
    }
    return values;
  }

  render(slot: number): string | undefined {
    const state = this.started(slot);
    return state.render ?? undefined;
  }

  /**
   * The legal actions of the slot's next turn (in a simultaneous round, `agent`'s): the environment's own, or the
   * state's (null once the episode ended).
   */
  legalActions(slot: number, agent?: string): ActionConstraint | null {
    const state = this.started(slot);
    if (state.done || this.environment.actions === null) return null;
    if (this.environment.actions !== "state") return this.environment.actions;
    if (agent === undefined || agent === state.actor) return state.legalActions;
    const legal = state.legalByAgent?.[agent];
    if (!legal) throw new SandboxError("runtime", `episode ${state.index}: the legal actions of '${agent}', who is not to act, did not cross the sandbox`);
    return legal;
  }

  /** The slot's episode so far (its state is the same object until the episode moves on). */
  summary(slot: number): SandboxedSummary {
    const state = this.started(slot);
    if (!state.summaryCache) {
      const budget = this.opBudget(state, "summary");
      const { label } = budget;
      const [value] = this.run({ ops: [["summary", slot]], budgets: [budget], kind: "summary", check: one(label, (raw) => checkSummary(raw, label)) });
      state.summaryCache = value!;
    }
    return { ...state.summaryCache, breakdown: { ...state.summaryCache.breakdown } };
  }

  /**
   * The final state of the slot's episode number `episode` (a summary asks for it only when it is read). Gone
   * once the slot has been reset for another episode.
   */
  finalState(slot: number, episode: number): Json {
    const state = this.started(slot);
    if (state.episode !== episode) {
      throw new SandboxError(
        "runtime",
        `episode ${state.index}'s final state is no longer in the sandbox: the slot has been reset since; read summary().state before resetting it`,
      );
    }
    return this.summary(slot).state;
  }

  score(slot: number): number {
    const state = this.started(slot);
    if (state.end) return state.end.score;
    if (state.scoreCache === null) {
      const budget = this.opBudget(state, "score");
      const { label } = budget;
      const [value] = this.run({ ops: [["score", slot]], budgets: [budget], kind: "score", check: one(label, (raw) => finite(raw, `${label}: the score`)) });
      state.scoreCache = value!;
    }
    return state.scoreCache;
  }

  /**
   * The demonstrator's action in the slot's current state, for `agent` (default: the agent to act); null without a
   * demonstrator or once the episode ended.
   */
  demonstrate(slot: number, agent?: string): string | null {
    const state = this.started(slot);
    if (state.done || !this.environment.hasDemonstrator) return null;
    const budget = this.opBudget(state, "demonstrate");
    const { label } = budget;
    const check = (raw: unknown) => (raw === null ? null : this.answers.text(raw, budget, "the demonstrator's action"));
    const op: GuestOp = agent === undefined ? ["demonstrate", slot] : ["demonstrate", slot, agent];
    const [value] = this.run({ ops: [op], budgets: [budget], kind: "demonstrate", check: one(label, check) });
    return value!;
  }

  /** What the user's code wrote with console.* since the last call (at most 200 lines). */
  drainLogs(): string[] {
    const budget: OpBudget = { ms: this.limits.cpuMsPerCall, limit: "cpuMsPerCall", spentBeforeMs: 0, label: "reading the logs" };
    const check = (raw: unknown) => {
      if (!Array.isArray(raw) || !raw.every((line) => typeof line === "string")) throw new SandboxError("runtime", "the sandbox's logs are malformed");
      return raw as string[];
    };
    const [lines] = this.run({ ops: [["logs"]], budgets: [budget], kind: "logs", check: one("reading the logs", check) });
    return lines!;
  }

  /** The `EnvironmentSession`-shaped view of one slot. */
  session(slot: number): SandboxedSession {
    checkSlot(slot);
    let session = this.sessionsBySlot[slot];
    if (!session) this.sessionsBySlot[slot] = session = new SandboxedSession(this, slot);
    return session;
  }

  dispose(): void {
    this.sandbox.dispose();
  }

  // ---- used by runSandboxedEpisodes ----

  /**
   * @internal Where a batch of these starts plays: the bank whose episodes were reset ahead for exactly these
   * starts (the same seeds, dataset rows and levels, in order), claimed once (`prepared: true`); else a bank that
   * leaves another batch's prepared episodes alone, or slot 0 for a batch too big for a bank.
   */
  claimBank(starts: readonly EpisodeStartSpec[]): { base: number; prepared: boolean } {
    const prepared = this.prepared;
    if (prepared && prepared.starts.length === starts.length && starts.every((start, i) => sameStart(start, prepared.starts[i]!))) {
      this.prepared = null;
      return { base: prepared.base, prepared: true };
    }
    if (starts.length > bankSlots) {
      this.prepared = null;
      return { base: 0, prepared: false };
    }
    return { base: prepared?.base === 0 ? bankSlots : 0, prepared: false };
  }

  /** @internal The episodes from `base` on were reset for these starts (or, with null, are about to be overwritten). */
  setPrepared(prepared: Prepared | null): void {
    this.prepared = prepared;
  }

  // ---- used by SandboxedSession ----

  /**
   * @internal `SandboxedSession.reset`: the answer the last batch left for this slot when it reset this episode
   * (`runSandboxedEpisodes` arranges this), else a crossing of its own, which blocks this thread (an
   * `EnvironmentSession`'s calls are synchronous).
   */
  sessionReset(slot: number, seed: number, sample: DatasetRow | undefined, difficulty?: number, seats?: Seats): SandboxedReset {
    const state = this.slots[slot];
    let value = state && sameStart(state, { seed, sample, difficulty }) && sameSeats(state.seatsGiven, seats) ? state.pendingReset : null;
    if (!value) {
      const starts = [{ slot, seed, sample, difficulty, seats }];
      value = this.afterResets(starts, this.run(this.resetBatch(starts)))[0]!;
    }
    this.slots[slot]!.pendingReset = null;
    return value;
  }

  /**
   * @internal `SandboxedSession.step` (and with `actions`, a simultaneous round's), as `sessionReset`: the last
   * batch's answer for this slot and action, else a crossing.
   */
  sessionStep(slot: number, action: string | string[]): SandboxedStep {
    const state = this.slots[slot];
    const pending = state?.pendingStep ?? null;
    if (pending) {
      state!.pendingStep = null;
      if (!sameAction(state!.pendingAction, action)) {
        throw new SandboxError("runtime", `episode ${slot}: step was batched with a different action than the one now applied`);
      }
      return pending;
    }
    const step: SlotStep = typeof action === "string" ? { slot, action } : { slot, actions: action };
    const [value] = this.afterSteps([step], this.run(this.stepBatch([step])));
    this.slots[slot]!.pendingStep = null;
    return value!;
  }

  /** @internal */
  slotView(slot: number): Readonly<Slot> | undefined {
    return this.slots[slot];
  }

  // ---- plumbing ----

  private fail(error: SandboxError): SandboxError {
    return this.sandbox.fail(error);
  }

  private slotState(slot: number): Slot {
    let state = this.slots[slot];
    if (!state) {
      state = {
        episode: 0,
        index: slot,
        seed: 0,
        sample: undefined,
        difficulty: undefined,
        turns: 0,
        done: true,
        cpuMs: 0,
        systemPrompt: "",
        render: null,
        end: null,
        legalActions: null,
        seats: null,
        seatsGiven: undefined,
        actor: "agent",
        prompts: null,
        views: null,
        legalByAgent: null,
        pendingReset: null,
        pendingStep: null,
        pendingAction: "",
        summaryCache: null,
        scoreCache: null,
      };
      this.slots[slot] = state;
    }
    return state;
  }

  private started(slot: number): Slot {
    checkSlot(slot);
    const state = this.slots[slot];
    if (!state) throw new SandboxError("runtime", `episode ${slot} has not been reset`);
    return state;
  }

  /** The budget of a step (the next), summary or score of the slot's episode. */
  private opBudget(state: Slot, op: "step" | "round" | "summary" | "score" | "demonstrate"): EpisodeOpBudget {
    return new EpisodeOpBudget(this.limits, state.cpuMs, op, state.turns + 1, state.index, state.seed, this.dryRunSpent());
  }

  /**
   * The dry run's budget and what it has spent, for the next op's budget (null without one); once it is spent,
   * the pool fails before crossing again.
   */
  private dryRunSpent(): { ms: number; spentBeforeMs: number } | null {
    if (this.dryRunCpuMs === null) return null;
    if (this.spentMs >= this.dryRunCpuMs) {
      const ms = this.dryRunCpuMs;
      throw this.fail(
        new SandboxLimitError(
          "dryRunCpuMs",
          ms,
          this.spentMs,
          `validation's dry run used its CPU budget, dryRunCpuMs=${formatCount(ms)} ms (it ran ${formatCount(this.spentMs)} ms)`,
        ),
      );
    }
    return { ms: this.dryRunCpuMs, spentBeforeMs: this.spentMs };
  }

  /** One crossing: sends the ops, charges each slot its CPU, turns a failed op into the pool's error. */
  private run<T>(batch: Batch<T>): T[] {
    if (batch.ops.length === 0) return this.settle(batch, null);
    return this.settle(batch, this.sandbox.call(batch.ops, batch.budgets, crossingLabel(batch)));
  }

  /** One crossing without blocking this thread: resolves once the sandbox has answered, with the function that checks the answer. */
  private async runLater<T>(batch: Batch<T>): Promise<() => T[]> {
    const label = crossingLabel(batch);
    const answer = batch.ops.length === 0 ? null : await this.sandbox.answerAsync(batch.ops, batch.budgets, label);
    return () => this.settle(batch, answer && this.sandbox.parse(answer, batch.ops, batch.budgets, label));
  }

  /** A crossing's answers, checked, with each slot charged its CPU (none: no crossing was needed). */
  private settle<T>({ ops, budgets, check }: Batch<T>, response: GuestResponse | null): T[] {
    if (!response) {
      if (this.sandbox.failed) throw this.sandbox.failed;
      return [];
    }
    const startedAt = this.sandbox.hostWorkStart();
    const values: T[] = [];
    const { results, starts } = response;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      const budget = budgets[i]!;
      const slot = slotOf(op);
      if (slot !== null) {
        this.spentMs += response.ms[i]!;
        if (op[0] === "step") {
          this.stepCpu.steps += 1;
          this.stepCpu.ms += response.ms[i]!;
        }
        const state = this.slotState(slot);
        state.cpuMs = (op[0] === "reset" ? 0 : state.cpuMs) + response.ms[i]!;
        if (state.cpuMs > this.limits.cpuMsPerEpisode) {
          const where = this.sandbox.whereStopped(budget);
          throw this.fail(
            new SandboxLimitError(
              "cpuMsPerEpisode",
              this.limits.cpuMsPerEpisode,
              state.cpuMs,
              `${budget.label} exceeded cpuMsPerEpisode=${formatCount(this.limits.cpuMsPerEpisode)} ms (the episode ran ${formatCount(state.cpuMs)} ms)${stoppedAtText(where)}`,
              where?.location ?? null,
            ),
          );
        }
      }
      const at = starts[i]!;
      const n = results[at] as number;
      if (n !== FAILED) {
        try {
          values.push(check(results, at + 1, n, i));
        } catch (error) {
          if (!(error instanceof SandboxError)) throw this.fail(new SandboxError("runtime", `${budget.label}: ${(error as Error).message}`));
          // an answer refused here, as the guest would have refused it: at the user's function that returned it
          const location = error.location ?? (error.kind === "contract" && budget.fn ? this.locateFunction(budget.fn) : null);
          throw this.fail(location === error.location ? error : new SandboxError(error.kind, error.message, { location, userStack: error.userStack }));
        }
        continue;
      }
      const failure = results[at + 1] as GuestFailure | undefined;
      if (!failure || typeof failure !== "object" || typeof failure.message !== "string") {
        throw this.fail(new SandboxError("runtime", `${budget.label}: the sandbox's answer is malformed`));
      }
      throw this.fail(this.describeFailure(failure, budget.label));
    }
    this.sandbox.logHostWork("settle", ops.length, startedAt);
    return values;
  }

  private describeFailure(failure: GuestFailure, label: string): SandboxError {
    const message = String(failure.message).slice(0, 2_000);
    if (failure.kind === "contract") {
      const fn = typeof failure.fn === "string" ? failure.fn : null;
      return new SandboxError("contract", `${label}: ${message}`, { location: fn ? this.locateFunction(fn) : null });
    }
    if (failure.kind === "limit") {
      const length = typeof failure.length === "number" ? failure.length : 0;
      return new SandboxLimitError(
        "maxObservationChars",
        this.limits.maxObservationChars,
        length,
        `${label}: ${String(failure.what ?? "a value")} is ${formatCount(length)} characters; limit maxObservationChars=${formatCount(this.limits.maxObservationChars)}`,
      );
    }
    const { location, userStack } = this.sandbox.mapStack(typeof failure.stack === "string" ? failure.stack : undefined);
    return classifyFatal(String(failure.name ?? "Error"), message, this.limits, label, () => this.sandbox.memoryUsedMb(), location, userStack);
  }

  /** Where the user defined `step` (or another named function), for contract errors that have no stack. */
  private locateFunction(fn: string) {
    return locateFunction(this.sandbox.compiled, fn);
  }
}

/**
 * One slot of a pool, shaped like the SDK's `EnvironmentSession`. Each call answers from the pool's last batch
 * when that batch already holds its answer (`runSandboxedEpisodes` arranges this), else it crosses alone.
 */
export class SandboxedSession {
  sample: DatasetRow | undefined;

  constructor(
    private readonly pool: SandboxedEnvironmentPool,
    readonly slot: number,
  ) {}

  get systemPrompt(): string {
    return this.pool.slotView(this.slot)?.systemPrompt ?? "";
  }

  systemPromptOf(agent: string): string {
    const slot = this.pool.slotView(this.slot);
    return slot?.prompts?.[agent] ?? slot?.systemPrompt ?? "";
  }

  /** The agent to act next (turn-based), null once the episode is over. */
  get agent(): string | null {
    const slot = this.pool.slotView(this.slot);
    return !slot || slot.done ? null : slot.actor;
  }

  reset(seed: number, sample?: DatasetRow, difficulty?: number, seats?: Seats): string {
    const value = this.pool.sessionReset(this.slot, seed, sample, difficulty, seats);
    this.sample = sample;
    return value.observation;
  }

  /** What `agent` sees at the next simultaneous round (the sandbox sends every agent's only for such rounds). */
  observationOf(agent: string): string {
    const view = this.pool.slotView(this.slot)?.views?.[agent];
    if (view === undefined)
      throw new SandboxError("runtime", `episode ${this.slot}: no observation of '${agent}' crossed the sandbox (only a simultaneous round's do)`);
    return view;
  }

  step(actionText: string): SessionStep {
    const value = this.pool.sessionStep(this.slot, actionText);
    const step: SessionStep = { observation: value.observation, reward: value.reward, done: value.done, info: value.info, metrics: value.metrics };
    if (value.seat?.rewards) step.rewards = value.seat.rewards;
    return step;
  }

  stepTogether(actions: Record<string, string>): SessionRound {
    const slot = this.pool.slotView(this.slot);
    if (!slot?.seats?.simultaneous)
      throw new SandboxError("runtime", `episode ${this.slot}: stepTogether() is the simultaneous protocol's; this episode is played turn by turn`);
    const { agents } = slot.seats;
    checkRoundActions(actions, agents, slot.turns + 1);
    const value = this.pool.sessionStep(
      this.slot,
      agents.map((agent) => actions[agent]!),
    );
    const seat = value.seat as GuestSeatValue;
    return {
      observation: value.observation,
      observations: value.done ? null : seat.views,
      reward: value.reward,
      rewards: seat.rewards ?? {},
      done: value.done,
      info: value.info,
      metrics: value.metrics,
      invalid: seat.invalid ?? {},
    };
  }

  render(): string | undefined {
    return this.pool.render(this.slot);
  }

  legalActions(agent?: string): ActionConstraint | null {
    return this.pool.legalActions(this.slot, agent);
  }

  demonstrate(agent?: string): string | null {
    return this.pool.demonstrate(this.slot, agent);
  }

  summary(): SandboxedSummary {
    const slot = this.pool.slotView(this.slot);
    const end = slot?.end;
    if (slot && end) {
      const { pool, slot: index } = this;
      const { episode } = slot;
      let state: { value: Json } | null = null;
      return {
        // Fetched on first read (a rollout reads only the counts): one crossing, while the slot holds this episode.
        get state() {
          state ??= { value: pool.finalState(index, episode) };
          return state.value;
        },
        turns: end.turns,
        totalReward: end.totalReward,
        done: true,
        truncated: end.truncated,
        invalidActions: end.invalidActions,
        breakdown: { ...end.breakdown },
      };
    }
    return this.pool.summary(this.slot);
  }

  /** Invalid actions in this episode so far: from its end once it has ended, else from a summary. */
  get invalidActions(): number {
    return this.pool.slotView(this.slot)?.end?.invalidActions ?? this.summary().invalidActions;
  }

  score(): number {
    return this.pool.score(this.slot);
  }

  rewardBreakdown(): Record<string, number> {
    // An ended episode's is in its end: no summary (an object with a getter, ~1 µs in V8) is made for it.
    const end = this.pool.slotView(this.slot)?.end;
    return { ...(end ? end.breakdown : this.summary().breakdown) };
  }
}

export type SandboxedPlayOptions = {
  fitsContext?: (messages: ChatMessage[]) => boolean;
  /**
   * Parts of the batch that take turns (see ./lanes.ts): while the policy samples one lane's actions, the
   * sandbox's thread steps another's. A number of parts of equal size (1: the whole batch in one part), or their
   * relative sizes. Default: `laneShape` of the protocol.
   */
  lanes?: number | number[];
  /** false: a lane's steps are answered before the next lane samples (the same calls in the same order, no overlap). */
  overlap?: boolean;
  /**
   * The starts of the batch that will be played next in this pool (the RL loop's next step): their resets run
   * during this batch, in the crossing that runs while its first lane samples, and that batch then starts
   * sampling at once. Played with other starts, it resets its own as usual.
   */
  next?: EpisodeStartSpec[];
};

/**
 * `runEpisodes` over sandboxed sessions, with one crossing per round of a lane instead of one per episode: lane
 * 0's resets go in one batch and every other lane's in a second (which runs while lane 0 samples), and after
 * `act` answers a lane's round, all of that round's steps go in one batch; the sandbox's thread runs each batch
 * while the next lane samples.
 *
 * A batch whose episodes were reset ahead (a previous batch's `next`) skips its resets: its first lane samples
 * at once, and the second crossing holds only the next batch's resets, if it was told them. The two alternate
 * between the pool's two banks of slots (`bankSlots`).
 *
 * `act` is called for lane 0's round, lane 1's, …, then lane 0's next round, and so on, whether the steps
 * overlap or not: the same calls in the same order, so the same results. With one lane, the calls of
 * `runEpisodes`. With more, each round's requests come in parts, in episode order: a policy that answers each
 * request on its own answers as with one lane, but the runtime's sampler does not (its random draws interleave a
 * batch's rows token by token, and its arithmetic depends on the batch's rows in the last bits).
 */
export async function runSandboxedEpisodes(
  protocol: Protocol,
  pool: SandboxedEnvironmentPool,
  starts: EpisodeStartSpec[],
  act: (requests: ActRequest[]) => Promise<ActResponse[]>,
  options: SandboxedPlayOptions = {},
): Promise<Trajectory[]> {
  const { overlap = true, fitsContext } = options;
  const seats: Seats = { agents: protocol.agents, simultaneous: protocol.name === "simultaneous" };
  const { base, prepared } = pool.claimBank(starts);
  const cuts = laneStarts(starts, options.lanes ?? laneShape(protocol, prepared));
  // The next batch's episodes go to the other bank, and only where a crossing runs while a lane samples.
  const next = options.next?.length && cuts.length > 1 && starts.length <= bankSlots && options.next.length <= bankSlots ? options.next : null;
  const nextBase = base === 0 ? bankSlots : 0;
  /**
   * Checking and applying the answer to the next batch's resets, which only has to be done before this returns:
   * kept for when this thread would otherwise wait (the schedule's stall).
   */
  let readAhead: (() => void) | null = null;
  const runReadAhead = () => {
    const read = readAhead;
    readAhead = null;
    try {
      read?.();
    } catch (error) {
      schedule.abort(error);
    }
  };
  /**
   * When nothing can go on before the batch in flight is answered (see `LaneSchedule`'s stall): reads the next
   * batch's resets, then blocks until the sandbox answers, which settles that lane's promise at once (an `await`
   * would notice the answer only when the event loop ran the wait's task: in a rollout's last crossing ~0.5 ms
   * later on average, 2 ms at the 90th percentile).
   * A batch the sandbox has already answered is only taken: its lane reads it in a moment (the schedule hears
   * of it a few promise callbacks later), so nothing waits, and the read-ahead is kept for a real wait, such as
   * the last lane's steps, where this thread would otherwise idle (arithmetic, 32 × 8: ~0.1 ms a rollout that
   * was read between two lanes' sampling, where the policy waited for it).
   */
  const schedule = new LaneSchedule(cuts.length, () => {
    pool.takeIfAnswered();
    if (!pool.awaitingAnswer) return;
    runReadAhead();
    pool.waitForAnswer();
  });
  /**
   * One crossing that resets the episodes of lanes `first` to `last - 1` (none when they were reset ahead), and
   * with the later lanes', the next batch's; each of those lanes then runs the protocol.
   */
  const resetLanes = async (first: number, last: number): Promise<void> => {
    const from = cuts[first]!;
    const ahead = first > 0 && next ? next : null;
    const aheadResets: SlotStart[] = ahead
      ? ahead.map(({ seed, sample, difficulty }, i) => ({ slot: nextBase + i, seed, sample, difficulty, index: i, seats }))
      : [];
    const resets: SlotStart[] = prepared
      ? []
      : starts
          .slice(from, cuts[last] ?? starts.length)
          .map(({ seed, sample, difficulty }, i) => ({ slot: base + from + i, seed, sample, difficulty, index: from + i, seats }));
    try {
      if (ahead) pool.setPrepared(null); // the other bank is overwritten from here on
      if (resets.length === 0 && ahead) {
        // Only the next batch's: these lanes go on once the sandbox has answered, and the answer is read when
        // this thread would otherwise wait (runReadAhead).
        const settle = await (await schedule.crossing(first, () => pool.resetMany(aheadResets, { readLater: true }))).answer;
        readAhead = () => {
          settle();
          pool.setPrepared({ base: nextBase, starts: ahead });
        };
      } else if (resets.length > 0) {
        await (await schedule.crossing(first, () => pool.resetMany([...resets, ...aheadResets]))).answer;
        if (ahead) pool.setPrepared({ base: nextBase, starts: ahead });
      }
    } finally {
      schedule.answered();
      for (let lane = first; lane < last; lane++) schedule.crossed(lane);
    }
  };
  // Resets: lane 0's in a crossing of its own (the policy waits for it), every later lane's in one more, which
  // runs while lane 0 samples: one crossing in each sampling window, as the steps that follow need.
  let laterResets: Promise<void> | null = null;
  const playLane = async (lane: number): Promise<Trajectory[]> => {
    const from = cuts[lane]!;
    const laneEpisodes = starts.slice(from, cuts[lane + 1] ?? starts.length);
    // runEpisodes is typed against the SDK's class; SandboxedSession has the same public surface (not its
    // internal `advance`, which only the sandbox's bridge calls).
    const episodes: EpisodeStart[] = laneEpisodes.map(({ seed, sample, difficulty }, i) => ({
      session: pool.session(base + from + i) as unknown as EnvironmentSession,
      seed,
      sample,
      difficulty,
    }));
    const laneAct = async (laneRequests: ActRequest[]): Promise<ActResponse[]> => {
      const requests = laneRequests.map((request) => ({ ...request, episode: request.episode + from }));
      await schedule.sampleTurn(lane);
      const responses = await act(requests);
      // The previous crossing's answer came while the policy sampled: taken now, this lane posts at once.
      pool.takeIfAnswered();
      // A wrong count fails runEpisodes; nothing is stepped.
      if (responses.length !== requests.length) return responses;
      const steps: SlotStep[] = seats.simultaneous
        ? roundsOf(requests, responses, seats.agents, base)
        : requests.map((request, i) => ({ slot: base + request.episode, action: responses[i]!.text }));
      const stepping = await schedule.crossing(lane, () => pool.stepMany(steps, { readLater: true }));
      let read: () => unknown;
      try {
        if (overlap) schedule.passTurn(lane);
        read = await stepping.answer;
      } catch (error) {
        schedule.answered();
        schedule.crossed(lane);
        throw error;
      }
      schedule.answered();
      // Read once the other lanes have posted theirs (see LaneSchedule.readTurn); at once when they take no turns.
      if (overlap) await schedule.readTurn(lane);
      schedule.crossed(lane);
      read();
      if (!overlap) schedule.passTurn(lane);
      return responses;
    };
    try {
      await (lane === 0 ? resetLanes(0, 1) : (laterResets ??= resetLanes(1, cuts.length)));
      return await runEpisodes(protocol, episodes, laneAct, { fitsContext });
    } catch (error) {
      schedule.abort(error);
      throw error;
    } finally {
      schedule.finish(lane);
    }
  };
  // Every lane settles before this returns, so no sampling or crossing outlives a failed batch.
  const played = await Promise.allSettled(cuts.map((_, lane) => playLane(lane)));
  if (!schedule.error) runReadAhead();
  if (schedule.error) throw schedule.error.error;
  return played.flatMap((result) => (result.status === "fulfilled" ? result.value : []));
}

/**
 * A simultaneous round's steps, one per episode: its agents' actions (its requests are consecutive) through the
 * barrier, in the order of the agents.
 */
function roundsOf(requests: ActRequest[], responses: ActResponse[], agents: readonly string[], base: number): SlotStep[] {
  const steps: SlotStep[] = [];
  for (let from = 0; from < requests.length; ) {
    const episode = requests[from]!.episode;
    const barrier = new RoundBarrier(agents);
    let to = from;
    for (; to < requests.length && requests[to]!.episode === episode; to++) barrier.admit(requests[to]!.agent, responses[to]!.text);
    const actions = barrier.close();
    steps.push({ slot: base + episode, actions: agents.map((agent) => actions[agent]!) });
    from = to;
  }
  return steps;
}

/** Whether a batched step's action is the one now applied (a simultaneous round's: the same texts in order). */
function sameAction(batched: string | string[], applied: string | string[]): boolean {
  if (typeof batched === "string" || typeof applied === "string") return batched === applied;
  return batched.length === applied.length && batched.every((text, i) => text === applied[i]);
}

// ---- checks of what the guest answers ----

function checkSlot(slot: number): void {
  if (!Number.isInteger(slot) || slot < 0 || slot >= maxSlots) {
    throw new SandboxError("runtime", `slot must be a whole number from 0 to ${maxSlots - 1}; got ${String(slot)}`);
  }
}
