import { parseRunConfig, type RunConfig } from "@/lib/lifecycle/run-config";
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";

/** A parsed run config for rows a test writes itself: an arithmetic run on its base, with `changes` over it. */
export function testRunConfig(changes: Partial<ExperimentConfigInput> = {}): RunConfig {
  return parseRunConfig({ name: "test", environment: "arithmetic", agent: { base: "arithmetic-base" }, ...changes });
}
