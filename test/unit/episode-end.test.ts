/** The episode player's account of how an episode ended, on episodes played by the SDK's own runEpisodes. */
import { describe, expect, it } from "vitest";
import { describeEnd } from "@/components/episode/episode-end";
import { useCases } from "@/lib/envs";
import { defineEnvironment, EnvironmentSession } from "@/lib/sdk/environment";
import { multiTurn, runEpisodes, singleTurn, turnBased, type Protocol } from "@/lib/sdk/protocol";

const duel = useCases["tic-tac-toe"]!.duel!.environment;
const xo = turnBased(["X", "O"]);

/** One game of two-player tic-tac-toe with these moves, X first; `fits` stands for the policy's context check. */
async function game(moves: string[], fits?: (turn: number) => boolean) {
  const queue = [...moves];
  let asked = 0;
  const [trajectory] = await runEpisodes(xo, [{ session: new EnvironmentSession(duel), seed: 0 }], async () => [{ text: queue.shift()! }], {
    fitsContext: fits && (() => fits(asked++)),
  });
  return trajectory!;
}

const limits = (protocol: Protocol, maxTurns = 9) => ({ protocol, maxTurns, contextLength: 64 });

describe("how the episode player says an episode ended", () => {
  it("names the winner of a game, or a draw", async () => {
    expect(describeEnd(await game(["a1", "b1", "a2", "b2", "a3"]), limits(xo))).toBe("X won");
    expect(describeEnd(await game(["a1", "b1", "c3", "b2", "a3", "b3"]), limits(xo))).toBe("O won");
    const draw = await game(["b2", "a1", "c1", "a3", "a2", "c2", "b1", "b3", "c3"]);
    expect(draw.turns).toHaveLength(9);
    expect(describeEnd(draw, limits(xo))).toBe("a draw");
  });

  it("says which player's invalid move cut the game short, and why it was invalid", async () => {
    const trajectory = await game(["a1", "a1"]);
    expect(describeEnd(trajectory, limits(xo))).toBe("cut short by O's invalid move (a1 is taken)");
  });

  it("says the conversation outgrew the policy's context when runEpisodes stopped before a turn", async () => {
    const trajectory = await game(["a1", "b1", "a2"], (turn) => turn < 2);
    expect(trajectory.turns).toHaveLength(2);
    expect(describeEnd(trajectory, limits(xo))).toBe("cut short: the conversation outgrew the policy's context (64 tokens)");
    expect(describeEnd(await game([], () => false), { protocol: xo, maxTurns: 9, contextLength: null })).toBe(
      "cut short: the conversation outgrew the policy's context",
    );
  });

  it("names the environment's turn limit, and a single turn that did not end its episode", async () => {
    const endless = defineEnvironment<number, string>({
      name: "endless",
      data: { kind: "free" },
      systemPrompt: "Say anything.",
      maxTurns: 3,
      reset: () => ({ state: 0, observation: "0" }),
      parseAction: (text) => ({ ok: true, action: text }),
      step: (state) => ({ state: state + 1, observation: String(state + 1), reward: 0, done: false }),
    });
    const act = async () => [{ text: "go" }];
    const [limited] = await runEpisodes(multiTurn(), [{ session: new EnvironmentSession(endless), seed: 0 }], act);
    expect(describeEnd(limited!, limits(multiTurn(), 3))).toBe("cut short: the turn limit (3 turns)");
    const [single] = await runEpisodes(singleTurn(), [{ session: new EnvironmentSession(endless), seed: 0 }], act);
    expect(describeEnd(single!, limits(singleTurn(), 3))).toBe("cut short: a single-turn episode has one turn, and it did not end it");
  });

  it("says nothing more of an episode its environment ended without a winner", async () => {
    const once = defineEnvironment<number, string>({
      name: "once",
      data: { kind: "free" },
      systemPrompt: "Say anything.",
      maxTurns: 3,
      reset: () => ({ state: 0, observation: "0" }),
      parseAction: (text) => ({ ok: true, action: text }),
      step: (state) => ({ state, reward: 1, done: true }),
    });
    const [trajectory] = await runEpisodes(multiTurn(), [{ session: new EnvironmentSession(once), seed: 0 }], async () => [{ text: "hi" }]);
    expect(describeEnd(trajectory!, limits(multiTurn(), 3))).toBeNull();
  });
});
