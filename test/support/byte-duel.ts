/** A two-agent game small enough for unit tests of seats and leagues (lib/rl/seats.ts, league-training.ts). */
import { defineEnvironment } from "@/lib/sdk/environment";
import { turnBased } from "@/lib/sdk/protocol";

/** The first byte of a reply (0 for none). */
export const byte = (text: string) => text.charCodeAt(0) || 0;

/**
 * A then B reply once; the reply with the higher first byte wins (+1 / −1), equal ones draw: zero-sum. The score
 * is A's byte over 256.
 */
export const byteDuel = defineEnvironment<{ a: number }, string>({
  name: "byte-duel",
  data: { kind: "free" },
  systemPrompt: "",
  maxTurns: 2,
  reset: () => ({ state: { a: 0 }, observation: "go" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, text, { agent }) => {
    if (agent === "A") return { state: { a: byte(text) }, observation: "go", rewards: { A: 0, B: 0 }, done: false };
    const score = Math.sign(state.a - byte(text));
    return { state, rewards: { A: score, B: -score }, done: true };
  },
  score: ({ state }) => state.a / 256,
});

export const byteDuelProtocol = turnBased(["A", "B"]);
