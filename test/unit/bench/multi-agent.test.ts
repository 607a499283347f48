/** The multi-agent bench's scripted seat: one agent played by a script that reads the state, the other by the policy. */
import { describe, expect, it } from "vitest";
import { scriptedSeat } from "@/bench/lib/multi-agent";
import { type BoardState, freeCells, ticTacToeSelfPlay } from "@/lib/envs/board-games";
import { evaluate } from "@/lib/rl/evaluate";
import { turnBased } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";

describe("a scripted seat", () => {
  it("answers its agent's turns from the state and leaves the other agent's to the policy", async () => {
    const base = BaseModel.create({ vocabSize: 262, contextLength: 96, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 1 });
    const policy = { primitives: new TrainingClient(base, { seed: 1 }), tokenizer: base.tokenizer, contextLength: 96 };
    // The script plays the first free cell, so each of its moves can be checked against the board it was shown.
    const firstFree = (state: BoardState) => freeCells(state)[0]!;
    const { trajectories } = await evaluate({
      policy,
      environment: ticTacToeSelfPlay,
      protocol: turnBased(["X", "O"], "last"),
      specs: Array.from({ length: 16 }, (_, i) => ({ seed: 100 + i })),
      maxTokens: 3,
      temperature: 1,
      playEpisodes: scriptedSeat(ticTacToeSelfPlay, "O", firstFree),
    });
    const turns = trajectories.flatMap((t) => t.turns);
    const scripted = turns.filter((turn) => turn.agent === "O");
    const sampled = turns.filter((turn) => turn.agent === "X");
    expect(scripted.length).toBeGreaterThan(0);
    expect(sampled.length).toBeGreaterThan(0);
    // Before each scripted move the board shows free cells by name, row by row: the script took the first of them.
    for (const turn of scripted) {
      const free = turn.observation.split(/\s+/).filter((cell) => /^[a-c][1-3]$/.test(cell));
      expect(turn.action).toBe(free[0]);
      expect(turn.actionTokens).toEqual([]);
    }
    // The policy's turns were sampled: they carry its tokens and are held to the legal moves.
    for (const turn of sampled) expect(turn.actionTokens.length).toBeGreaterThan(0);
    // Each game is played to its end, one way or the other, by the two seats together.
    for (const trajectory of trajectories) expect(trajectory.agentReturns.X! + trajectory.agentReturns.O!).toBe(0);
  });
});
