/**
 * The web server's side of validation: user code is compiled, type-checked and dry-run in child processes
 * (server/sandbox/validate-cli.ts), never in the web server, which imports only this module and the sandbox's
 * types (the sandbox's code would bring esbuild and QuickJS into the server's bundle). What a validation's report
 * forbids launching is decided in ./browser.ts, for the editor and `runs.launch` alike.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createHash } from "node:crypto";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";
import { serverEnvSchema } from "../env";
import type { SourceFiles, ValidateOptions, ValidationReport } from "../sandbox";

export { CUSTOM_ENTRY, configIssues, formatDiagnostic, type LaunchRefusal, launchRefusal, refusalMessage, type SourceReport, sourceErrors } from "./browser";

/** Validation processes a server runs at most, unless told otherwise (`TINKERLAB_VALIDATION_PROCESSES`). */
export const defaultValidationProcesses = 2;
const maxValidationProcesses = 16;
/** The environment variable that sets the pool's size. */
const validationProcessesVariable = "TINKERLAB_VALIDATION_PROCESSES";
/** How long a validation may run once a process has taken it (its queue wait is not counted). */
const defaultValidationTimeoutMs = 60_000;
/** How long a new process may take to start (load the compiler and the sandbox) before it is given up. */
const startTimeoutMs = 30_000;
/**
 * Starts that fail in a row, with no process of the pool alive, before the waiting requests are failed: one failed
 * start (a machine too loaded to start one within its time, a spawn refused for a moment) is tried again.
 */
const startAttempts = 3;
/** A request that would wait longer than this for a process is refused (429, "retry in N s") rather than queued. */
const maxQueueWaitMs = 30_000;
/** Requests queued at most, whatever their expected wait (each holds its files, up to 2 MiB). */
const maxQueued = 64;
/** A validation's expected run, before the pool has timed one: about what a type-checked dry run takes. */
const firstServiceEstimateMs = 2_000;

/**
 * A validation refused because the pool's queue is full: the caller should retry in `retryAfterS` seconds
 * (`experiments.validate` answers TOO_MANY_REQUESTS, with a Retry-After header).
 */
export class ValidationBusyError extends Error {
  constructor(
    /** Validations running and waiting when this one was refused. */
    readonly validating: number,
    readonly retryAfterS: number,
  ) {
    super(`the server is busy validating ${validating} experiments; retry in ${retryAfterS} s`);
    this.name = "ValidationBusyError";
  }
}

/** A request, from its arrival until it is answered. */
type ValidationRequest = {
  files: SourceFiles;
  options: ValidateOptions;
  timeoutMs: number;
  /** When it arrived (performance.now()), and when a process took it. */
  queuedAt: number;
  startedAt: number;
  resolve(report: ValidationReport): void;
  reject(error: Error): void;
};

/** How a process ended, in words for the server's log and a client's message: "exit code 1", "killed by SIGKILL". */
const howItEnded = (code: number | null, signal: NodeJS.Signals | null) =>
  signal ? `killed by ${signal}` : code !== null ? `exit code ${code}` : "no exit status";

/**
 * One validation process: started once, it answers one request at a time until it dies or is killed. Its own
 * death fails only the request it was running.
 */
class ValidationProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  /** The request this process is running, or null when it is idle. */
  private request: { id: number; request: ValidationRequest; timer: NodeJS.Timeout } | null = null;
  private nextId = 1;
  /** The process has said it is ready (its modules are loaded); requests wait for it. */
  private ready = false;
  private startTimer: NodeJS.Timeout | null = null;
  /** It has exited or been killed: no request goes to it any more. */
  dead = false;
  /** Why it died before it was ready (null: it started, or is alive). */
  startFailure: string | null = null;

  constructor(
    root: string,
    private readonly events: {
      /** This process can take another request (it is ready or idle again), or it has died. */
      onFree(process: ValidationProcess): void;
      /** A request it ran was answered after `ms` of running. */
      onAnswered(ms: number): void;
    },
  ) {
    // Node with tsx's loader, one process: tsx's command line would run the script in a second process of its own.
    const loader = pathToFileURL(path.join(root, "node_modules", "tsx", "dist", "loader.mjs")).href;
    this.child = spawn(process.execPath, ["--import", loader, path.join(root, "server", "sandbox", "validate-cli.ts")], { cwd: root, stdio: "pipe" });
    // What the process writes to stderr (a failure's stack) is for the server's log, never for a client.
    readline.createInterface({ input: this.child.stderr }).on("line", (line) => console.error(`validation process ${this.child.pid ?? "?"}: ${line}`));
    readline.createInterface({ input: this.child.stdout }).on("line", (line) => this.onLine(line));
    this.child.on("exit", (code, signal) => this.onExit(code, signal));
    this.child.on("error", (error) => {
      if (!this.ready) this.startFailure ??= error.message;
      console.error(`validation process ${this.child.pid ?? "?"}: ${error.message}`);
      this.kill();
    });
    this.child.stdin.on("error", () => {}); // a write to a process that just died surfaces through "exit"
    // An idle process keeps no one's event loop alive: a running request's timer does, and the start's.
    this.child.unref();
    for (const pipe of [this.child.stdin, this.child.stdout, this.child.stderr]) (pipe as unknown as { unref?(): void }).unref?.();
    this.startTimer = setTimeout(() => {
      // A server busy past this timer may have the "ready" line waiting unread in the pipe: timers run before a
      // turn's I/O. Read it first (setImmediate runs after this turn's I/O), then judge.
      setImmediate(() => {
        if (this.ready || this.dead) return;
        this.startFailure = `it did not say it was ready within ${startTimeoutMs / 1000} s`;
        this.kill();
      });
    }, startTimeoutMs);
  }

  /** Started but not yet ready. */
  get starting(): boolean {
    return !this.ready && !this.dead;
  }

  /** Ready for a request now: started, alive and idle. */
  get free(): boolean {
    return this.ready && !this.dead && this.request === null;
  }

  /** Started, and alive. */
  get alive(): boolean {
    return this.ready && !this.dead;
  }

  /** Runs `request`; its time limit counts from now. */
  run(request: ValidationRequest): void {
    const id = this.nextId++;
    request.startedAt = performance.now();
    const timer = setTimeout(() => {
      if (this.request?.id !== id) return;
      this.request = null;
      this.kill();
      const waited = request.startedAt - request.queuedAt;
      const queue = waited >= 1_000 ? ` (after waiting ${formatSeconds(waited)} for a free validation process, which is not counted)` : "";
      request.reject(
        new Error(
          `validation took longer than ${formatSeconds(request.timeoutMs)} and was stopped${queue}: the environment's code, or its type check, ` +
            "kept the validation process busy that long",
        ),
      );
    }, request.timeoutMs);
    this.request = { id, request, timer };
    this.child.stdin.write(`${JSON.stringify({ id, files: request.files, options: request.options })}\n`);
  }

  kill(): void {
    if (this.dead) return;
    this.dead = true;
    if (this.startTimer) clearTimeout(this.startTimer);
    this.child.kill("SIGKILL");
    if (!this.ready) this.startFailure ??= "it was stopped before it was ready";
    this.failRunning("it was stopped");
    this.events.onFree(this);
  }

  private onLine(line: string): void {
    let answer: { id?: number; ready?: boolean; report?: ValidationReport; error?: string };
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      return; // not an answer (something the process printed); answers are one JSON object a line
    }
    if (answer.ready) {
      if (this.startTimer) clearTimeout(this.startTimer);
      this.startTimer = null;
      this.ready = true;
      if (!this.dead) this.events.onFree(this);
      return;
    }
    const running = this.request;
    if (!running || running.id !== answer.id) return;
    this.request = null;
    clearTimeout(running.timer);
    this.events.onAnswered(performance.now() - running.request.startedAt);
    if (answer.report) running.request.resolve(answer.report);
    else running.request.reject(new Error(answer.error ?? "validation failed"));
    if (!this.dead) this.events.onFree(this);
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    const wasDead = this.dead;
    this.dead = true;
    if (this.startTimer) clearTimeout(this.startTimer);
    if (wasDead) return;
    const how = howItEnded(code, signal);
    console.error(`validation process ${this.child.pid ?? "?"} ended unasked (${how})`);
    if (!this.ready) this.startFailure = `it ended before it was ready (${how})`;
    this.failRunning(how);
    this.events.onFree(this);
  }

  /** Rejects the request this process was running (if any): only that one. */
  private failRunning(how: string): void {
    const running = this.request;
    if (!running) return;
    this.request = null;
    clearTimeout(running.timer);
    running.request.reject(
      new Error(
        `the validation process stopped while it validated (${how}): a failure of the server's, not a verdict on your code; ` +
          "the server's log has the details. Validate again",
      ),
    );
  }
}

/**
 * A pool of validation processes (validate-cli.ts), each started on first need and reused, so that a validation
 * costs its own work rather than a process start. Each request has a process of its own while it runs; requests
 * beyond the pool's size wait in order for a free one, as long as the expected wait stays under 30 s (64 at most);
 * past that a request is refused with `ValidationBusyError` saying when to retry. A request that outlives its time
 * is killed with its process (and only it fails); the process is replaced when the next request needs one. A
 * process that fails to start is tried again; the waiting requests fail only when no process is alive and three
 * starts in a row have failed (a broken installation), each told why.
 */
export class ValidationPool {
  private readonly processes = new Set<ValidationProcess>();
  private readonly queue: ValidationRequest[] = [];
  private closed = false;
  /** Starts that failed since the last one that succeeded. */
  private failedStarts = 0;
  /** A validation's recent run time, a moving average, for the expected wait of a new request. */
  private serviceMs = firstServiceEstimateMs;

  constructor(
    private readonly root: string,
    readonly size: number,
  ) {
    if (!Number.isInteger(size) || size < 1 || size > maxValidationProcesses) {
      throw new Error(`the validation pool's size must be a whole number from 1 to ${maxValidationProcesses}; got ${String(size)}`);
    }
  }

  /**
   * Validates in a free process, after the requests before it; `timeoutMs` counts from when a process takes it.
   * Rejects with `ValidationBusyError` at once when the queue is full.
   */
  validate(files: SourceFiles, options: ValidateOptions, timeoutMs = defaultValidationTimeoutMs): Promise<ValidationReport> {
    if (this.closed) return Promise.reject(new Error("the validation pool has been closed"));
    // A request waits for the requests queued before it, `size` at a time, then runs.
    const ahead = this.queue.length;
    if (ahead >= this.size) {
      const waitMs = Math.ceil(ahead / this.size) * this.serviceMs;
      if (waitMs > maxQueueWaitMs || ahead >= maxQueued) {
        const running = [...this.processes].filter((worker) => worker.alive && !worker.free).length;
        return Promise.reject(new ValidationBusyError(running + ahead, Math.max(1, Math.ceil(waitMs / 1000))));
      }
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ files, options, timeoutMs, queuedAt: performance.now(), startedAt: 0, resolve, reject });
      this.dispatch();
    });
  }

  /** Requests waiting for a process, and processes alive (or starting). */
  get stats(): { queued: number; processes: number } {
    return { queued: this.queue.length, processes: this.processes.size };
  }

  /** Kills every process and fails the requests still waiting or running. */
  close(): void {
    this.closed = true;
    for (const request of this.queue.splice(0)) request.reject(new Error("the validation pool has been closed"));
    for (const worker of [...this.processes]) worker.kill();
  }

  /** Hands waiting requests to free processes, and starts processes (up to the size) for those still waiting. */
  private dispatch(): void {
    let starting = 0;
    for (const worker of this.processes) {
      if (worker.starting) starting++;
      else if (worker.free && this.queue.length > 0) worker.run(this.queue.shift()!);
    }
    // A process that is starting takes the next waiting request when it is ready. After failed starts the processes
    // alive serve the queue alone (see onFree).
    const mayStart = this.failedStarts < startAttempts;
    while (!this.closed && mayStart && this.queue.length > starting && this.processes.size < this.size) {
      this.processes.add(new ValidationProcess(this.root, { onFree: (worker) => this.onFree(worker), onAnswered: (ms) => this.onAnswered(ms) }));
      starting++;
    }
  }

  private onFree(worker: ValidationProcess): void {
    if (worker.dead) this.processes.delete(worker);
    if (this.closed) return;
    if (worker.startFailure === null) {
      if (!worker.dead) this.failedStarts = 0;
    } else {
      this.failedStarts++;
      console.error(`a validation process could not start: ${worker.startFailure}`);
      const hope = [...this.processes].some((other) => !other.dead);
      if (!hope && this.failedStarts >= startAttempts) {
        // Starting more would fail as these did: each waiting request is told why, and the next one tries again.
        const reason = `the validation process could not start ${this.failedStarts} times (the last time, ${worker.startFailure}): the server's log has the details`;
        this.failedStarts = 0;
        for (const request of this.queue.splice(0)) request.reject(new Error(reason));
        return;
      }
    }
    this.dispatch();
  }

  private onAnswered(ms: number): void {
    this.serviceMs = 0.8 * this.serviceMs + 0.2 * ms;
  }
}

function formatSeconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1).replace(/\.0$/, "")} s`;
}

/** The pool's size from `TINKERLAB_VALIDATION_PROCESSES` (server/env.ts), or the default; an invalid value is an error naming it. */
export function validationProcessesFromEnv(env: Record<string, string | undefined> = process.env): number {
  const raw = env[validationProcessesVariable];
  const parsed = serverEnvSchema.shape.TINKERLAB_VALIDATION_PROCESSES.safeParse(raw === undefined || raw.trim() === "" ? undefined : raw);
  if (!parsed.success) throw new Error(`${validationProcessesVariable} ${parsed.error.issues[0]!.message}; got ${JSON.stringify(raw)}`);
  return parsed.data;
}

const holder = globalThis as typeof globalThis & {
  __tinkerlabValidation?: ValidationPool;
  __tinkerlabValidationReports?: Map<string, { at: number; report: Promise<ValidationReport> }>;
};

/**
 * Validates user source in one of the server's validation processes (see validate-cli.ts). `processes` (default
 * `TINKERLAB_VALIDATION_PROCESSES`, else 2) sizes the server's pool when it is first made; `timeoutMs` (60 s)
 * bounds this request's own run, not its wait for a free process.
 */
export function validateInChildProcess(
  files: SourceFiles,
  options: ValidateOptions,
  { root = process.cwd(), timeoutMs = defaultValidationTimeoutMs, processes }: { root?: string; timeoutMs?: number; processes?: number } = {},
): Promise<ValidationReport> {
  try {
    // (a server reloaded in development may hold an older module's pool: any object with `validate` serves)
    holder.__tinkerlabValidation ??= new ValidationPool(root, processes ?? validationProcessesFromEnv());
  } catch (error) {
    return Promise.reject(error);
  }
  return holder.__tinkerlabValidation.validate(files, options, timeoutMs);
}

/** How long a validation's report is reused for the same source and options, and how many reports are kept. */
const reuseReportsMs = 10 * 60_000;
const reusedReports = 64;

/**
 * `validateInChildProcess`, reusing the report of the same files with the same options (datasets and base
 * included) from the last ten minutes, or the validation of them still running. The editor validates as its user
 * types, and `runs.launch` validates the version it launches (server/api/routers/runs.ts): a launch of what was just
 * validated costs no second validation. A validation that failed (it overran, its process died) is not kept.
 */
export function validateReusing(
  files: SourceFiles,
  options: ValidateOptions,
  settings: Parameters<typeof validateInChildProcess>[2] = {},
): Promise<ValidationReport> {
  const reports = (holder.__tinkerlabValidationReports ??= new Map());
  const key = createHash("sha256")
    .update(stableJson([files, options]))
    .digest("base64url");
  const now = Date.now();
  const kept = reports.get(key);
  reports.delete(key);
  if (kept && now - kept.at < reuseReportsMs) {
    reports.set(key, kept); // the most recently used last
    return kept.report;
  }
  const report = validateInChildProcess(files, options, settings);
  reports.set(key, { at: now, report });
  report.catch(() => {
    if (reports.get(key)?.report === report) reports.delete(key);
  });
  for (const oldest of reports.keys()) {
    if (reports.size <= reusedReports) break;
    reports.delete(oldest);
  }
  return report;
}

/** JSON with every object's keys in order, so that the same files and options give the same text (jsonb reorders keys). */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** Kills the server's validation processes (tests, shutdown) and forgets their reports; the next validation starts a new pool. */
export function closeValidationProcesses(): void {
  holder.__tinkerlabValidation?.close();
  holder.__tinkerlabValidation = undefined;
  holder.__tinkerlabValidationReports?.clear();
}
