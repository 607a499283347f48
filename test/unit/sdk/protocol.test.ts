import { describe, expect, it } from "vitest";
import { ticTacToe } from "@/lib/envs/board-games";
import { guessNumber } from "@/lib/envs/guess-number";
import { defineEnvironment, EnvironmentSession } from "@/lib/sdk/environment";
import { multiTurn, runEpisodes, singleTurn, turnBased, type ActRequest } from "@/lib/sdk/protocol";

/** A scripted player that bisects: what a perfect guess-the-number policy does. */
function bisect(requests: ActRequest[]) {
  return Promise.resolve(
    requests.map(({ messages }) => {
      let lo = 1;
      let hi = 100;
      for (let i = 1; i < messages.length; i++) {
        const m = messages[i]!;
        if (m.role !== "assistant") continue;
        const guess = Number(m.content);
        const answer = messages[i + 1]?.content;
        if (answer?.startsWith("higher")) lo = guess + 1;
        if (answer?.startsWith("lower")) hi = guess - 1;
      }
      return { text: String(Math.floor((lo + hi) / 2)) };
    }),
  );
}

describe("protocols", () => {
  it("multi-turn: a bisecting player solves every game within 7 guesses, seeing the whole conversation", async () => {
    const starts = Array.from({ length: 50 }, (_, seed) => ({ session: new EnvironmentSession(guessNumber), seed }));
    const trajectories = await runEpisodes(multiTurn(), starts, bisect);
    expect(trajectories.every((t) => t.score === 1)).toBe(true);
    expect(Math.max(...trajectories.map((t) => t.turns.length))).toBeLessThanOrEqual(7);
    expect(trajectories[0]!.turns[0]!.observation).toBe("1-100");
  });

  it("asks every live episode once per round, in one batch", async () => {
    const batchSizes: number[] = [];
    const starts = Array.from({ length: 8 }, (_, seed) => ({ session: new EnvironmentSession(guessNumber), seed }));
    await runEpisodes(multiTurn(), starts, (requests) => {
      batchSizes.push(requests.length);
      return bisect(requests);
    });
    expect(batchSizes[0]).toBe(8);
    expect(batchSizes).toEqual([...batchSizes].sort((a, b) => b - a)); // finished episodes drop out, none come back
  });

  it("history 'last' shows only the system prompt and the latest board", async () => {
    const seen: number[] = [];
    const starts = [{ session: new EnvironmentSession(ticTacToe), seed: 3 }];
    await runEpisodes(multiTurn("agent", "last"), starts, (requests) => {
      seen.push(requests[0]!.messages.length);
      const board = requests[0]!.messages
        .at(-1)!
        .content.split("\n")
        .slice(1)
        .map((row) => row.slice(2));
      const free = board.join("").indexOf(".");
      return Promise.resolve([{ text: `${"abc"[free % 3]}${Math.floor(free / 3) + 1}` }]);
    });
    expect(seen.every((n) => n === 2)).toBe(true);
  });

  it("single-turn ends after one action even when the environment would go on", async () => {
    const [trajectory] = await runEpisodes(singleTurn(), [{ session: new EnvironmentSession(guessNumber), seed: 1 }], () => Promise.resolve([{ text: "50" }]));
    expect(trajectory!.turns).toHaveLength(1);
    expect(trajectory!.truncated).toBe(trajectory!.score === 0);
  });

  it("ends an episode whose prompt no longer fits the context, instead of failing the batch", async () => {
    const starts = [0, 1].map((seed) => ({ session: new EnvironmentSession(guessNumber), seed }));
    const trajectories = await runEpisodes(multiTurn(), starts, () => Promise.resolve([{ text: "1" }, { text: "1" }].slice(0, starts.length)), {
      fitsContext: (messages) => messages.length < 6,
    });
    expect(trajectories.every((t) => t.truncated && t.turns.length === 2)).toBe(true);
  });

  it("turn-based: agents act in order and each keeps its own return", async () => {
    const race = defineEnvironment<{ total: number; turn: number }, number>({
      name: "race-to-ten",
      data: { kind: "free" },
      systemPrompt: "Add 1 or 2; whoever reaches 10 wins.",
      maxTurns: 20,
      reset: () => ({ state: { total: 0, turn: 0 }, observation: "0" }),
      parseAction: (text) => (text === "1" || text === "2" ? { ok: true, action: Number(text) } : { ok: false, error: "1 or 2" }),
      step: (state, add) => {
        const total = state.total + add;
        return { state: { total, turn: state.turn + 1 }, observation: String(total), reward: total >= 10 ? 1 : 0, done: total >= 10 };
      },
    });
    const order: string[] = [];
    const [trajectory] = await runEpisodes(turnBased(["alice", "bob"]), [{ session: new EnvironmentSession(race), seed: 0 }], (requests) => {
      order.push(...requests.map((r) => r.agent));
      return Promise.resolve(requests.map((r) => ({ text: r.agent === "alice" ? "2" : "1" })));
    });
    expect(order.slice(0, 4)).toEqual(["alice", "bob", "alice", "bob"]);
    // 2,1,2,1,2,1,2 → alice reaches 11 on the 7th move
    expect(trajectory!.agentReturns).toEqual({ alice: 1, bob: 0 });
    expect(() => turnBased(["solo"])).toThrow(/at least two agents/);
  });
});
