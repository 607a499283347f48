/**
 * The isolation boundary, host side. Each sandbox is a QuickJS WebAssembly instance (quickjs-engine.ts) in its
 * own worker thread (thread-entry.ts): its own linear memory, heap and stack limits, and an interrupt handler
 * that stops an op past its CPU budget. Calls are synchronous: the host posts a batch of ops and waits on memory
 * shared with the thread (Atomics.wait), and while it waits it is the watchdog: an op still running when its
 * budget plus `watchdogGraceMs` is over is stopped by terminating the thread, which also stops a single long
 * native call (a huge sort or JSON.parse) that the interrupt handler never sees. The guest can reach nothing on
 * the host but the answer strings.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { MessageChannel, type MessagePort, Worker, receiveMessageOnPort } from "node:worker_threads";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { type CompiledEnvironment, bundleFileName, locateFunction } from "./compile";
import { SandboxError, SandboxLimitError, type SourceLocation, formatCount } from "./errors";
import type { SandboxLimits } from "./limits";
import type { BatchOutcome, LoadOutcome, ThrownFields } from "./quickjs-engine";
import type { ThreadData } from "./thread-entry";
import {
  ANSWERED,
  BATCH_RAN_AT,
  BATCH_STARTED_AT,
  CURRENT_OP,
  Mailbox,
  type MailboxRequest,
  OP_CPU_AT,
  OP_STARTED_AT,
  REQUESTED,
  sharedBytes,
} from "./mailbox";
import { FAILED, type GuestOp, type GuestResponse, encodeRequest, processCpuMs } from "./wire";

/** A batch's answer as the thread posted it, before `parse`. */
export type BatchAnswer = Extract<BatchOutcome, { ok: true }>;

/** An `answerAsync` call whose answer has not been taken yet. */
type PendingAnswer = {
  budgets: OpBudget[];
  label: string;
  postedAt: number;
  resolve: (answer: BatchAnswer) => void;
  reject: (error: unknown) => void;
};

/**
 * What one op may spend, and which limit that is (the smaller of the per-call and the episode's remainder);
 * `fn`, the user's function the op calls ("step", "reset", …), locates a limit error that has no stack to say
 * where the code was (a watchdog stop, a check after the op).
 */
export type OpBudget = {
  ms: number;
  limit: "cpuMsPerCall" | "cpuMsPerEpisode" | "dryRunCpuMs";
  spentBeforeMs: number;
  label: string;
  readonly fn?: string | null;
  /** Validation's budget for all the pool's ops, and what they had spent before this one (limit "dryRunCpuMs"). */
  readonly dryRun?: { ms: number; spentBeforeMs: number } | null;
};

/**
 * How long past its budget an op may run before the host terminates its thread. The thread's own interrupt
 * handler normally stops it first (within a millisecond or so); this catches what that handler cannot reach.
 */
const watchdogGraceMs = 25;

/** Starting the thread and QuickJS is not the user's CPU time; this bounds it separately. */
const threadStartMs = 30_000;

/** An op measured this much over its budget afterwards has overrun (timer granularity). */
const overrunToleranceMs = 2;

const FRAME = /^(\s*at )(.*?) \((?:[^()]*?)?sandbox\.js:(\d+):(\d+)\)$/;

const epochNow = () => performance.timeOrigin + performance.now();

/** `Atomics.waitAsync` (ES2024, in Node since 16; this project's TypeScript lib is ES2023). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): { async: false; value: string } | { async: true; value: Promise<string> };
  }
).waitAsync;

/**
 * One crossing's times, epoch milliseconds: the host posted the batch, the thread took it (so `startedAt -
 * postedAt` is the thread's wake-up), the thread had run its ops, and the host took the answer.
 */
export type CrossingTiming = { ops: number; postedAt: number; startedAt: number; ranAt: number; takenAt: number };

/**
 * A call of one of the host thread's own sandbox functions, for a batch of `ops` ops, and how long it took
 * (milliseconds): building the batch (the pool's checks and budgets), posting it (encoding, the mailbox, waking the
 * thread), taking its answer from the mailbox, parsing it, settling it (the pool's checks of each op's answer).
 * Inside a rollout these cost several times what they cost in a loop of their own, so they are measured there
 * (bench:sandbox-anatomy).
 */
export type HostWork = { what: "build" | "post" | "take" | "parse" | "settle"; ops: number; ms: number };

/**
 * What a bench observes of a sandbox, through hooks it installs (`pool.installProbe`); production installs none,
 * and then nothing is timed or kept.
 */
export interface SandboxProbe {
  /** Each call of the host thread's sandbox functions (see HostWork). */
  hostWork?(work: HostWork): void;
  /** Each crossing's times, as its answer is taken. */
  crossing?(timing: CrossingTiming): void;
  /** Each time the host thread blocked for an answer, in milliseconds. */
  blocked?(ms: number): void;
}

/** Terminates the thread of a sandbox that was dropped without dispose(). */
const orphans = new FinalizationRegistry<Worker>((worker) => void worker.terminate());

export class QuickJSSandbox {
  private failure: SandboxError | null = null;
  private disposed = false;
  /** A batch has been posted and its answer not yet taken. */
  private inFlight = false;
  /** The batch `answerAsync` posted, until its answer is taken (by its own wait, or by `takeIfAnswered`). */
  private pending: PendingAnswer | null = null;
  /** `watchAnswer` calls still waiting (one whose answer was taken for it waits out its last wake-up). */
  private watchers = 0;
  /** An immediate is set to start the event loop's wait for whichever batch is then in flight. */
  private watchScheduled = false;
  private lastMemoryMb = 0;
  /** The last batch posted: when (epoch milliseconds), and its ops. */
  private postedAt = 0;
  private postedOps = 0;
  /** A bench's hooks (SandboxProbe), or null. */
  probe: SandboxProbe | null = null;

  /** When a function `logHostWork` will time started: the clock's reading while a probe takes host work (else 0, unread). */
  hostWorkStart(): number {
    return this.probe?.hostWork ? performance.now() : 0;
  }

  /** Hands a call that started at `startedAt` (`hostWorkStart`) to the probe, if one takes host work. */
  logHostWork(what: HostWork["what"], ops: number, startedAt: number): void {
    this.probe?.hostWork?.({ what, ops, ms: performance.now() - startedAt });
  }
  private readonly mailbox: Mailbox;
  private readonly control: Int32Array;
  private readonly clock: Float64Array;
  /** Resolves once the thread has stopped (after dispose() or a watchdog stop). */
  readonly stopped: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    private readonly port: MessagePort,
    shared: SharedArrayBuffer,
    readonly compiled: CompiledEnvironment,
    private readonly limits: SandboxLimits,
  ) {
    this.mailbox = new Mailbox(shared);
    ({ control: this.control, clock: this.clock } = this.mailbox);
    // The listener must not hold `this`: the registry below holds the worker, and through it its listeners.
    this.stopped = new Promise((resolve) => worker.once("exit", () => resolve()));
    orphans.register(this, worker, this);
  }

  /** Starts the thread and loads the bundle: evaluates the SDK, the bridge and the user's modules, under the episode CPU budget. */
  static async create(compiled: CompiledEnvironment, limits: SandboxLimits): Promise<QuickJSSandbox> {
    const shared = new SharedArrayBuffer(sharedBytes);
    Atomics.store(new Mailbox(shared).control, CURRENT_OP, -1);
    const { port1, port2 } = new MessageChannel();
    const data: ThreadData = {
      code: compiled.code,
      fileName: bundleFileName,
      limits: { memoryMb: limits.memoryMb, maxStackKb: limits.maxStackKb, cpuMsPerEpisode: limits.cpuMsPerEpisode },
      shared,
      port: port2,
      wasmModule: await quickjsModule(),
    };
    // The bundle is plain JavaScript: the thread takes none of this process's flags (a TypeScript loader's
    // hooks, inherited, would cost each thread a few hundred milliseconds to start).
    const worker = new Worker(await threadBundle(), { eval: true, execArgv: [], workerData: data, transferList: [port2], stdout: true, stderr: true });
    const outcome = await new Promise<LoadOutcome | Error>((resolve) => {
      // Starting the thread is not the user's time; once it evaluates the user's code, cpuMsPerEpisode counts
      // (inside the thread, and here too, for a long native call the thread's interrupt handler cannot stop).
      let timer = setTimeout(() => resolve(new Error("the thread did not start")), threadStartMs);
      const watchLoad = (startedAt: number, cpuStartedAt: number) => {
        const used = Math.min(performance.now() - startedAt, processCpuMs() - cpuStartedAt);
        const left = limits.cpuMsPerEpisode + watchdogGraceMs - used;
        if (left <= 0) resolve(new Error("timeout"));
        else timer = setTimeout(watchLoad, Math.max(left, 1), startedAt, cpuStartedAt);
      };
      worker.on("message", (message: LoadOutcome | "evaluating" | "ready") => {
        clearTimeout(timer);
        if (message === "evaluating") watchLoad(performance.now(), processCpuMs());
        else if (message === "ready") resolve({ ok: true });
        else if (!message.ok) resolve(message);
        else timer = setTimeout(() => resolve(new Error("the thread did not start")), threadStartMs);
      });
      worker.once("error", (error) => {
        clearTimeout(timer);
        resolve(error);
      });
    });
    worker.removeAllListeners("message");
    worker.removeAllListeners("error");
    // A thread that dies later fails its calls (the watchdog or a missing answer); its error must not reach the
    // host's process as an unhandled event.
    worker.on("error", () => {});
    if (outcome instanceof Error || !outcome.ok) {
      void worker.terminate();
      port1.close();
      if (outcome instanceof Error) {
        if (outcome.message === "timeout") {
          throw new SandboxLimitError(
            "cpuMsPerEpisode",
            limits.cpuMsPerEpisode,
            null,
            `loading the environment exceeded cpuMsPerEpisode=${formatCount(limits.cpuMsPerEpisode)} ms (stopped by the watchdog)`,
          );
        }
        throw new SandboxError("runtime", `the sandbox's thread failed to start: ${outcome.message}`);
      }
      throw describeLoadFailure(outcome, compiled, limits);
    }
    worker.unref();
    port1.unref();
    return new QuickJSSandbox(worker, port1, shared, compiled, limits);
  }

  /**
   * Runs a batch of ops in one crossing. Throws (and stays failed) when the guest as a whole fails: a CPU budget
   * overrun, memory or stack exhaustion, a malformed answer. A failure of one op is in its result instead.
   * A batch `answerAsync` posted is answered first (its promise settled with that answer).
   */
  call(ops: GuestOp[], budgets: OpBudget[], label: string): GuestResponse {
    if (this.pending) this.waitForPending(this.pending);
    const postedAt = this.post(ops, budgets);
    try {
      this.blockForAnswer(budgets, postedAt);
    } finally {
      this.inFlight = false;
    }
    return this.parse(this.take(budgets, label), ops, budgets, label);
  }

  /**
   * `call` without blocking this thread: the watchdog waits with `Atomics.waitAsync`, so this thread can work
   * (sample the next group of episodes) while the sandbox's thread runs the batch. One batch at a time. The
   * watchdog then looks only when this thread returns to its event loop: the interrupt handler still stops a
   * running loop on time, but a single long native call may outlive its budget by this thread's longest task.
   * Resolves once the thread has answered (the sandbox can take another batch), with the answer as the thread
   * sent it, which `parse` turns into the GuestResponse when the caller reads it: a rollout reads a lane's answer
   * only when its host thread would otherwise wait. A failure of the guest as a whole fails the sandbox here; one
   * found in the answer's shape or its ops' times, when it is parsed.
   */
  answerAsync(ops: GuestOp[], budgets: OpBudget[], label: string): Promise<BatchAnswer> {
    const postedAt = this.post(ops, budgets);
    return new Promise<BatchAnswer>((resolve, reject) => {
      this.pending = { budgets, label, postedAt, resolve, reject };
      this.watchFromEventLoop();
    });
  }

  /**
   * Starts the event loop's wait for the batch in flight (`watchAnswer`) when this thread next returns to its
   * event loop, which is also when that wait could first notice anything: a rollout takes its answers before
   * (`takeIfAnswered`, `waitForAnswer`), so most batches never need it. One immediate serves every batch posted
   * until it runs. Arming the wait at each post (a promise and a timeout task for `Atomics.waitAsync`) cost the
   * host thread 31-40 µs a crossing inside an arithmetic rollout at the median, against ~3 µs this way
   * (docs/SANDBOX.md).
   */
  private watchFromEventLoop(): void {
    if (this.watchScheduled) return;
    this.watchScheduled = true;
    setImmediate(() => {
      this.watchScheduled = false;
      // Only an immediate starts the wait, and this one serves the batches posted since the last one ran: the
      // batch in flight, if any, is not watched yet.
      if (this.pending) void this.watchAnswer(this.pending);
    });
  }

  /**
   * Takes the answer of the batch `answerAsync` posted if the thread has given it, and settles that call's
   * promise now (true), instead of when this thread's event loop next runs the wait's task: a rollout calls this
   * as soon as a lane's sampling returns, so that the next lane's batch is posted and sampled without a turn of
   * the event loop in between (~0.2 ms on this project's VMs).
   */
  takeIfAnswered(): boolean {
    const pending = this.pending;
    if (!pending || Atomics.load(this.control, ANSWERED) !== 1) return false;
    this.settlePending(pending);
    return true;
  }

  /** A batch `answerAsync` posted is still unanswered, or answered but not yet taken (`takeIfAnswered` takes it). */
  get awaitingAnswer(): boolean {
    return this.pending !== null;
  }

  /**
   * Blocks this thread for up to `maxMs` until the thread answers the batch `answerAsync` posted (the watchdog
   * watching), and settles that call's promise (with the failure, if the wait fails): for when this thread has
   * nothing else to do. The wait in the event loop (`watchAnswer`) noticed a rollout's last answer 0.08 ms after
   * the thread gave it at the median and 2 ms at the 90th percentile; this one, as soon as the thread notifies.
   * A batch still running after `maxMs` is left to the event loop's wait, so that this thread's other tasks
   * (a worker's heartbeats, a stop request) wait no longer than that. True when the batch was settled.
   */
  waitForAnswer(maxMs: number): boolean {
    const pending = this.pending;
    if (!pending) return false;
    try {
      return this.waitForPending(pending, performance.now() + maxMs);
    } catch {
      return true; // waitForPending rejected the call's promise with the failure, which its caller reads
    }
  }

  /** `answerAsync`'s wait for its answer, with the watchdog: settles its promise, unless `takeIfAnswered` did. */
  private async watchAnswer(pending: PendingAnswer): Promise<void> {
    // A pending Atomics.waitAsync does not keep Node's event loop alive (the thread and its port are unref'd):
    // without a reference a script awaiting only this answer would exit with an unsettled promise. The port's
    // costs a flag; a timer, as this used, cost the host thread ~30 µs a crossing in a rollout.
    this.port.ref();
    this.watchers += 1;
    try {
      while (this.pending === pending) {
        if (Atomics.load(this.control, ANSWERED) === 1) {
          this.settlePending(pending);
          break;
        }
        const waiting = waitAsync(this.control, ANSWERED, 0, this.watchdogWait(pending.budgets, pending.postedAt));
        if (waiting.async) await waiting.value;
      }
    } catch (error) {
      if (this.pending === pending) {
        this.endPending();
        pending.reject(error);
      }
    } finally {
      if (--this.watchers === 0) this.port.unref();
    }
  }

  /**
   * Blocks this thread until the thread answers `answerAsync`'s batch (the watchdog watching), and settles it;
   * or, at `until` (`performance.now()` milliseconds), returns false and leaves the batch to `watchAnswer`.
   */
  private waitForPending(pending: PendingAnswer, until = Infinity): boolean {
    try {
      if (!this.blockForAnswer(pending.budgets, pending.postedAt, until)) return false;
    } catch (error) {
      this.endPending();
      pending.reject(error);
      throw error;
    }
    this.settlePending(pending);
    return true;
  }

  /**
   * Blocks this thread until the thread has answered the batch posted at `postedAt` (true), with the watchdog
   * watching (it throws when an op outlives its budget), or until `until` (`performance.now()` ms: false).
   */
  private blockForAnswer(budgets: OpBudget[], postedAt: number, until = Infinity): boolean {
    if (Atomics.load(this.control, ANSWERED) === 1) return true;
    const blockedFrom = this.probe?.blocked ? performance.now() : 0;
    try {
      while (Atomics.load(this.control, ANSWERED) !== 1) {
        const left = until - performance.now();
        if (left <= 0) return false;
        Atomics.wait(this.control, ANSWERED, 0, Math.min(left, this.watchdogWait(budgets, postedAt)));
      }
      return true;
    } finally {
      if (blockedFrom) this.probe!.blocked!(performance.now() - blockedFrom);
    }
  }

  /** Takes `answerAsync`'s answer and settles its promise with it (or with the failure the answer is). */
  private settlePending(pending: PendingAnswer): void {
    this.endPending();
    try {
      pending.resolve(this.take(pending.budgets, pending.label));
    } catch (error) {
      pending.reject(error);
    }
  }

  /** `answerAsync`'s batch is no longer in flight (answered, or its wait failed). */
  private endPending(): void {
    this.pending = null;
    this.inFlight = false;
  }

  /** Posts a batch to the thread (in the mailbox, or as a message when it does not fit); returns when (epoch milliseconds). */
  private post(batch: GuestOp[], budgets: OpBudget[]): number {
    if (this.failure) throw this.failure;
    if (this.disposed) throw new SandboxError("runtime", "the sandbox has been disposed");
    if (this.inFlight) throw new SandboxError("runtime", "the sandbox is already running a batch; wait for its answer before sending another");
    const startedAt = this.hostWorkStart();
    // One string for the ops, which the guest parses once, and the budgets.
    const ops = encodeRequest(batch);
    const budgetsMs = new Float64Array(budgets.length);
    for (let i = 0; i < budgets.length; i++) budgetsMs[i] = budgets[i]!.ms;
    if (!this.mailbox.post(ops, budgetsMs)) this.port.postMessage({ ops, budgetsMs } satisfies MailboxRequest);
    const { control } = this;
    Atomics.store(control, ANSWERED, 0);
    this.inFlight = true;
    const postedAt = epochNow();
    this.postedAt = postedAt;
    this.postedOps = batch.length;
    Atomics.add(control, REQUESTED, 1);
    Atomics.notify(control, REQUESTED);
    this.logHostWork("post", batch.length, startedAt);
    return postedAt;
  }

  /** The batch's answer, once the thread has given it; a failure of the guest as a whole fails the sandbox. */
  private take(budgets: OpBudget[], label: string): BatchAnswer {
    if (this.probe?.crossing) {
      const { clock } = this;
      this.probe.crossing({
        ops: this.postedOps,
        postedAt: this.postedAt,
        startedAt: clock[BATCH_STARTED_AT]!,
        ranAt: clock[BATCH_RAN_AT]!,
        takenAt: epochNow(),
      });
    }
    const startedAt = this.hostWorkStart();
    const taken = this.mailbox.take();
    if (taken) {
      this.lastMemoryMb = taken.memoryMb;
      this.logHostWork("take", this.postedOps, startedAt);
      return { ok: true, ...taken };
    }
    const answer = receiveMessageOnPort(this.port)?.message as BatchOutcome | undefined;
    this.logHostWork("take", this.postedOps, startedAt);
    if (!answer) throw this.fail(new SandboxError("runtime", `the sandbox's thread did not answer ${label}`));
    this.lastMemoryMb = answer.memoryMb;
    if (!answer.ok) throw this.fail(this.describeCallFailure(answer, budgets, label));
    return answer;
  }

  /** A batch's answer (`take`, `answerAsync`) parsed: its shape and each op's time checked. */
  parse(answer: BatchAnswer, ops: GuestOp[], budgets: OpBudget[], label: string): GuestResponse {
    const startedAt = this.hostWorkStart();
    let results: unknown[];
    try {
      results = JSON.parse(answer.results) as unknown[];
    } catch {
      throw this.fail(new SandboxError("runtime", `the sandbox answered ${label} with malformed JSON`));
    }
    // The records (see GuestResponse): each a length and that many values, or FAILED and the failure.
    const starts = new Int32Array(ops.length);
    let at = 0;
    let framed = 0;
    for (; framed < ops.length && Array.isArray(results); framed++) {
      const n = results[at];
      if (typeof n !== "number" || !Number.isInteger(n) || n < FAILED) break;
      starts[framed] = at;
      at += 1 + (n === FAILED ? 1 : n);
    }
    if (!Array.isArray(results) || framed !== ops.length || at !== results.length || answer.ms.length !== ops.length) {
      throw this.fail(new SandboxError("runtime", `the sandbox answered ${label} with ${ops.length} ops in a malformed shape`));
    }
    // The interrupt handler runs every few thousand instructions, and the watchdog allows a grace period, so
    // each op's own time is checked again afterwards.
    for (const [i, ms] of answer.ms.entries()) {
      if (ms > budgets[i]!.ms + overrunToleranceMs) throw this.fail(cpuLimitError(budgets[i]!, this.limits, ms, undefined, this.whereStopped(budgets[i]!)));
    }
    this.logHostWork("parse", ops.length, startedAt);
    return { ms: answer.ms, results, starts };
  }

  /**
   * The watchdog, between waits for the thread's answer: how long to wait next (milliseconds), or, when the op
   * the thread is running (as it wrote to the shared memory) has outlived its budget by `watchdogGraceMs`, the
   * thread terminated and the error thrown. A wake-up alone is no answer: the previous batch's notify can arrive
   * after this batch was posted (when that wait had just timed out), so the answered flag decides.
   */
  private watchdogWait(budgets: OpBudget[], postedAt: number): number {
    const op = Atomics.load(this.control, CURRENT_OP);
    const now = epochNow();
    if (op < 0) {
      // No op has started yet: the thread's own time (receiving the batch), not the user's.
      const left = postedAt + threadStartMs - now;
      if (left <= 0) {
        void this.worker.terminate();
        throw this.fail(new SandboxError("runtime", `the sandbox's thread did not start ${budgets[0]!.label} within ${threadStartMs / 1000} s`));
      }
      return Math.min(left, watchdogGraceMs);
    }
    const budget = budgets[op]!;
    // As the thread counts (usedMs): the smaller of the wall and the process's CPU clocks since the op started.
    const used = Math.min(now - this.clock[OP_STARTED_AT]!, processCpuMs() - this.clock[OP_CPU_AT]!);
    const left = budget.ms + watchdogGraceMs - used;
    if (left <= 0) {
      void this.worker.terminate();
      throw this.fail(cpuLimitError(budget, this.limits, used, "stopped by the watchdog", this.whereStopped(budget)));
    }
    return Math.max(left, 1);
  }

  /** Marks the sandbox failed (every later call rethrows this error) and returns the error. */
  fail(error: SandboxError): SandboxError {
    this.failure ??= error;
    return error;
  }

  get failed(): SandboxError | null {
    return this.failure;
  }

  /** The user's frames of a guest stack, mapped to their files; the first one is the error's location. */
  mapStack(stack: string | undefined): { location: SourceLocation | null; userStack: string | null } {
    return mapStack(this.compiled, stack);
  }

  /**
   * Where an op that ran past its budget was: the first user frame of the interrupt's stack, else (a watchdog
   * stop, or a check after the op, has no stack) the definition of the user's function the op called.
   */
  whereStopped(budget: OpBudget, stack?: string): StoppedAt | null {
    const { location: at, userStack } = this.mapStack(stack);
    if (at) return { location: at, userStack, fn: frameFunction(userStack) };
    const location = budget.fn ? locateFunction(this.compiled, budget.fn) : null;
    return location ? { location, userStack: null, fn: budget.fn! } : null;
  }

  /** The heap in use after the last call, in MiB (for limit messages). */
  memoryUsedMb(): number {
    return this.lastMemoryMb;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    orphans.unregister(this);
    this.port.close();
    void this.worker.terminate();
  }

  private describeCallFailure(answer: Extract<BatchOutcome, { ok: false }>, budgets: OpBudget[], label: string): SandboxError {
    const budget = budgets[answer.op];
    if (answer.overrunMs !== null && budget)
      return cpuLimitError(budget, this.limits, answer.overrunMs, undefined, this.whereStopped(budget, answer.error?.stack));
    const { name, message, stack } = answer.error ?? { name: "InternalError", message: "the sandbox failed", stack: undefined };
    const mapped = this.mapStack(stack);
    return classifyFatal(name, message, this.limits, budget?.label ?? label, () => answer.memoryMb, mapped.location, mapped.userStack);
  }
}

/** quickjs-emscripten's entry file, as this directory resolves it. */
const quickjsEntry = () => createRequire(import.meta.url).resolve("quickjs-emscripten");

let compiledQuickJS: Promise<WebAssembly.Module | null> | null = null;

/**
 * QuickJS's WebAssembly (the release-sync build quickjs-engine.ts loads), compiled once per process and shared
 * with every sandbox's thread, which then only instantiates it (each with its own memory): a sandbox started in
 * 301 ms instead of 456 (the first in a process) and 119 instead of 344 (later ones), when each thread compiled
 * its own. Null, and each thread compiles its own, where the file is not found.
 */
function quickjsModule(): Promise<WebAssembly.Module | null> {
  compiledQuickJS ??= (async () => {
    try {
      const fromQuickjs = createRequire(quickjsEntry());
      const file = fromQuickjs.resolve("@jitl/quickjs-wasmfile-release-sync/wasm");
      return await WebAssembly.compile(await readFile(file));
    } catch {
      return null;
    }
  })();
  return compiledQuickJS;
}

let bundle: Promise<string> | null = null;

/**
 * The thread's code: thread-entry.ts and what it imports, bundled once per process by esbuild, so that the
 * thread runs the same way under tsx, vitest or plain Node. quickjs-emscripten is loaded from node_modules.
 */
function threadBundle(): Promise<string> {
  bundle ??= (async () => {
    const entry = fileURLToPath(new URL("./thread-entry.ts", import.meta.url));
    const quickjs = quickjsEntry();
    const result = await esbuild.build({
      entryPoints: [entry],
      bundle: true,
      write: false,
      format: "cjs",
      platform: "node",
      target: "node20",
      logLevel: "silent",
      plugins: [{ name: "quickjs-external", setup: (build) => build.onResolve({ filter: /^quickjs-emscripten$/ }, () => ({ path: quickjs, external: true })) }],
    });
    return result.outputFiles[0]!.text;
  })();
  bundle.catch(() => (bundle = null));
  return bundle;
}

/**
 * Where user code was when a limit stopped it: a position in the user's files, the user's stack when there is
 * one, and the function it was in when known. QuickJS records a frame's position at calls, property reads and
 * throws, so a loop of plain arithmetic is placed at the last such point before it, often its function's start:
 * the function is named so that the place reads right either way.
 */
export type StoppedAt = { location: SourceLocation; userStack: string | null; fn: string | null };

/** " in step() (environment.ts:14:3)", or " at environment.ts:2:5" in top-level code. */
export function stoppedAtText(where: StoppedAt | null | undefined): string {
  if (!where) return "";
  const { file, line, column } = where.location;
  return where.fn ? ` in ${where.fn}() (${file}:${line}:${column})` : ` at ${file}:${line}:${column}`;
}

/** The function of a mapped stack's first frame ("    at step (environment.ts:14:3)"), or null when it has no name. */
function frameFunction(userStack: string | null): string | null {
  const name = userStack ? /^\s*at (.*?) \(/.exec(userStack)?.[1] : undefined;
  return name && /^[\w$.]+$/.test(name) ? name : null;
}

/** The error for an op that ran past its CPU budget: the limit it hit, how long it ran, and where it was. */
function cpuLimitError(budget: OpBudget, limits: SandboxLimits, elapsedMs: number, how?: string, where?: StoppedAt | null): SandboxLimitError {
  const note = how ? `; ${how}` : "";
  const at = stoppedAtText(where);
  if (budget.limit === "cpuMsPerCall") {
    return new SandboxLimitError(
      "cpuMsPerCall",
      limits.cpuMsPerCall,
      elapsedMs,
      `${budget.label} exceeded cpuMsPerCall=${formatCount(limits.cpuMsPerCall)} ms (ran ${formatCount(elapsedMs)} ms${note})${at}`,
      where?.location ?? null,
      where?.userStack ?? null,
    );
  }
  if (budget.limit === "dryRunCpuMs" && budget.dryRun) {
    const total = budget.dryRun.spentBeforeMs + elapsedMs;
    return new SandboxLimitError(
      "dryRunCpuMs",
      budget.dryRun.ms,
      total,
      `${budget.label} exceeded validation's CPU budget for its dry run, dryRunCpuMs=${formatCount(budget.dryRun.ms)} ms (the dry run ran ${formatCount(total)} ms${note})${at}`,
      where?.location ?? null,
      where?.userStack ?? null,
    );
  }
  const total = budget.spentBeforeMs + elapsedMs;
  return new SandboxLimitError(
    "cpuMsPerEpisode",
    limits.cpuMsPerEpisode,
    total,
    `${budget.label} exceeded cpuMsPerEpisode=${formatCount(limits.cpuMsPerEpisode)} ms (the episode ran ${formatCount(total)} ms${note})${at}`,
    where?.location ?? null,
    where?.userStack ?? null,
  );
}

/**
 * Errors that mean the guest as a whole is spent: out of memory, out of stack. Anything else is the user's
 * runtime error, with its location.
 */
export function classifyFatal(
  name: string,
  message: string,
  limits: SandboxLimits,
  label: string,
  memoryUsed: () => number,
  location: SourceLocation | null,
  userStack: string | null,
): SandboxError {
  if (/out of memory|string too long|invalid array length|allocation failed/i.test(message)) {
    const used = memoryUsed();
    const reached = ` (the heap had grown to ${used.toFixed(1)} MiB when an allocation was refused)`;
    return new SandboxLimitError(
      "memoryMb",
      limits.memoryMb,
      used,
      `${label} ran out of memory: exceeded memoryMb=${formatCount(limits.memoryMb)}${reached}: ${name}: ${message}`,
      location,
    );
  }
  if (/stack overflow|maximum call stack/i.test(message)) {
    return new SandboxLimitError(
      "maxStackKb",
      limits.maxStackKb,
      null,
      `${label} overflowed the stack: recursion deeper than maxStackKb=${formatCount(limits.maxStackKb)} KiB allows`,
      location,
    );
  }
  const where = location ? ` (at ${location.file}:${location.line}:${location.column})` : "";
  return new SandboxError("runtime", `${label} threw ${name}: ${message}${where}`, { location, userStack });
}

function describeLoadFailure(outcome: Extract<LoadOutcome, { ok: false }>, compiled: CompiledEnvironment, limits: SandboxLimits): SandboxError {
  if (outcome.reason === "overrun") {
    const { location, userStack } = mapStack(compiled, outcome.error?.stack);
    return new SandboxLimitError(
      "cpuMsPerEpisode",
      limits.cpuMsPerEpisode,
      null,
      `loading the environment exceeded cpuMsPerEpisode=${formatCount(limits.cpuMsPerEpisode)} ms${stoppedAtText(location && { location, userStack, fn: frameFunction(userStack) })}`,
      location,
      userStack,
    );
  }
  if (outcome.reason === "no-bridge") {
    return new SandboxError("contract", "the environment's code replaced the sandbox bridge before it loaded; it cannot be run");
  }
  const { name, message, stack }: ThrownFields = outcome.error;
  const { location, userStack } = mapStack(compiled, stack);
  if (name === "ContractError" || message.startsWith("defineEnvironment:")) {
    // a member the bridge refused names itself first ("rewardFunctions.constructor: …")
    const member = /^((?:rewardFunctions|tools)\.[\w$]+):/.exec(message)?.[1];
    const found = location ?? (member ? locateFunction(compiled, member) : null);
    return new SandboxError("contract", message, { location: found ?? { file: compiled.entry, line: 1, column: 1 } });
  }
  return classifyFatal(name, message, limits, "loading the environment", () => outcome.memoryMb, location, userStack);
}

function mapStack(compiled: CompiledEnvironment, stack: string | undefined): { location: SourceLocation | null; userStack: string | null } {
  if (!stack) return { location: null, userStack: null };
  let location: SourceLocation | null = null;
  const lines: string[] = [];
  for (const line of stack.split("\n").slice(0, 40)) {
    const match = FRAME.exec(line);
    if (!match) continue;
    const position = compiled.sourceMap.lookup(Number(match[3]), Number(match[4]));
    if (!position) continue; // a frame in the SDK or the bridge: not the user's to read
    location ??= { file: position.source, line: position.line, column: position.column };
    lines.push(`${match[1]}${match[2]} (${position.source}:${position.line}:${position.column})`);
  }
  return { location, userStack: lines.length ? lines.join("\n") : null };
}
