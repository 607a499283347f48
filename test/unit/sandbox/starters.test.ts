/**
 * Every "write your own environment" starter works as it stands: it compiles, type-checks, declares its legal
 * actions and a demonstrator that validation plays to a reward, and its config is a valid experiment.
 */
import { describe, expect, it } from "vitest";
import { starters } from "@/components/editor/starter";
import { defineExperiment } from "@/lib/sdk/experiment";
import { validateExperimentSource } from "@/server/sandbox/validate";

describe("starters", () => {
  for (const starter of Object.values(starters)) {
    it(`${starter.kind}: validates, and its demonstrator earns a reward in the dry run`, async () => {
      const maxTokens = (starter.config("mine") as { agent: { sampling: { maxTokens: number } } }).agent.sampling.maxTokens;
      const report = await validateExperimentSource(
        { "environment.ts": starter.source },
        { typeCheck: true, context: { base: "generalist-base", contextLength: 256, maxTokens } },
      );
      expect(report.diagnostics.filter((d) => d.severity !== "info")).toEqual([]);
      expect(report.environment?.hasDemonstrator).toBe(true);
      expect(report.environment?.actions).not.toBeNull();
      expect(report.episodes[0]).toMatchObject({ actions: "demonstrator", done: true });
      expect(report.episodes[0]!.totalReward).toBeGreaterThan(0);
      expect(report.episodes[1]!.actions).toBe("legal");
      const config = defineExperiment(starter.config("mine") as never);
      expect(config.environment).toBe("custom");
      expect(report.episodes[0]!.promptTokens + config.agent.sampling.maxTokens).toBeLessThanOrEqual(256);
    }, 60_000);
  }
});
