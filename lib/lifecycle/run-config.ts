/**
 * A run's config as the runs table stores it and a worker receives it: the experiment's config, parsed, and for a
 * remote session its own settings. Written only from a parsed value (`parseRunConfig`), read through it too, so a
 * run stored before a field was added gets that field's default.
 */
import { z } from "zod";
import { type ExperimentConfig, completeExperiment, experimentSchema } from "../sdk/experiment";
import { describeConfigError } from "../sdk/config-errors";

export const sessionSettingsSchema = z.object({
  leaseSeconds: z.number().int().positive().describe("a session without a call for this long is saved and ended"),
});
export type SessionSettings = z.infer<typeof sessionSettingsSchema>;

const runConfigSchema = experimentSchema.extend({ session: sessionSettingsSchema.optional() });
export type RunConfig = ExperimentConfig & { session?: SessionSettings };

export function parseRunConfig(value: unknown): RunConfig {
  const parsed = runConfigSchema.safeParse(value);
  if (!parsed.success) throw new Error(`Invalid run config:\n${describeConfigError(parsed.error, value)}`);
  return completeExperiment(parsed.data);
}
