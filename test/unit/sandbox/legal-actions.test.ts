/**
 * Legal actions of an environment that runs in the sandbox: a fixed list or pattern comes with the description,
 * actions that depend on the state come with every reset and step, and the requests the protocol hands the policy
 * carry them exactly as the same environment run natively gives them.
 */
import { afterEach, describe, expect, it } from "vitest";
import { multiTurn, runEpisodes, type ActRequest } from "@/lib/sdk/protocol";
import { EnvironmentSession, defineEnvironment } from "@/lib/sdk/environment";
import { runSandboxedEpisodes, type SandboxedEnvironmentPool } from "@/server/sandbox";
import { createPool } from "./helpers";

const pools: SandboxedEnvironmentPool[] = [];
afterEach(() => pools.splice(0).forEach((pool) => pool.dispose()));

const countdown = {
  reset: `return { state: { n: 5 + (context.seed % 3) }, observation: "left " + (5 + (context.seed % 3)) };`,
  parseAction: `return /^[123]$/.test(text) ? { ok: true, action: text } : { ok: false, error: "take 1, 2 or 3" };`,
  step: `const n = state.n - Number(action); return { state: { n }, observation: "left " + n, reward: n <= 0 ? 1 : 0, done: n <= 0 };`,
};

/** A policy that takes the largest legal number, recording what each request allowed. */
function largest(seen: (ActRequest["legalActions"] | undefined)[][]) {
  return async (requests: ActRequest[]) => {
    seen.push(requests.map((r) => r.legalActions));
    return requests.map((r) => {
      const legal = r.legalActions && "actions" in r.legalActions ? r.legalActions.actions : ["1"];
      return { text: legal.at(-1)! };
    });
  };
}

describe("legal actions in the sandbox", () => {
  it("sends state-dependent actions with every reset and step, as the native session gives them", async () => {
    const extra = `actions: (state) => ["1", "2", "3"].filter((k) => Number(k) <= state.n),`;
    const pool = await createPool({ ...countdown, extra });
    pools.push(pool);
    expect(pool.environment.actions).toBe("state");
    const starts = [0, 1, 2, 3].map((seed) => ({ seed }));
    const sandboxed: (ActRequest["legalActions"] | undefined)[][] = [];
    const trajectories = await runSandboxedEpisodes(multiTurn(), pool, starts, largest(sandboxed), {});

    const definition = defineEnvironment<{ n: number }, string>({
      name: "test-env",
      data: { kind: "free" },
      systemPrompt: "play",
      maxTurns: 10,
      reset: ({ seed }) => ({ state: { n: 5 + (seed % 3) }, observation: `left ${5 + (seed % 3)}` }),
      parseAction: (text) => (/^[123]$/.test(text) ? { ok: true, action: text } : { ok: false, error: "take 1, 2 or 3" }),
      step: (state, action) => {
        const n = state.n - Number(action);
        return { state: { n }, observation: `left ${n}`, reward: n <= 0 ? 1 : 0, done: n <= 0 };
      },
      actions: (state) => ["1", "2", "3"].filter((k) => Number(k) <= state.n),
    });
    const native: (ActRequest["legalActions"] | undefined)[][] = [];
    const expected = await runEpisodes(
      multiTurn(),
      starts.map((s) => ({ ...s, session: new EnvironmentSession(definition) })),
      largest(native),
    );
    // The sandbox plays in lanes, so its rounds come in parts: compare episode by episode.
    expect(sandboxed.flat()).toHaveLength(native.flat().length);
    expect(trajectories.map((t) => t.turns.map((turn) => [turn.action, turn.legalActions]))).toEqual(
      expected.map((t) => t.turns.map((turn) => [turn.action, turn.legalActions])),
    );
    // seed 2 starts at 7: 3, 3, then only 1 is legal
    expect(trajectories[2]!.turns.map((turn) => turn.legalActions)).toEqual([{ actions: ["1", "2", "3"] }, { actions: ["1", "2", "3"] }, { actions: ["1"] }]);
  });

  it("gives a fixed pattern in the description, with the tools' calls beside it", async () => {
    const pool = await createPool({ ...countdown, extra: `actions: { pattern: "[123]" }, tools: { peek: { description: "", run: () => "x" } },` });
    pools.push(pool);
    expect(pool.environment.actions).toEqual({ pattern: "(?:[123])|@(?:peek)\\(.*\\)" });
  });

  it("fails the step whose state gives no legal action, naming actions(state)", async () => {
    const pool = await createPool({ ...countdown, extra: `actions: (state) => (state.n > 5 ? ["1"] : []),` });
    pools.push(pool);
    await expect(runSandboxedEpisodes(multiTurn(), pool, [{ seed: 0 }], async (r) => r.map(() => ({ text: "1" })), {})).rejects.toThrow(
      /actions\(state\) is empty/,
    );
  });
});
