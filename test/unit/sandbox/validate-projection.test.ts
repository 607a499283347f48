/**
 * Validation projects a whole episode's CPU time from the dry run's steps: a step() within its per-call limit
 * that would take an episode of maxTurns past cpuMsPerEpisode is a warning before launch, not a run stopped
 * minutes in.
 */
import { describe, expect, it } from "vitest";
import { validateExperimentSource } from "@/server/sandbox/validate";

/** step() busy for `ms` milliseconds of wall time: a time, not a loop count, so the projection does not depend on the machine's speed. */
const environment = (ms: number, maxTurns: number) => `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ t: number }, string>({
  name: "slow-steps",
  data: { kind: "free" },
  systemPrompt: "Go.",
  maxTurns: ${maxTurns},
  actions: ["go"],
  reset: () => ({ state: { t: 0 }, observation: "go" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step(state) {
    const until = Date.now() + ${ms};
    while (Date.now() < until) {}
    return { state: { t: state.t + 1 }, observation: "go", reward: 0, done: false };
  },
});
`;

describe("validation's projection of an episode's CPU time", () => {
  it("warns when step() times maxTurns would pass cpuMsPerEpisode, naming the turn a run would stop at", async () => {
    // 20 ms of wall time a step is 20 ms of CPU on an idle machine and less on a busy one: a low episode limit
    // (above the 100 ms of the dry run's 5 steps) keeps the projection over it while the thread gets any of a core
    const report = await validateExperimentSource(
      { "environment.ts": environment(20, 1000) },
      { typeCheck: false, episodes: 1, maxSteps: 5, limits: { cpuMsPerEpisode: 300 } },
    );
    const warning = report.diagnostics.find((d) => /ms of CPU per call in the dry run/.test(d.message));
    expect(warning?.severity).toBe("warning");
    expect(warning!.message).toMatch(
      /an episode of maxTurns=1000 turns would need about [\d,]+ ms, over the limit of 300 ms per episode \(cpuMsPerEpisode\), so a run would stop such an episode at about turn \d+/,
    );
    expect(report.ok).toBe(true); // a warning: the user decides
  }, 60_000);

  it("says nothing when a whole episode fits", async () => {
    const report = await validateExperimentSource({ "environment.ts": environment(0, 20) }, { typeCheck: false, episodes: 1, maxSteps: 5 });
    expect(report.diagnostics.filter((d) => /per call in the dry run/.test(d.message))).toEqual([]);
  }, 60_000);
});
