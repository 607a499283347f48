/** Builders for the sandbox tests: a minimal environment source whose parts a test replaces. */
import { SandboxedEnvironmentPool } from "@/server/sandbox";
import type { SandboxLimitsInput } from "@/server/sandbox";

export type EnvParts = {
  top?: string;
  name?: string;
  maxTurns?: number;
  reset?: string;
  parseAction?: string;
  step?: string;
  extra?: string;
};

/** An environment file; each part is the source of one member (a method body or an expression). */
export function envSource(parts: EnvParts = {}): string {
  return [
    `import { defineEnvironment } from "tinkerlab";`,
    parts.top ?? "",
    `export default defineEnvironment<{ n: number }, string>({`,
    `  name: ${JSON.stringify(parts.name ?? "test-env")},`,
    `  data: { kind: "free" },`,
    `  systemPrompt: "play",`,
    `  maxTurns: ${parts.maxTurns ?? 10},`,
    `  reset(context) {`,
    `    ${parts.reset ?? `return { state: { n: 0 }, observation: "start" };`}`,
    `  },`,
    `  parseAction(text, state) {`,
    `    ${parts.parseAction ?? `return { ok: true, action: text };`}`,
    `  },`,
    `  step(state, action, context) {`,
    `    ${parts.step ?? `return { state: { n: state.n + 1 }, observation: "n=" + (state.n + 1), reward: 1, done: state.n + 1 >= 3 };`}`,
    `  },`,
    parts.extra ?? "",
    `});`,
    ``,
  ].join("\n");
}

/** Code that keeps the sandbox's thread busy for `ms` milliseconds by the wall clock: at least that long on any machine. */
export function busyWait(ms: number): string {
  return `const until = Date.now() + ${ms}; while (Date.now() < until) {}`;
}

/** A step() body that busy-waits `ms` milliseconds (busyWait), then counts: observation "n=1", "n=2", …. */
export function busyStep(ms: number): string {
  return `${busyWait(ms)} return { state: { n: state.n + 1 }, observation: "n=" + (state.n + 1), reward: 0, done: false };`;
}

export const fastLimits: SandboxLimitsInput = { cpuMsPerCall: 100, cpuMsPerEpisode: 400, memoryMb: 24, maxStackKb: 256 };

export function createPool(parts: EnvParts = {}, limits: SandboxLimitsInput = fastLimits) {
  return SandboxedEnvironmentPool.create({ files: { "environment.ts": envSource(parts) } }, { limits });
}

/** Runs reset and one step in slot 0 and returns the error thrown, or fails the test. */
export async function firstError(run: () => unknown): Promise<Error & Record<string, unknown>> {
  try {
    await run();
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  throw new Error("expected an error; none was thrown");
}
