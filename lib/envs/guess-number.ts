/** Use case 2: guess a number from 1 to 100; the environment answers "higher" or "lower". Multi-turn. */
import { defineEnvironment } from "@/lib/sdk/environment";

type State = { secret: number; guesses: number[]; solved: boolean };

export const MAX_GUESSES = 10;

export const guessNumber = defineEnvironment<State, number>({
  name: "guess-number",
  description: "Find a secret number from 1 to 100 in as few guesses as possible; each guess costs 0.02.",
  data: { kind: "free" },
  systemPrompt: "Guess the secret number from 1 to 100. After each guess you hear higher or lower.",
  maxTurns: MAX_GUESSES,
  stepCost: -0.02,
  invalidAction: { penalty: -0.2, endEpisode: false },
  scoreName: "solved",
  reset({ rng }) {
    const secret = 1 + Math.floor(rng.uniform() * 100);
    return { state: { secret, guesses: [], solved: false }, observation: "1-100" };
  },
  parseAction(text) {
    const trimmed = text.trim();
    const value = Number(trimmed);
    if (!/^\d{1,3}$/.test(trimmed) || value < 1 || value > 100) {
      return { ok: false, error: `expected a whole number from 1 to 100, got ${JSON.stringify(trimmed.slice(0, 20))}` };
    }
    return { ok: true, action: value };
  },
  step(state, guess) {
    const guesses = [...state.guesses, guess];
    if (guess === state.secret) {
      return { state: { ...state, guesses, solved: true }, reward: 1, done: true, metrics: { solved: 1, turns_to_solve: guesses.length } };
    }
    return { state: { ...state, guesses }, observation: guess < state.secret ? "higher" : "lower", reward: 0, done: false };
  },
  render: (state) => `secret ${state.secret} · guesses ${state.guesses.join(", ") || "none"}`,
  score: ({ state }) => (state.solved ? 1 : 0),
});

export default guessNumber;
