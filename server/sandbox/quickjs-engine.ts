/**
 * The QuickJS half of the boundary, run inside the sandbox's own worker thread (thread-entry.ts): one QuickJS
 * WebAssembly instance with its own linear memory (so a memory bomb or a crash inside one cannot touch another),
 * a stack limit, and an interrupt handler that stops an op running past its CPU budget. The guest has no host
 * functions once loaded; the thread hands it one op at a time as a JSON string and takes back one string.
 *
 * Only plain data leaves this file (results as JSON text, failures as name/message/stack), so that it can be
 * posted to the host thread; the host turns failures into SandboxErrors with the user's locations.
 */
import {
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  RELEASE_SYNC,
  newQuickJSWASMModuleFromVariant,
  newVariant,
} from "quickjs-emscripten";
import { processCpuMs, registerGlobal } from "./wire";

/** The linear memory the QuickJS build starts with (16 MiB: its code's data and the C stack), in 64 KiB pages. */
export const baselinePages = 256;

export type EngineLimits = { memoryMb: number; maxStackKb: number; cpuMsPerEpisode: number };

/** What the guest threw, as plain data. */
export type ThrownFields = { name: string; message: string; stack: string | undefined };

export type LoadOutcome =
  | { ok: true }
  | { ok: false; reason: "overrun"; memoryMb: number }
  | { ok: false; reason: "no-bridge"; memoryMb: number }
  | { ok: false; reason: "threw"; error: ThrownFields; memoryMb: number };

export type BatchOutcome =
  /** `results`: a JSON array of the ops' results; `ms`: each op's wall time. */
  | { ok: true; results: string; ms: number[]; memoryMb: number }
  /** The guest as a whole failed in op `op`: it ran past its budget (`overrunMs`) or threw past the bridge. */
  | { ok: false; op: number; overrunMs: number | null; error: ThrownFields | null; ms: number[]; memoryMb: number };

export class QuickJSEngine {
  /** The op running now: when it started (wall and CPU clocks), its budget, and when to look again (Infinity between ops). */
  private opStartedAt = 0;
  private opCpuStartedAt = 0;
  private budgetMs = 0;
  private deadline = Infinity;
  private overrunMs: number | null = null;

  private constructor(
    private readonly context: QuickJSContext,
    private readonly callHandle: QuickJSHandle,
    private readonly wasmMemory: WebAssembly.Memory,
  ) {}

  /** Evaluates the bundle (SDK, bridge, the user's modules) under the episode's CPU budget; `onEvaluate` first. */
  static async load(
    code: string,
    fileName: string,
    limits: EngineLimits,
    onEvaluate: () => void,
  ): Promise<{ engine: QuickJSEngine | null; outcome: LoadOutcome }> {
    // QuickJS's own limit (setMemoryLimit) counts allocations, not their sizes, in this build (malloc_usable_size
    // is unavailable), so the hard cap is the instance's linear memory: its baseline plus memoryMb, never more.
    const wasmMemory = new WebAssembly.Memory({ initial: baselinePages, maximum: baselinePages + limits.memoryMb * 16 });
    const module = await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmMemory }));
    const runtime = module.newRuntime();
    runtime.setMemoryLimit(limits.memoryMb * 1024 * 1024);
    runtime.setMaxStackSize(limits.maxStackKb * 1024);
    const context = runtime.newContext();

    let registered: QuickJSHandle | null = null;
    const register = context.newFunction(registerGlobal, (call) => {
      registered ??= call.dup();
    });
    context.setProp(context.global, registerGlobal, register);
    register.dispose();

    onEvaluate();
    const loadStarted = performance.now();
    const loadCpuStarted = processCpuMs();
    let loadOverrun = false;
    runtime.setInterruptHandler(() => (loadOverrun = usedMs(loadStarted, loadCpuStarted) > limits.cpuMsPerEpisode));
    const result = context.evalCode(code, fileName, { type: "global", strict: true });
    const memoryMb = memoryUsedMb(wasmMemory);
    if (result.error) {
      const error = context.dump(result.error) as unknown;
      result.error.dispose();
      disposeQuietly(context, runtime);
      return { engine: null, outcome: loadOverrun ? { ok: false, reason: "overrun", memoryMb } : { ok: false, reason: "threw", error: errorFields(error), memoryMb } };
    }
    result.value.dispose();
    const callHandle = registered as QuickJSHandle | null;
    if (!callHandle) {
      disposeQuietly(context, runtime);
      return { engine: null, outcome: { ok: false, reason: "no-bridge", memoryMb } };
    }
    const engine = new QuickJSEngine(context, callHandle, wasmMemory);
    runtime.setInterruptHandler(engine.onInterrupt);
    return { engine, outcome: { ok: true } };
  }

  /**
   * Runs ops one after another, each under its own budget; `onOp` is told when each starts (the host thread's
   * watchdog reads it). Stops at the first op that fails the guest as a whole.
   */
  run(ops: string[], budgetsMs: ArrayLike<number>, onOp: (index: number, startedAt: number, cpuStartedAt: number) => void): BatchOutcome {
    const { context } = this;
    const results: string[] = [];
    const ms: number[] = [];
    for (let i = 0; i < ops.length; i++) {
      const started = performance.now();
      const cpuStarted = processCpuMs();
      onOp(i, started, cpuStarted);
      this.opStartedAt = started;
      this.opCpuStartedAt = cpuStarted;
      this.budgetMs = budgetsMs[i]!;
      this.deadline = started + this.budgetMs;
      this.overrunMs = null;
      const request = context.newString(ops[i]!);
      const result = context.callFunction(this.callHandle, context.undefined, request);
      request.dispose();
      this.deadline = Infinity;
      ms.push(usedMs(started, cpuStarted));
      if (result.error) {
        const error = context.dump(result.error) as unknown;
        result.error.dispose();
        const overrunMs = this.overrunMs;
        return { ok: false, op: i, overrunMs, error: overrunMs === null ? errorFields(error) : null, ms, memoryMb: this.memoryUsedMb() };
      }
      results.push(context.getString(result.value));
      result.value.dispose();
    }
    return { ok: true, results: `[${results.join(",")}]`, ms, memoryMb: this.memoryUsedMb() };
  }

  memoryUsedMb(): number {
    return memoryUsedMb(this.wasmMemory);
  }

  /**
   * Called by QuickJS every few thousand instructions; true stops the guest with an uncatchable error. Past the
   * budget by the wall clock, the op's CPU time decides (see `usedMs`); under it, it looks again when the rest of
   * the budget could have been spent.
   */
  private onInterrupt = (): boolean => {
    const now = performance.now();
    if (now <= this.deadline) return false;
    const used = usedMs(this.opStartedAt, this.opCpuStartedAt);
    if (used <= this.budgetMs) {
      this.deadline = now + (this.budgetMs - used);
      return false;
    }
    this.overrunMs = used;
    return true;
  };
}

/**
 * The time an op has used since it started: the smaller of the wall clock and the process's CPU clock (a thread
 * waiting for a core on a busy machine is not charged; other threads' work, if any, never makes it more than the
 * wall time).
 */
export function usedMs(startedAt: number, cpuStartedAt: number): number {
  return Math.min(performance.now() - startedAt, processCpuMs() - cpuStartedAt);
}

export function errorFields(error: unknown): ThrownFields {
  if (error && typeof error === "object") {
    const fields = error as Record<string, unknown>;
    return {
      name: typeof fields.name === "string" ? fields.name : "Error",
      message: typeof fields.message === "string" ? fields.message : String(error),
      stack: typeof fields.stack === "string" ? fields.stack : undefined,
    };
  }
  return { name: "NonErrorThrown", message: `threw a non-Error value: ${String(error)}`, stack: undefined };
}

/** How far the instance's memory has grown past its baseline, in MiB. */
function memoryUsedMb(memory: WebAssembly.Memory): number {
  return memory.buffer.byteLength / (1024 * 1024) - baselinePages / 16;
}

function disposeQuietly(context: QuickJSContext, runtime: QuickJSRuntime): void {
  // After an interrupt or an out-of-memory error QuickJS may still hold objects and refuse to free cleanly;
  // the whole WebAssembly instance belongs to this sandbox and is garbage-collected with it.
  try {
    context.dispose();
  } catch {
    /* see above */
  }
  try {
    runtime.dispose();
  } catch {
    /* see above */
  }
}
