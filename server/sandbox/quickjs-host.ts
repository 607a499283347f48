/**
 * The isolation boundary: one QuickJS WebAssembly instance per sandbox (its own linear memory, so a memory bomb
 * or a crash inside one cannot touch another), with a heap limit, a stack limit, and an interrupt handler that
 * stops any op running past its CPU budget. The only thing the guest can reach on the host is the answer string
 * of `call`; it has no host functions once loaded.
 */
import {
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  RELEASE_SYNC,
  newQuickJSWASMModuleFromVariant,
  newVariant,
} from "quickjs-emscripten";
import { type CompiledEnvironment, bundleFileName } from "./compile";
import { SandboxError, SandboxLimitError, type SourceLocation, formatCount } from "./errors";
import type { SandboxLimits } from "./limits";
import { type GuestOp, type GuestResponse, registerGlobal } from "./wire";

/** What one op may spend, and which limit that is (the smaller of the per-call and the episode's remainder). */
export type OpBudget = { ms: number; limit: "cpuMsPerCall" | "cpuMsPerEpisode"; spentBeforeMs: number; label: string };

type ActiveCall = { budgets: OpBudget[]; op: number; opStartedAt: number; hardDeadline: number; label: string };
type Overrun = { op: number; elapsedMs: number } | { op: -1; elapsedMs: number };

/** The linear memory the QuickJS build starts with (16 MiB: its code's data and the C stack), in 64 KiB pages. */
const baselinePages = 256;

/** The guest's clock counts whole milliseconds; an op this much over its budget by that clock has overrun. */
const overrunToleranceMs = 2;

const FRAME = /^(\s*at )(.*?) \((?:[^()]*?)?sandbox\.js:(\d+):(\d+)\)$/;

export class QuickJSSandbox {
  private active: ActiveCall | null = null;
  private overrun: Overrun | null = null;
  private failure: SandboxError | null = null;
  private disposed = false;

  private constructor(
    private readonly runtime: QuickJSRuntime,
    private readonly context: QuickJSContext,
    readonly compiled: CompiledEnvironment,
    private readonly limits: SandboxLimits,
    private readonly progress: QuickJSHandle,
    private readonly callHandle: QuickJSHandle,
    private readonly opKey: QuickJSHandle,
    private readonly wasmMemory: WebAssembly.Memory,
  ) {}

  /** Loads the bundle: evaluates the SDK, the bridge and the user's modules, under the episode CPU budget. */
  static async create(compiled: CompiledEnvironment, limits: SandboxLimits): Promise<QuickJSSandbox> {
    // QuickJS's own limit (setMemoryLimit) counts allocations, not their sizes, in this build (malloc_usable_size
    // is unavailable), so the hard cap is the instance's linear memory: its baseline plus memoryMb, never more.
    const wasmMemory = new WebAssembly.Memory({ initial: baselinePages, maximum: baselinePages + limits.memoryMb * 16 });
    const module = await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmMemory }));
    const runtime = module.newRuntime();
    runtime.setMemoryLimit(limits.memoryMb * 1024 * 1024);
    runtime.setMaxStackSize(limits.maxStackKb * 1024);
    const context = runtime.newContext();

    let registered: { progress: QuickJSHandle; call: QuickJSHandle } | null = null;
    const register = context.newFunction(registerGlobal, (progress, call) => {
      if (!registered) registered = { progress: progress.dup(), call: call.dup() };
    });
    context.setProp(context.global, registerGlobal, register);
    register.dispose();

    let loadDeadline = performance.now() + limits.cpuMsPerEpisode;
    let loadOverrun = false;
    runtime.setInterruptHandler(() => (loadOverrun = performance.now() > loadDeadline));
    const result = context.evalCode(compiled.code, bundleFileName, { type: "global", strict: true });
    loadDeadline = Infinity;
    if (result.error) {
      const error = context.dump(result.error) as unknown;
      result.error.dispose();
      const failure = loadOverrun
        ? new SandboxLimitError(
            "cpuMsPerEpisode",
            limits.cpuMsPerEpisode,
            null,
            `loading the environment exceeded cpuMsPerEpisode=${formatCount(limits.cpuMsPerEpisode)} ms`,
          )
        : describeLoadError(error, compiled, limits, wasmMemory);
      disposeQuietly(context, runtime);
      throw failure;
    }
    result.value.dispose();
    const handles = registered as { progress: QuickJSHandle; call: QuickJSHandle } | null;
    if (!handles) {
      disposeQuietly(context, runtime);
      throw new SandboxError("contract", "the environment's code replaced the sandbox bridge before it loaded; it cannot be run");
    }
    const sandbox = new QuickJSSandbox(runtime, context, compiled, limits, handles.progress, handles.call, context.newString("op"), wasmMemory);
    runtime.setInterruptHandler(sandbox.onInterrupt);
    return sandbox;
  }

  /**
   * Runs a batch of ops in one crossing. Throws (and stays failed) when the guest as a whole fails: a CPU budget
   * overrun, memory or stack exhaustion, a malformed answer. A failure of one op is in its result instead.
   */
  call(ops: GuestOp[], budgets: OpBudget[], label: string): GuestResponse {
    if (this.failure) throw this.failure;
    if (this.disposed) throw new SandboxError("runtime", "the sandbox has been disposed");
    const started = performance.now();
    const totalBudget = budgets.reduce((sum, budget) => sum + budget.ms, 0);
    this.active = { budgets, op: -1, opStartedAt: started, hardDeadline: started + totalBudget + this.limits.cpuMsPerCall, label };
    this.overrun = null;
    const request = this.context.newString(JSON.stringify(ops));
    const result = this.context.callFunction(this.callHandle, this.context.undefined, request);
    request.dispose();
    this.active = null;
    if (result.error) {
      const error = this.context.dump(result.error) as unknown;
      result.error.dispose();
      throw this.fail(this.describeCallError(error, budgets, label));
    }
    const text = this.context.getString(result.value);
    result.value.dispose();
    let response: GuestResponse;
    try {
      response = JSON.parse(text) as GuestResponse;
    } catch {
      throw this.fail(new SandboxError("runtime", `the sandbox answered ${label} with malformed JSON`));
    }
    if (
      !response ||
      !Array.isArray(response.results) ||
      !Array.isArray(response.ms) ||
      response.results.length !== ops.length ||
      response.ms.length !== ops.length ||
      !response.ms.every((ms) => typeof ms === "number" && Number.isFinite(ms) && ms >= 0)
    ) {
      throw this.fail(new SandboxError("runtime", `the sandbox answered ${label} with ${ops.length} ops in a malformed shape`));
    }
    // The interrupt handler runs every few thousand instructions; a few long native calls (a huge sort, a long
    // string operation) can run between two checks, so each op's own time is checked again afterwards.
    for (const [i, ms] of response.ms.entries()) {
      if (ms > budgets[i]!.ms + overrunToleranceMs) throw this.fail(cpuLimitError(budgets[i]!, this.limits, ms));
    }
    return response;
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

  /** The heap in use now, in MiB (for limit messages). */
  memoryUsedMb(): number {
    return memoryUsedMb(this.wasmMemory);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const handle of [this.progress, this.callHandle, this.opKey]) {
      try {
        if (handle.alive) handle.dispose();
      } catch {
        // a runtime that failed mid-call may refuse; its WebAssembly instance is dropped with this object anyway
      }
    }
    disposeQuietly(this.context, this.runtime);
  }

  /** Called by QuickJS every few thousand instructions; true stops the guest with an uncatchable error. */
  private onInterrupt = (): boolean => {
    const active = this.active;
    if (!active) return false;
    const now = performance.now();
    if (now > active.hardDeadline) {
      this.overrun = { op: active.op, elapsedMs: now - active.opStartedAt };
      return true;
    }
    const op = this.readProgress();
    if (op !== active.op) {
      active.op = op;
      active.opStartedAt = now;
    }
    const budget = op >= 0 ? active.budgets[op] : undefined;
    if (budget && now - active.opStartedAt > budget.ms) {
      this.overrun = { op, elapsedMs: now - active.opStartedAt };
      return true;
    }
    return false;
  };

  /** The index of the op the guest is running (a plain data property of an object only the bridge holds). */
  private readProgress(): number {
    const handle = this.context.getProp(this.progress, this.opKey);
    const value = this.context.typeof(handle) === "number" ? this.context.getNumber(handle) : -1;
    handle.dispose();
    return value;
  }

  private describeCallError(error: unknown, budgets: OpBudget[], label: string): SandboxError {
    const overrun = this.overrun;
    if (overrun) {
      const budget = overrun.op >= 0 ? budgets[overrun.op] : undefined;
      if (!budget) {
        const limit = this.limits.cpuMsPerCall;
        return new SandboxLimitError("cpuMsPerCall", limit, overrun.elapsedMs, `${label} exceeded cpuMsPerCall=${formatCount(limit)} ms`);
      }
      return cpuLimitError(budget, this.limits, overrun.elapsedMs);
    }
    const { name, message, stack } = errorFields(error);
    const mapped = this.mapStack(stack);
    return classifyFatal(name, message, this.limits, label, () => this.memoryUsedMb(), mapped.location, mapped.userStack);
  }
}

/** The error for an op that ran past its CPU budget: the limit it hit, and how long it ran. */
export function cpuLimitError(budget: OpBudget, limits: SandboxLimits, elapsedMs: number): SandboxLimitError {
  if (budget.limit === "cpuMsPerCall") {
    return new SandboxLimitError(
      "cpuMsPerCall",
      limits.cpuMsPerCall,
      elapsedMs,
      `${budget.label} exceeded cpuMsPerCall=${formatCount(limits.cpuMsPerCall)} ms (ran ${formatCount(elapsedMs)} ms)`,
    );
  }
  const total = budget.spentBeforeMs + elapsedMs;
  return new SandboxLimitError(
    "cpuMsPerEpisode",
    limits.cpuMsPerEpisode,
    total,
    `${budget.label} exceeded cpuMsPerEpisode=${formatCount(limits.cpuMsPerEpisode)} ms (the episode ran ${formatCount(total)} ms)`,
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

function describeLoadError(error: unknown, compiled: CompiledEnvironment, limits: SandboxLimits, wasmMemory: WebAssembly.Memory): SandboxError {
  const { name, message, stack } = errorFields(error);
  const { location, userStack } = mapStack(compiled, stack);
  if (name === "ContractError" || message.startsWith("defineEnvironment:")) {
    return new SandboxError("contract", message, { location: location ?? { file: compiled.entry, line: 1, column: 1 } });
  }
  return classifyFatal(name, message, limits, "loading the environment", () => memoryUsedMb(wasmMemory), location, userStack);
}

export function errorFields(error: unknown): { name: string; message: string; stack: string | undefined } {
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
