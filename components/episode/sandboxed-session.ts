/**
 * An experiment's own environment, run in this browser as a run runs it on the server: its compiled bundle (the
 * SDK, the bridge and the user's modules, from `runs.playable`) in a QuickJS WebAssembly instance of its own, with
 * the run's memory and stack limits, and each reset or step stopped by QuickJS's interrupt once it passes its CPU
 * budget (the per-call limit, or what is left of the episode's). The answers are checked as the server checks
 * them (server/sandbox/answers.ts, through the sandbox's browser entry, browser.ts). A browser has no CPU clock, so an op is charged its wall time.
 *
 * One episode at a time, shaped like the SDK's `EnvironmentSession` for `runEpisodes`; runs in a worker
 * (environment.worker.ts), where a long step blocks nothing but that worker.
 */
import type { ActionConstraint } from "@/lib/sdk/action-space";
import type { DatasetRow, Json, SessionStep } from "@/lib/sdk/environment";
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

  reset(seed: number, sample?: DatasetRow): string {
    this.seed = seed;
    this.sample = sample;
    this.turn = 0;
    this.spentMs = 0;
    this.end = null;
    const where = { label: `reset of the episode (seed ${seed})` };
    const [values] = this.run([["reset", 0, seed, sample ?? null]], where.label);
    const answer = this.answers.checkReset(values!, 0, values!.length, where);
    this.prompt = answer.systemPrompt;
    this.lastRender = answer.render;
    this.nextActions = answer.legalActions;
    return answer.observation;
  }

  step(actionText: string): SessionStep {
    if (this.end) throw new BrowserSandboxError("step() called on a finished episode; call reset() first");
    this.turn += 1;
    const where = { label: `step ${this.turn} of the episode (seed ${this.seed})` };
    const [values] = this.run([["step", 0, actionText]], where.label);
    const answer = this.answers.checkStep(values!, 0, values!.length, where);
    this.lastRender = answer.render;
    this.nextActions = answer.legalActions;
    this.end = answer.end;
    const info: Record<string, Json> = answer.end?.truncated ? { ...answer.info, truncated: true } : answer.info;
    return { observation: answer.observation, reward: answer.reward, done: answer.done, info, metrics: answer.metrics };
  }

  render(): string | undefined {
    return this.lastRender ?? undefined;
  }

  /** The next turn's legal actions: the state's own, else the description's (null when it declares none, or at the end). */
  legalActions(): ActionConstraint | null {
    if (this.end) return null;
    return this.environment.actions === "state" ? this.nextActions : this.environment.actions;
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
