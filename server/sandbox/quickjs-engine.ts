/**
 * The QuickJS half of the boundary, run inside the sandbox's own worker thread (thread-entry.ts): one QuickJS
 * WebAssembly instance with its own linear memory (so a memory bomb or a crash inside one cannot touch another),
 * a stack limit, and an interrupt handler that stops an op running past its CPU budget. The guest has no host
 * functions once loaded; the thread hands it a batch of ops as one JSON string, then enters it once per op (so
 * that each op's start is known to the watchdog) and takes back the batch's answers as one string.
 *
 * Only plain data leaves this file (results as JSON text, failures as name/message/stack), so that it can be
 * posted to the host thread; the host turns failures into SandboxErrors with the user's locations.
 */
import {
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
  RELEASE_SYNC,
  newQuickJSWASMModuleFromVariant,
  newVariant,
} from "quickjs-emscripten";
import { processCpuMs, registerGlobal } from "./wire";

/** The linear memory the QuickJS build starts with (16 MiB: its code's data and the C stack), in 64 KiB pages. */
const baselinePages = 256;

/**
 * Reading the process's CPU clock costs ~1 µs (a system call), a step ~20-50 µs; so an op is timed by the wall
 * clock, and the CPU clock is read only when an op has run longer than this, or the last reading is older.
 * An op's CPU is then counted from a reading at most this long before it started (it may be charged this much
 * more than it used, never less).
 */
const cpuClockStaleMs = 1;

export type EngineLimits = { memoryMb: number; maxStackKb: number; cpuMsPerEpisode: number };

/** What the guest threw, as plain data. */
export type ThrownFields = { name: string; message: string; stack: string | undefined };

export type LoadOutcome =
  | { ok: true }
  /** `error`: the interrupt as QuickJS raised it, whose stack says where the code was stopped. */
  | { ok: false; reason: "overrun"; error: ThrownFields | null; memoryMb: number }
  | { ok: false; reason: "no-bridge"; memoryMb: number }
  | { ok: false; reason: "threw"; error: ThrownFields; memoryMb: number };

export type BatchOutcome =
  /** `results`: the ops' records in one flat JSON array (wire.ts, GuestResponse); `ms`: each op's wall time. */
  | { ok: true; results: string; ms: number[]; memoryMb: number }
  /**
   * The guest as a whole failed in op `op`: it ran past its budget (`overrunMs`; `error` is then the interrupt,
   * whose stack says where it was stopped) or threw past the bridge (`error`).
   */
  | { ok: false; op: number; overrunMs: number | null; error: ThrownFields | null; ms: number[]; memoryMb: number };

/**
 * The bridge's entry points (guest/bridge.ts): `begin(opsJson)` takes a batch, `next()` runs its next op (1 when
 * the answers so far should be taken at once, else 0), `take()` returns the answers since the last take.
 */
type BridgeHandles = { begin: QuickJSHandle; next: QuickJSHandle; take: QuickJSHandle };

/** Calls a bridge function with no arguments: its result, or what escaped the bridge (an interrupt, memory exhaustion). */
type GuestCall<T> = () => T | { thrown: unknown };

export class QuickJSEngine {
  /** The op running now: when it started (wall and CPU clocks), its budget, and when to look again (Infinity between ops). */
  private opStartedAt = 0;
  private opCpuStartedAt = 0;
  private budgetMs = 0;
  private deadline = Infinity;
  private overrunMs: number | null = null;
  /** The last reading of the CPU clock, and when it was taken by the wall clock (see `cpuClockStaleMs`). */
  private cpuReading = 0;
  private cpuReadAt = -Infinity;

  private constructor(
    private readonly context: QuickJSContext,
    private readonly bridge: BridgeHandles,
    private readonly callNext: GuestCall<number>,
    private readonly callTake: GuestCall<string>,
    private readonly wasmMemory: WebAssembly.Memory,
  ) {}

  /**
   * Evaluates the bundle (SDK, bridge, the user's modules) under the episode's CPU budget; `onEvaluate` first.
   * `lowLevelCalls: false` enters the guest only through the public API (see `lowLevelNextCall`).
   */
  static async load(
    code: string,
    fileName: string,
    limits: EngineLimits,
    onEvaluate: () => void,
    options: { lowLevelCalls?: boolean; wasmModule?: WebAssembly.Module } = {},
  ): Promise<{ engine: QuickJSEngine | null; outcome: LoadOutcome }> {
    // QuickJS's own limit (setMemoryLimit) counts allocations, not their sizes, in this build (malloc_usable_size
    // is unavailable), so the hard cap is the instance's linear memory: its baseline plus memoryMb, never more.
    const wasmMemory = new WebAssembly.Memory({ initial: baselinePages, maximum: baselinePages + limits.memoryMb * 16 });
    const module = await newQuickJSWASMModuleFromVariant(
      newVariant(RELEASE_SYNC, options.wasmModule ? { wasmMemory, wasmModule: options.wasmModule } : { wasmMemory }),
    );
    const runtime = module.newRuntime();
    runtime.setMemoryLimit(limits.memoryMb * 1024 * 1024);
    runtime.setMaxStackSize(limits.maxStackKb * 1024);
    const context = runtime.newContext();

    let registered: BridgeHandles | null = null;
    const register = context.newFunction(registerGlobal, (begin, next, take) => {
      registered ??= { begin: begin.dup(), next: next.dup(), take: take.dup() };
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
      return {
        engine: null,
        outcome: loadOverrun
          ? { ok: false, reason: "overrun", error: errorFields(error), memoryMb }
          : { ok: false, reason: "threw", error: errorFields(error), memoryMb },
      };
    }
    result.value.dispose();
    const bridge = registered as BridgeHandles | null;
    if (!bridge) {
      disposeQuietly(context, runtime);
      return { engine: null, outcome: { ok: false, reason: "no-bridge", memoryMb } };
    }
    const lowLevel = options.lowLevelCalls !== false ? lowLevelCalls(module, context, wasmMemory) : null;
    const callNext = lowLevel?.number(bridge.next) ?? publicCall(context, bridge.next, (handle) => context.getNumber(handle));
    const callTake = lowLevel?.string(bridge.take) ?? publicCall(context, bridge.take, (handle) => context.getString(handle));
    const engine = new QuickJSEngine(context, bridge, callNext, callTake, wasmMemory);
    runtime.setInterruptHandler(engine.onInterrupt);
    return { engine, outcome: { ok: true } };
  }

  /**
   * Runs a batch of ops (`opsJson`, a JSON array of `budgetsMs.length` ops) one after another, each under its own
   * budget; `onOp` is told when each starts (the host thread's watchdog reads it). Stops at the first op that
   * fails the guest as a whole.
   */
  run(opsJson: string, budgetsMs: ArrayLike<number>, onOp: (index: number, startedAt: number, cpuStartedAt: number) => void): BatchOutcome {
    const { context, bridge } = this;
    const chunks: string[] = [];
    const ms: number[] = [];
    // Parsing the batch is the bridge's own work on the host's text, before any op (and any user code) runs.
    const request = context.newString(opsJson);
    const begun = context.callFunction(bridge.begin, context.undefined, request);
    request.dispose();
    if (begun.error) {
      const error = errorFields(context.dump(begun.error) as unknown);
      begun.error.dispose();
      return { ok: false, op: -1, overrunMs: null, error, ms, memoryMb: this.memoryUsedMb() };
    }
    begun.value.dispose();
    for (let i = 0; i < budgetsMs.length; i++) {
      const started = performance.now();
      const cpuStarted = this.cpuClockAt(started);
      onOp(i, started, cpuStarted);
      this.opStartedAt = started;
      this.opCpuStartedAt = cpuStarted;
      this.budgetMs = budgetsMs[i]!;
      this.deadline = started + this.budgetMs;
      this.overrunMs = null;
      let answer: number | string | { thrown: unknown } = this.callNext();
      // The records are taken after the last op, or at once when they hold much text (so that they do not pile
      // up in the guest), within that op's budget: serializing them is charged to it.
      if (answer === 1 || (answer === 0 && i === budgetsMs.length - 1)) answer = this.take(chunks);
      this.deadline = Infinity;
      ms.push(this.usedSince(started, cpuStarted));
      if (typeof answer === "object") {
        const overrunMs = this.overrunMs;
        return { ok: false, op: i, overrunMs, error: errorFields(answer.thrown), ms, memoryMb: this.memoryUsedMb() };
      }
    }
    return { ok: true, results: `[${chunks.join(",")}]`, ms, memoryMb: this.memoryUsedMb() };
  }

  /** Takes the records the guest holds (a JSON array's text), adding them unbracketed to `chunks`. */
  private take(chunks: string[]): string | { thrown: unknown } {
    const text = this.callTake();
    if (typeof text !== "string") return text;
    if (text.length > 2) chunks.push(text.slice(1, -1));
    return text;
  }

  /** A reading of the CPU clock taken at most `cpuClockStaleMs` before `now` (wall clock). */
  private cpuClockAt(now: number): number {
    if (now - this.cpuReadAt > cpuClockStaleMs) {
      this.cpuReading = processCpuMs();
      this.cpuReadAt = now;
    }
    return this.cpuReading;
  }

  /**
   * What an op that started at `startedAt` has used (see `usedMs`); an op shorter than `cpuClockStaleMs` by the
   * wall clock is charged its wall time, which is at most that.
   */
  private usedSince(startedAt: number, cpuStartedAt: number): number {
    const now = performance.now();
    const wall = now - startedAt;
    if (wall <= cpuClockStaleMs) return wall;
    this.cpuReading = processCpuMs();
    this.cpuReadAt = now;
    return Math.min(wall, this.cpuReading - cpuStartedAt);
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
    const used = this.usedSince(this.opStartedAt, this.opCpuStartedAt);
    if (used <= this.budgetMs) {
      this.deadline = now + (this.budgetMs - used);
      return false;
    }
    this.overrunMs = used;
    return true;
  };
}

function publicCall<T>(context: QuickJSContext, fn: QuickJSHandle, read: (handle: QuickJSHandle) => T): GuestCall<T> {
  return () => {
    const result = context.callFunction(fn, context.undefined);
    if (result.error) {
      const thrown = context.dump(result.error) as unknown;
      result.error.dispose();
      return { thrown };
    }
    const value = read(result.value);
    result.value.dispose();
    return value;
  };
}

/**
 * Bridge functions called through the module's low-level interface (`getFFI`, which quickjs-emscripten marks
 * experimental, and the context's pointer, which it keeps private): ~0.3 µs a call against ~1.1 µs through
 * callFunction and getString/getNumber, which make handle and lifetime objects each time. The same C functions
 * those methods call; null, and the public path is taken, when this build of quickjs-emscripten does not have them.
 */
function lowLevelCalls(
  module: QuickJSWASMModule,
  context: QuickJSContext,
  memory: WebAssembly.Memory,
): { number(fn: QuickJSHandle): GuestCall<number>; string(fn: QuickJSHandle): GuestCall<string> } | null {
  const ffi = typeof module.getFFI === "function" ? (module.getFFI() as Partial<ReturnType<QuickJSWASMModule["getFFI"]>>) : undefined;
  const ctx = (context as unknown as { ctx?: { value?: unknown } }).ctx?.value;
  const { QTS_Call: call, QTS_ResolveException: resolveException, QTS_GetString: getString, QTS_GetFloat64: getFloat64, QTS_Dump: dump } = ffi ?? {};
  const { QTS_FreeCString: freeCString, QTS_FreeValuePointer: freeValue } = ffi ?? {};
  if (typeof ctx !== "number" || !call || !resolveException || !getString || !getFloat64 || !dump || !freeCString || !freeValue) return null;
  const ctxPointer = ctx as Parameters<typeof call>[0];
  const thisValue = context.undefined.value;
  const decoder = new TextDecoder();
  const takeCString = (pointer: ReturnType<NonNullable<typeof getString>>): string => {
    const bytes = new Uint8Array(memory.buffer);
    const text = decoder.decode(bytes.subarray(pointer, bytes.indexOf(0, pointer)));
    freeCString(ctxPointer, pointer);
    return text;
  };
  const caller =
    <T>(read: (result: ReturnType<NonNullable<typeof call>>) => T) =>
    (fn: QuickJSHandle): GuestCall<T> => {
      const fnValue = fn.value;
      return () => {
        const result = call(ctxPointer, fnValue, thisValue, 0, 0 as Parameters<typeof call>[4]);
        const error = resolveException(ctxPointer, result);
        if (error) {
          freeValue(ctxPointer, result);
          const text = takeCString(dump(ctxPointer, error));
          freeValue(ctxPointer, error);
          try {
            return { thrown: JSON.parse(text) as unknown };
          } catch {
            return { thrown: text };
          }
        }
        const value = read(result);
        freeValue(ctxPointer, result);
        return value;
      };
    };
  return {
    number: caller((result) => getFloat64(ctxPointer, result)),
    string: caller((result) => takeCString(getString(ctxPointer, result))),
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

function errorFields(error: unknown): ThrownFields {
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
