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

/**
 * One validation process: started once, it answers one request at a time until it dies or is killed. Its own
 * death fails only the request it was running.
 */
class ValidationProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  /** The request this process is running, or null when it is idle. */
  private request: { id: number; request: ValidationRequest; timer: NodeJS.Timeout } | null = null;
  private nextId = 1;
  private stderr = "";
  /** The process has said it is ready (its modules are loaded); requests wait for it. */
  private ready = false;
  private startTimer: NodeJS.Timeout | null = null;
  /** It has exited or been killed: no request goes to it any more. */
  dead = false;
  /** Why it died before it was ready (null: it started, or is alive). */
  startFailure: string | null = null;

  constructor(
    root: string,
    /** Told when this process can take another request (it is ready or idle again) or has died. */
    private readonly onFree: (process: ValidationProcess) => void,
  ) {
    const tsx = path.join(root, "node_modules", "tsx", "dist", "cli.mjs");
    this.child = spawn(process.execPath, [tsx, path.join(root, "server", "sandbox", "validate-cli.ts")], { cwd: root, stdio: "pipe" });
    this.child.stderr.on("data", (chunk) => (this.stderr = (this.stderr + chunk).slice(-4000)));
    readline.createInterface({ input: this.child.stdout }).on("line", (line) => this.onLine(line));
    this.child.on("exit", (code, signal) => this.onExit(code, signal));
    this.child.on("error", (error) => {
      this.stderr += `\n${error.message}`;
      this.kill();
    });
    this.child.stdin.on("error", () => {}); // a write to a process that just died surfaces through "exit"
    // An idle process keeps no one's event loop alive: a running request's timer does, and the start's.
    this.child.unref();
    for (const pipe of [this.child.stdin, this.child.stdout, this.child.stderr]) (pipe as unknown as { unref?(): void }).unref?.();
    this.startTimer = setTimeout(() => {
      this.stderr += `\nthe validation process did not start within ${startTimeoutMs / 1000} s`;
      this.kill();
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
    if (!this.ready) this.startFailure = this.lastWords(null, "SIGKILL");
    this.failRunning();
    this.onFree(this);
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
      if (!this.dead) this.onFree(this);
      return;
    }
    const running = this.request;
    if (!running || running.id !== answer.id) return;
    this.request = null;
    clearTimeout(running.timer);
    if (answer.report) running.request.resolve(answer.report);
    else running.request.reject(new Error(answer.error ?? "validation failed"));
    if (!this.dead) this.onFree(this);
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    const wasDead = this.dead;
    this.dead = true;
    if (this.startTimer) clearTimeout(this.startTimer);
    if (!this.ready && !wasDead) this.startFailure = this.lastWords(code, signal);
    this.failRunning(code, signal);
    if (!wasDead) this.onFree(this);
  }

  /** Rejects the request this process was running (if any): only that one. */
  private failRunning(code: number | null = null, signal: NodeJS.Signals | null = null): void {
    const running = this.request;
    if (!running) return;
    this.request = null;
    clearTimeout(running.timer);
    running.request.reject(new Error(`the validation process stopped: ${this.lastWords(code, signal)}`));
  }

  /** The end of what the process wrote to stderr, or how it ended. */
  private lastWords(code: number | null, signal: NodeJS.Signals | null): string {
    return this.stderr.trim().split("\n").slice(-3).join(" ") || (signal ? `killed by ${signal}` : code !== null ? `exit code ${code}` : "no message");
  }
}

/**
 * A pool of validation processes (validate-cli.ts), each started on first need and reused, so that a validation
 * costs its own work rather than a process start. Each request has a process of its own while it runs; requests
 * beyond the pool's size wait in order for a free one. A request that outlives its time is killed with its
 * process (and only it fails); the process is replaced when the next request needs one.
 */
export class ValidationPool {
  private readonly processes = new Set<ValidationProcess>();
  private readonly queue: ValidationRequest[] = [];
  private closed = false;

  constructor(
    private readonly root: string,
    readonly size: number,
  ) {
    if (!Number.isInteger(size) || size < 1 || size > maxValidationProcesses) {
      throw new Error(`the validation pool's size must be a whole number from 1 to ${maxValidationProcesses}; got ${String(size)}`);
    }
  }

  /** Validates in a free process, after the requests before it; `timeoutMs` counts from when a process takes it. */
  validate(files: SourceFiles, options: ValidateOptions, timeoutMs = defaultValidationTimeoutMs): Promise<ValidationReport> {
    if (this.closed) return Promise.reject(new Error("the validation pool has been closed"));
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
    // A process that is starting takes the next waiting request when it is ready.
    while (!this.closed && this.queue.length > starting && this.processes.size < this.size) {
      this.processes.add(new ValidationProcess(this.root, (worker) => this.onFree(worker)));
      starting++;
    }
  }

  private onFree(worker: ValidationProcess): void {
    if (worker.dead) this.processes.delete(worker);
    if (this.closed) return;
    // A process that could not start fails the first waiting request, so that a broken installation answers
    // each request with why, instead of starting processes without end.
    if (worker.startFailure !== null) this.queue.shift()?.reject(new Error(`the validation process could not start: ${worker.startFailure}`));
    this.dispatch();
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
