/**
 * An experiment's own environment, run in this browser as a run runs it on the server: its compiled bundle (the
 * SDK, the bridge and the user's modules, from `runs.playable`) in a QuickJS WebAssembly instance of its own, with
 * the run's memory and stack limits, and each reset or step stopped by QuickJS's interrupt once it passes its CPU
 * budget (the per-call limit, or what is left of the episode's). The answers are checked as the server checks
 * them (server/sandbox/answers.ts, through the sandbox's browser entry, browser.ts). A browser has no CPU clock, so an op is charged its wall time.
 *
 * One episode at a time, shaped like the SDK's `EnvironmentSession` for `runEpisodes`, several agents included
 * (the protocol's seats cross with the reset; the agent to act, each agent's prompt and per-agent rewards come
 * back); runs in a worker (environment.worker.ts), where a long step blocks nothing but that worker.
 */
import type { ActionConstraint } from "@/lib/sdk/action-space";
import { checkRoundActions, type DatasetRow, type Json, type Seats, type SessionRound, type SessionStep } from "@/lib/sdk/environment";
import {
  AnswerReader,
  checkDescription,
  checkSummary,
  type EnvironmentDescription,
  encodeRequest,
  FAILED,
  finite,
  type GuestEpisodeEnd,
  type GuestFailure,
  type GuestOp,
  QuickJSEngine,
  type SandboxedSummary,
  type SandboxLimits,
} from "@/server/sandbox/browser";

class BrowserSandboxError extends Error {}

/** What a reset or step of an episode with several agents answers beyond a single agent's (the sandbox's SeatValue). */
type SeatValue = NonNullable<ReturnType<AnswerReader["checkStep"]>["seat"]>;

export class BrowserSandboxedSession {
  sample: DatasetRow | undefined;
  private readonly answers: AnswerReader;
  private seed = 0;
  private turn = 0;
  private spentMs = 0;
  private prompt = "";
  private lastRender: string | null = null;
  private nextActions: ActionConstraint | null = null;
  private end: GuestEpisodeEnd | null = null;
  /** The episode's agents when there are several (null: one agent, whose values need not cross). */
  private seats: Seats | null = null;
  /** The agent to act next, each agent's system prompt, and in a simultaneous round each agent's view and legal actions. */
  private actor = "agent";
  private prompts: Record<string, string> | null = null;
  private views: Record<string, string> | null = null;
  private legalByAgent: Record<string, ActionConstraint | null> | null = null;

  private constructor(
    private readonly engine: QuickJSEngine,
    readonly environment: EnvironmentDescription,
    private readonly limits: SandboxLimits,
  ) {
    this.answers = new AnswerReader(environment.actions, limits);
  }

  /** Loads the bundle (its top level under the episode's CPU budget) and asks the environment to describe itself. */
  static async load(code: string, limits: SandboxLimits, wasmModule: WebAssembly.Module): Promise<BrowserSandboxedSession> {
    const { engine, outcome } = await QuickJSEngine.load(code, "sandbox.js", limits, () => {}, { wasmModule });
    if (!engine || !outcome.ok) {
      const failed = outcome as Exclude<typeof outcome, { ok: true }>;
      const why =
        failed.reason === "overrun"
          ? `loading the code took more than cpuMsPerEpisode=${limits.cpuMsPerEpisode} ms`
          : failed.reason === "no-bridge"
            ? "the bundle did not start the sandbox's bridge"
            : `${failed.error.name}: ${failed.error.message}`;
      throw new BrowserSandboxError(`the environment could not be loaded: ${why}`);
    }
    const budget = limits.cpuMsPerCall;
    const [, description] = runOps(engine, [["configure", limits.maxObservationChars], ["describe"]], [budget, budget], "describing the environment");
    return new BrowserSandboxedSession(engine, checkDescription(description![0]), limits);
  }

  get systemPrompt(): string {
    return this.prompt;
  }

  /** Each agent's own system prompt (the shared one when the definition's is not a function of the agent). */
  systemPromptOf(agent: string): string {
    return this.prompts?.[agent] ?? this.prompt;
  }

  /** The agent to act next (turn-based), null once the episode is over. */
  get agent(): string | null {
    return this.end ? null : this.actor;
  }

  reset(seed: number, sample?: DatasetRow, difficulty?: number, seats?: Seats): string {
    this.seed = seed;
    this.sample = sample;
    this.turn = 0;
    this.spentMs = 0;
    this.end = null;
    // Seats cross only for an episode that is not a single "agent"'s (the guest's session assumes that one).
    const oneSeat = !seats || (seats.agents.length === 1 && seats.agents[0] === "agent" && !seats.simultaneous);
    this.seats = seats && (seats.agents.length > 1 || seats.simultaneous) ? seats : null;
    const where = { label: `reset of the episode (seed ${seed})` };
    const op: GuestOp = oneSeat ? ["reset", 0, seed, sample ?? null, difficulty ?? null] : ["reset", 0, seed, sample ?? null, difficulty ?? null, seats];
    const [values] = this.run([op], where.label);
    const answer = this.answers.checkReset(values!, 0, values!.length, where, this.seats);
    this.prompt = answer.systemPrompt;
    this.lastRender = answer.render;
    this.nextActions = answer.legalActions;
    this.actor = answer.seat?.actor ?? seats?.agents[0] ?? "agent";
    this.prompts = answer.seat?.prompts ?? null;
    this.takeSeat(answer.seat);
    return answer.observation;
  }

  /** What `agent` sees at the next simultaneous round (the sandbox sends every agent's only for such rounds). */
  observationOf(agent: string): string {
    const view = this.views?.[agent];
    if (view === undefined) throw new BrowserSandboxError(`no observation of '${agent}' crossed the sandbox (only a simultaneous round's do)`);
    return view;
  }

  step(actionText: string): SessionStep {
    if (this.seats?.simultaneous) throw new BrowserSandboxError("step() under the simultaneous protocol: a round is played with stepTogether(actions)");
    const answer = this.advance(["step", 0, actionText], "step");
    const step: SessionStep = { observation: answer.observation, reward: answer.reward, done: answer.done, info: answer.info, metrics: answer.metrics };
    if (answer.seat?.rewards) step.rewards = answer.seat.rewards;
    return step;
  }

  /** A simultaneous round: every agent's action at once (an invalid one costs only its agent). */
  stepTogether(actions: Record<string, string>): SessionRound {
    if (!this.seats?.simultaneous) throw new BrowserSandboxError("stepTogether() is the simultaneous protocol's; this episode is played turn by turn");
    const { agents } = this.seats;
    checkRoundActions(actions, agents, this.turn + 1);
    const answer = this.advance(["round", 0, agents.map((agent) => actions[agent]!)], "round");
    const seat = answer.seat as SeatValue;
    return {
      observation: answer.observation,
      observations: answer.done ? null : seat.views,
      reward: answer.reward,
      rewards: seat.rewards ?? {},
      done: answer.done,
      info: answer.info,
      metrics: answer.metrics,
      invalid: seat.invalid ?? {},
    };
  }

  /** Runs a step or a round, and keeps what the next turn needs. */
  private advance(op: GuestOp, what: "step" | "round") {
    if (this.end) throw new BrowserSandboxError(`${what === "step" ? "step()" : "stepTogether()"} called on a finished episode; call reset() first`);
    this.turn += 1;
    const where = { label: `${what} ${this.turn} of the episode (seed ${this.seed})` };
    const [values] = this.run([op], where.label);
    const answer = this.answers.checkStep(values!, 0, values!.length, where, this.seats);
    this.lastRender = answer.render;
    this.nextActions = answer.legalActions;
    this.end = answer.end;
    if (answer.seat?.actor) this.actor = answer.seat.actor;
    this.takeSeat(answer.seat);
    const info: Record<string, Json> = answer.end?.truncated ? { ...answer.info, truncated: true } : answer.info;
    return { ...answer, info };
  }

  private takeSeat(seat: SeatValue | undefined) {
    this.views = seat?.views ?? null;
    this.legalByAgent = seat?.legal ?? null;
  }

  render(): string | undefined {
    return this.lastRender ?? undefined;
  }

  /**
   * The next turn's legal actions (in a simultaneous round, `agent`'s): the state's own, else the description's
   * (null when it declares none, or at the end).
   */
  legalActions(agent?: string): ActionConstraint | null {
    if (this.end) return null;
    if (this.environment.actions !== "state") return this.environment.actions;
    if (agent === undefined || agent === this.actor) return this.nextActions;
    const legal = this.legalByAgent?.[agent];
    if (legal === undefined) throw new BrowserSandboxError(`the legal actions of '${agent}', who is not to act, did not cross the sandbox`);
    return legal;
  }

  get invalidActions(): number {
    return this.end?.invalidActions ?? this.summary().invalidActions;
  }

  rewardBreakdown(): Record<string, number> {
    return { ...(this.end?.breakdown ?? this.summary().breakdown) };
  }

  score(): number {
    if (this.end) return this.end.score;
    const label = `score of the episode (seed ${this.seed})`;
    const [values] = this.run([["score", 0]], label);
    return finite(values![0], `${label}: the score`);
  }

  summary(): SandboxedSummary {
    const label = `summary of the episode (seed ${this.seed})`;
    const [values] = this.run([["summary", 0]], label);
    return checkSummary(values![0], label);
  }

  /** Runs ops on the episode within what is left of its CPU budget, and counts what they spent. */
  private run(ops: GuestOp[], label: string): unknown[][] {
    const budgets = ops.map(() => Math.max(0, Math.min(this.limits.cpuMsPerCall, this.limits.cpuMsPerEpisode - this.spentMs)));
    return runOps(this.engine, ops, budgets, label, (ms) => (this.spentMs += ms), this.limits);
  }
}

/** Each op's values (its record without the length), or a BrowserSandboxError naming the op and what went wrong. */
function runOps(
  engine: QuickJSEngine,
  ops: GuestOp[],
  budgetsMs: number[],
  label: string,
  spent: (ms: number) => void = () => {},
  limits?: SandboxLimits,
): unknown[][] {
  const outcome = engine.run(encodeRequest(ops), budgetsMs, () => {});
  for (const ms of outcome.ms) spent(ms);
  if (!outcome.ok) {
    if (outcome.overrunMs !== null) {
      const limit = limits && budgetsMs[outcome.op]! < limits.cpuMsPerCall ? "cpuMsPerEpisode" : "cpuMsPerCall";
      throw new BrowserSandboxError(`${label} ran past its CPU budget (${limit}, ${Math.round(budgetsMs[outcome.op]!)} ms) and was stopped`);
    }
    throw new BrowserSandboxError(`${label} failed: ${outcome.error ? `${outcome.error.name}: ${outcome.error.message}` : "the sandbox stopped"}`);
  }
  const flat = JSON.parse(outcome.results) as unknown[];
  const records: unknown[][] = [];
  for (let at = 0; records.length < ops.length; ) {
    const n = flat[at];
    if (n === FAILED) {
      const failure = flat[at + 1] as GuestFailure;
      throw new BrowserSandboxError(`${label}: ${failure.fn ? `${failure.fn}() ` : ""}${failure.message}`);
    }
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || at + 1 + n > flat.length) throw new BrowserSandboxError(`${label}: the answer is malformed`);
    records.push(flat.slice(at + 1, at + 1 + n));
    at += 1 + n;
  }
  return records;
}
