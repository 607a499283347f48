/**
 * What goes wrong in user code, in one shape for the editor and the run page: a kind (the `source` of a
 * diagnostic), a message, and where possible the user's own file, line and column (1-based).
 */
import type { SandboxLimitName } from "./limits";

/** What a message says instead of a file of the server's own code, which is none of the user's business. */
export const runtimeName = "Tinkerlab's runtime";

export type DiagnosticSource = "syntax" | "type" | "runtime" | "contract" | "limit";

export type SourceLocation = { file: string; line: number; column: number };

export type SandboxDiagnostic = {
  severity: "error" | "warning" | "info";
  message: string;
  file: string | null;
  line: number | null;
  column: number | null;
  source: DiagnosticSource;
};

/** An error caused by user code; `kind` says whether it is the code's fault, the contract's, or a limit's. */
export class SandboxError extends Error {
  readonly kind: DiagnosticSource;
  readonly location: SourceLocation | null;
  /** The user's stack, mapped back to their files where the source map knows the frame. */
  readonly userStack: string | null;

  constructor(kind: DiagnosticSource, message: string, options: { location?: SourceLocation | null; userStack?: string | null } = {}) {
    super(message);
    this.name = "SandboxError";
    this.kind = kind;
    this.location = options.location ?? null;
    this.userStack = options.userStack ?? null;
  }

  toDiagnostic(): SandboxDiagnostic {
    return {
      severity: "error",
      message: this.message,
      file: this.location?.file ?? null,
      line: this.location?.line ?? null,
      column: this.location?.column ?? null,
      source: this.kind,
    };
  }
}

/** A sandbox's limits, and validation's CPU budget for its whole dry run (`dryRunCpuMs`, see validate.ts). */
export type SandboxLimitErrorName = SandboxLimitName | "dryRunCpuMs";

/** A limit was exceeded: the message names the limit, its value and the value reached. */
export class SandboxLimitError extends SandboxError {
  constructor(
    readonly limit: SandboxLimitErrorName,
    readonly limitValue: number,
    readonly reached: number | null,
    message: string,
    location: SourceLocation | null = null,
    userStack: string | null = null,
  ) {
    super("limit", message, { location, userStack });
    this.name = "SandboxLimitError";
  }
}

/** 2000001 → "2,000,001": the numbers in limit messages are read by people. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}
