/**
 * What the editor's Launch button and `runs.launch` refuse across a config's fields (server/validation/browser.ts):
 * a league on a game that is not for two, a learner that is no agent, a league with separate policies, and separate
 * policies imitating an uploaded dataset (its conversations name no agent). Each is named under its field, before a worker would refuse it at the run's start.
 */
import { describe, expect, it } from "vitest";
import { configIssues, launchRefusal } from "@/server/validation/browser";

const context = { files: {}, report: null, builtInEnvironments: ["tic-tac-toe-duel", "arithmetic"] };
const duel = (protocol: Record<string, unknown>, algorithm: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  name: "duel",
  environment: "tic-tac-toe-duel",
  agent: { base: "generalist-base" },
  protocol: { name: "turn-based", agents: ["X", "O"], ...protocol },
  algorithm: { name: "grpo", ...algorithm },
  ...extra,
});

describe("cross-field refusals", () => {
  it("accepts a league on a game for two, with the learner at an agent or alternating", () => {
    expect(configIssues(duel({}, { league: { every: 5 } }), context).size).toBe(0);
    expect(configIssues(duel({}, { league: { every: 5, learner: "O" } }), context).size).toBe(0);
  });

  it("refuses a league on three agents, naming the field and what to do", () => {
    const issues = configIssues(duel({ agents: ["A", "B", "C"] }, { league: { every: 5 } }), context);
    expect(issues.get("algorithm.league")?.[0]).toMatch(/needs a game of two agents .*got 3 \(A, B, C\).*set algorithm\.league to null/);
  });

  it("refuses a learner that is none of the agents, listing those accepted", () => {
    const issues = configIssues(duel({}, { league: { learner: "Z" } }), context);
    expect(issues.get("algorithm.league.learner")).toEqual(["'Z' is not an agent of the protocol; accepted: X, O, both-seats-alternating"]);
  });

  it("refuses a league with separate policies, and separate policies imitating a dataset, but not their own demonstrations", () => {
    expect(configIssues(duel({ policies: "separate" }, { league: { every: 5 } }), context).get("algorithm.league")?.[0]).toMatch(
      /use protocol\.policies "shared"/,
    );
    const refusal = launchRefusal(duel({ policies: "separate" }, {}, { sft: { steps: 20, data: "dataset", dataset: "games" } }), context);
    expect(refusal?.problems.join("\n")).toMatch(
      /^protocol\.policies: separate policies imitate each agent's own demonstrations.*set sft\.data to "demonstrator"/m,
    );
    // The demonstrator's turns at each agent teach that agent's policy: before RL, or as an SFT run.
    expect(configIssues(duel({ policies: "separate" }, {}, { sft: { steps: 20 } }), context).size).toBe(0);
    expect(configIssues(duel({ policies: "separate" }, { name: "sft" }), context).size).toBe(0);
    expect(configIssues(duel({ policies: "separate" }, {}), context).size).toBe(0);
  });
});
