/**
 * What one sandbox may use. An experiment asks for its own limits; the server clamps them to its maxima, so a
 * user can lower any limit but never raise one past what the server allows. A value over a maximum is an error
 * that names the field and the maximum, not a silent clamp.
 */
import { z } from "zod";

/** The most any experiment may ask for. */
export const sandboxMaxima = {
  cpuMsPerCall: 1_000,
  cpuMsPerEpisode: 30_000,
  memoryMb: 256,
  maxStackKb: 1_024,
  maxObservationChars: 1_000_000,
  maxActionChars: 100_000,
  maxStepsPerEpisode: 1_000,
} as const;

const limit = (max: number, fallback: number, description: string) =>
  z
    .number(`must be a whole number from 1 to ${max}`)
    .int(`must be a whole number from 1 to ${max}`)
    .min(1, `must be a whole number from 1 to ${max}`)
    .max(max, `must be at most ${max.toLocaleString("en-US")}, the server's maximum`)
    .default(fallback)
    .describe(description);

export const sandboxLimitsSchema = z.object({
  cpuMsPerCall: limit(sandboxMaxima.cpuMsPerCall, 200, "CPU milliseconds one reset, step, render or score may take"),
  cpuMsPerEpisode: limit(sandboxMaxima.cpuMsPerEpisode, 5_000, "CPU milliseconds one episode may take in all (also bounds loading the code)"),
  memoryMb: limit(sandboxMaxima.memoryMb, 64, "heap of one sandbox (all its episodes together), in MiB"),
  maxStackKb: limit(sandboxMaxima.maxStackKb, 512, "call stack of the sandbox, in KiB (deep recursion stops here)"),
  maxObservationChars: limit(sandboxMaxima.maxObservationChars, 100_000, "longest observation, render, system prompt, or info/state as JSON"),
  maxActionChars: limit(sandboxMaxima.maxActionChars, 10_000, "longest action text handed to the environment"),
  maxStepsPerEpisode: limit(sandboxMaxima.maxStepsPerEpisode, 1_000, "steps after which an episode that has not ended is an error"),
});

export type SandboxLimits = z.infer<typeof sandboxLimitsSchema>;
export type SandboxLimitsInput = z.input<typeof sandboxLimitsSchema>;
export type SandboxLimitName = keyof SandboxLimits;

export const defaultSandboxLimits: SandboxLimits = sandboxLimitsSchema.parse({});

/** Validates an experiment's limits against the server's maxima; an invalid value names the field. */
export function resolveSandboxLimits(input: SandboxLimitsInput = {}): SandboxLimits {
  const parsed = sandboxLimitsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const field = issue.path.join(".") || "(limits)";
    const given = (input as Record<string, unknown>)[String(issue.path[0])];
    return `${field}: ${issue.message} (got ${JSON.stringify(given)})`;
  });
  throw new Error(`Invalid sandbox limits:\n${problems.join("\n")}`);
}
