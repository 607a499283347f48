import { defineEnvironment, type StepOutcome } from "tinkerlab";

// A pile of stones; each player takes 1, 2 or 3 in turn; whoever takes the last stone wins.
// The agent moves first against an opponent that leaves a multiple of 4 whenever it can.
type State = { pile: number; winner: "agent" | "opponent" | null };

// Piles the first player can win with perfect play: not multiples of 4.
const STARTS = [5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19];
const legal = (pile: number) => [1, 2, 3].filter((n) => n <= pile);
const left = (pile: number) => `${pile} stone${pile === 1 ? "" : "s"} left.`;

export default defineEnvironment<State, number>({
  name: "take-away",
  description: "Take 1, 2 or 3 stones in turn; whoever takes the last stone wins.",
  data: { kind: "free" },
  systemPrompt: "Take 1, 2 or 3 stones. Who takes the last stone wins.",
  maxTurns: 10, // the agent moves at most ceil(19 / 2) = 10 times
  reset({ rng }) {
    const pile = STARTS[Math.floor(rng.uniform() * STARTS.length)];
    return { state: { pile, winner: null }, observation: left(pile) };
  },
  actions: (state) => legal(state.pile).map(String),
  parseAction(text, state) {
    const t = text.trim();
    if (!/^[123]$/.test(t)) return { ok: false, error: "take 1, 2 or 3" };
    const n = Number(t);
    if (n > state.pile) return { ok: false, error: `only ${state.pile} left` };
    return { ok: true, action: n };
  },
  step(state, take, { rng }): StepOutcome<State> {
    const afterAgent = state.pile - take;
    if (afterAgent === 0) {
      return { state: { pile: 0, winner: "agent" }, reward: 1, done: true, info: { agent: take } };
    }
    // Optimal when possible (leave a multiple of 4), else a random legal amount.
    const options = legal(afterAgent);
    const theirs = afterAgent % 4 !== 0 ? afterAgent % 4 : options[Math.floor(rng.uniform() * options.length)];
    const pile = afterAgent - theirs;
    if (pile === 0) {
      return { state: { pile, winner: "opponent" }, reward: 0, done: true, info: { agent: take, opponent: theirs } };
    }
    return {
      state: { pile, winner: null },
      observation: `They took ${theirs}. ${left(pile)}`,
      reward: 0,
      done: false,
      info: { agent: take, opponent: theirs },
    };
  },
  render: (state) => `${"o".repeat(state.pile)} (${state.pile})${state.winner ? `, ${state.winner} won` : ""}`,
  demonstrate: (state) => String(state.pile % 4 === 0 ? 1 : state.pile % 4), // leave a multiple of 4
  score: ({ state }) => (state.winner === "agent" ? 1 : 0),
  scoreName: "win_rate",
});
