/**
 * Validation's dry run plays actions that parse (the demonstrator's, then legal ones), so a step() that fails on
 * real actions is caught before launch; it says when no action parsed, and refuses a first prompt that leaves no
 * room for the reply in the base's context, naming both lengths.
 */
import { describe, expect, it } from "vitest";
import { validateExperimentSource } from "@/server/sandbox/validate";
import { envSource } from "./helpers";

const strictParse = `return /^take [123]$/.test(text) ? { ok: true, action: Number(text.slice(5)) } : { ok: false, error: "write take 1, take 2 or take 3" };`;
const throwingStep = `if (action === 3) throw new Error("three is not handled"); return { state: { n: state.n + action }, observation: "n=" + (state.n + action), reward: 0, done: state.n + action >= 6 };`;
const files = (extra: string, step = throwingStep) => ({ "environment.ts": envSource({ parseAction: strictParse, step, extra }) });

describe("validation's dry run", () => {
  it("plays legal actions, so a step() that throws on a real action fails validation", async () => {
    const report = await validateExperimentSource(files(`actions: ["take 1", "take 2", "take 3"],`), { typeCheck: false });
    expect(report.ok).toBe(false);
    expect(report.diagnostics.map((d) => d.message).join("\n")).toMatch(/three is not handled/);
  });

  it("plays the demonstrator in its first episode", async () => {
    const report = await validateExperimentSource(files(`demonstrate: (state) => "take 1",`), { typeCheck: false, episodes: 3 });
    expect(report.ok).toBe(true);
    expect(report.episodes[0]).toMatchObject({ actions: "demonstrator", done: true, turns: 6 });
    expect(report.episodes[2]!.actions).toBe("probes");
  });

  it("warns when none of its actions parsed, naming what to declare", async () => {
    const report = await validateExperimentSource(files(""), { typeCheck: false });
    expect(report.diagnostics).toContainEqual(
      expect.objectContaining({
        severity: "warning",
        message: expect.stringMatching(/none of the dry run's \d+ actions parsed, so step\(\) never ran: declare the legal actions/),
      }),
    );
  });

  it("warns when maxTokens is too short for the longest legal action and its end", async () => {
    const report = await validateExperimentSource(files(`actions: ["take 1", "take 2", "take 3"],`, `return { state, reward: 0, done: true };`), {
      typeCheck: false,
      context: { base: "tiny-base", contextLength: 256, maxTokens: 6 },
    });
    expect(report.diagnostics).toContainEqual(
      expect.objectContaining({
        severity: "warning",
        message: expect.stringMatching(
          /"take 1" is 6 tokens and its turn ends with one more, but agent.sampling.maxTokens is 6: .*Set maxTokens to at least 7/,
        ),
      }),
    );
  });

  it("refuses a first prompt that leaves the reply no room in the base's context, naming both lengths", async () => {
    // bos + <system> "play" <end> + <user> "start" <end> + <assistant> = 1 + 6 + 7 + 1 = 15 tokens
    const fits = await validateExperimentSource(files(`actions: ["take 1"],`), {
      typeCheck: false,
      context: { base: "tiny-base", contextLength: 23, maxTokens: 8 },
    });
    expect(fits.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    const over = await validateExperimentSource(files(`actions: ["take 1"],`), {
      typeCheck: false,
      context: { base: "tiny-base", contextLength: 22, maxTokens: 8 },
    });
    expect(over.ok).toBe(false);
    expect(over.diagnostics.find((d) => d.severity === "error")?.message).toMatch(
      /is 15 tokens, and the agent writes up to 8 \(agent.sampling.maxTokens\): 23 in all, but base 'tiny-base' holds 22 tokens/,
    );
  });
});
