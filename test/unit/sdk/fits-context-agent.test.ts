import { describe, expect, it } from "vitest";
import { ticTacToeDuel } from "@/lib/envs/board-games";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { runEpisodes, turnBased } from "@/lib/sdk/protocol";

/** Plays the first free cell of the board the prompt shows (a free cell shows its own name). */
const firstFree = (text: string) => /[a-c][1-3]/.exec(text)?.[0] ?? "a1";

describe("the context check with several agents", () => {
  it("is told whose prompt it measures, so only the policy's side can cut a game short", async () => {
    const protocol = turnBased(["X", "O"]);
    const play = (fits: (agent: string, length: number) => boolean) =>
      runEpisodes(
        protocol,
        [{ session: new EnvironmentSession(ticTacToeDuel), seed: 1 }],
        async (requests) => requests.map((r) => ({ text: firstFree(r.messages.at(-1)!.content) })),
        { fitsContext: (messages, agent) => fits(agent, messages.length) },
      );
    const seen = new Set<string>();
    // O's prompts, which grow with the full history, are "too long" from its second turn: only an O check can end it.
    const cutAtO = await play((agent, length) => {
      seen.add(agent);
      return agent !== "O" || length < 4;
    });
    expect(seen).toEqual(new Set(["X", "O"]));
    expect(cutAtO[0]!.truncated).toBe(true);
    expect(cutAtO[0]!.turns.at(-1)!.agent).toBe("X");
    // The same limit on a side nobody measures (a person's) lets the game run to its end.
    const whole = await play((agent, length) => agent !== "nobody" || length < 4);
    expect(whole[0]!.truncated).toBe(false);
    expect(whole[0]!.turns.length).toBeGreaterThan(cutAtO[0]!.turns.length);
  });
});
