/**
 * Runs user code without trusting it: esbuild transpiles the user's TypeScript with the SDK bundled in, and a
 * QuickJS WebAssembly instance per sandbox runs it under CPU, memory, stack and size limits. See docs/SANDBOX.md.
 */
export { compileEnvironment, sandboxModules, type CompileResult, type CompiledEnvironment, type SourceFiles } from "./compile";
export {
  SandboxError,
  SandboxLimitError,
  type DiagnosticSource,
  type SandboxDiagnostic,
  type SandboxLimitErrorName,
  type SourceLocation,
} from "./errors";
export {
  defaultSandboxLimits,
  resolveSandboxLimits,
  sandboxLimitsSchema,
  sandboxMaxima,
  type SandboxLimitName,
  type SandboxLimits,
  type SandboxLimitsInput,
} from "./limits";
export {
  SandboxedEnvironmentPool,
  SandboxedSession,
  runSandboxedEpisodes,
  type SandboxSource,
  type SandboxedPlayOptions,
  type SandboxedReset,
  type SandboxedStep,
  type SandboxedSummary,
} from "./sandboxed-environment";
export { defaultLanes, laneShape, laneStarts } from "./lanes";
export type { ValidateOptions, ValidationReport } from "./validate";
export type { EnvironmentDescription } from "./wire";
export type { CrossingTiming, HostWork, SandboxProbe } from "./quickjs-host";
