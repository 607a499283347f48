/**
 * The web server's side of validation: user code is compiled, type-checked and dry-run in a child process
 * (server/sandbox/validate-cli.ts), never in the web server, which imports only this module and the sandbox's
 * types (the sandbox's code would bring esbuild and QuickJS into the server's bundle).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";
import readline from "node:readline";
import type { SourceFiles, ValidateOptions, ValidationReport } from "../sandbox";

type Pending = { resolve(report: ValidationReport): void; reject(error: Error): void; timer: NodeJS.Timeout };

/**
 * One validation process (validate-cli.ts) per server, started on first use and reused, so a validation costs
 * its own work rather than a process start. Requests run one at a time; one that outlives its time is killed
 * with its process, and the next request starts a fresh one.
 */
class ValidationProcess {
  private child: ChildProcessWithoutNullStreams | null = null;
  private pending = new Map<number, Pending>();
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly root: string) {}

  validate(files: SourceFiles, options: ValidateOptions, timeoutMs: number): Promise<ValidationReport> {
    const run = this.queue.then(() => this.send(files, options, timeoutMs));
    this.queue = run.catch(() => {});
    return run;
  }

  private send(files: SourceFiles, options: ValidateOptions, timeoutMs: number): Promise<ValidationReport> {
    const child = this.ensureChild();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        child.kill("SIGKILL");
        reject(new Error(`validation took longer than ${Math.round(timeoutMs / 1000)} s and was stopped`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      child.stdin.write(`${JSON.stringify({ id, files, options })}\n`);
    });
  }

  private ensureChild(): ChildProcessWithoutNullStreams {
    if (this.child && this.child.exitCode === null && !this.child.killed) return this.child;
    const tsx = path.join(this.root, "node_modules", "tsx", "dist", "cli.mjs");
    const child = spawn(process.execPath, [tsx, path.join(this.root, "server", "sandbox", "validate-cli.ts")], { cwd: this.root, stdio: "pipe" });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)));
    readline.createInterface({ input: child.stdout }).on("line", (line) => {
      const answer = JSON.parse(line) as { id: number; report?: ValidationReport; error?: string };
      const waiting = this.pending.get(answer.id);
      if (!waiting) return;
      this.pending.delete(answer.id);
      clearTimeout(waiting.timer);
      if (answer.report) waiting.resolve(answer.report);
      else waiting.reject(new Error(answer.error ?? "validation failed"));
    });
    child.on("exit", () => {
      if (this.child === child) this.child = null;
      for (const [id, waiting] of this.pending) {
        clearTimeout(waiting.timer);
        waiting.reject(new Error(`the validation process stopped: ${stderr.trim().split("\n").slice(-3).join(" ") || "no message"}`));
        this.pending.delete(id);
      }
    });
    child.unref();
    child.stdin.on("error", () => {}); // a write to a process that just died surfaces through "exit"
    this.child = child;
    return child;
  }
}

const holder = globalThis as typeof globalThis & { __tinkerlabValidation?: ValidationProcess };

/** Validates user source in the server's validation process (see validate-cli.ts). */
export function validateInChildProcess(files: SourceFiles, options: ValidateOptions, { root = process.cwd(), timeoutMs = 60_000 } = {}) {
  holder.__tinkerlabValidation ??= new ValidationProcess(root);
  return holder.__tinkerlabValidation.validate(files, options, timeoutMs);
}
