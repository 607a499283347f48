/**
 * Use case 2: guess a number from 1 to 100; the environment answers "higher" or "lower". Multi-turn. The answer
 * also names the range still open ("higher 51-100"), as a board shows the whole position: the agent's job is to
 * choose where to guess, not to recount the history, so it plays from the latest observation alone. A guess
 * that the answers so far already rule out (outside the open range) is wasted and costs 0.1 more than a guess.
 */
import { defineEnvironment, type StepOutcome } from "@/lib/sdk/environment";

export type GuessState = { secret: number; guesses: number[]; solved: boolean };
type State = GuessState;

/** The range still consistent with the answers so far: [low, high]. */
export function openRange(state: GuessState): [number, number] {
  let low = 1;
  let high = 100;
  for (const guess of state.guesses) {
    if (guess < state.secret) low = Math.max(low, guess + 1);
    else if (guess > state.secret) high = Math.min(high, guess - 1);
  }
  return [low, high];
}

export const MAX_GUESSES = 10;
/** The extra cost of a guess outside the open range. */
export const WASTED_GUESS_COST = 0.1;

export const guessNumber = defineEnvironment<State, number>({
  name: "guess-number",
  description: "Find a secret number from 1 to 100 in as few guesses as possible; each guess costs 0.02.",
  data: { kind: "free" },
  systemPrompt: "Guess.",
  maxTurns: MAX_GUESSES,
  stepCost: -0.02,
  invalidAction: { penalty: -0.2, endEpisode: false },
  scoreName: "solved",
  reset({ rng }) {
    const secret = 1 + Math.floor(rng.uniform() * 100);
    return { state: { secret, guesses: [], solved: false }, observation: "1-100" };
  },
  parseAction(text, state) {
    const trimmed = text.trim();
    const value = Number(trimmed);
    // The session follows the error with the latest observation (the open range), all the agent sees next turn.
    if (!/^\d{1,3}$/.test(trimmed) || value < 1 || value > 100) return { ok: false, error: "expected a whole number from 1 to 100" };
    return { ok: true, action: value };
  },
  step(state, guess): StepOutcome<State> {
    const guesses = [...state.guesses, guess];
    if (guess === state.secret) {
      return { state: { ...state, guesses, solved: true }, reward: 1, done: true, metrics: { solved: 1, turns_to_solve: guesses.length } };
    }
    const [openLow, openHigh] = openRange(state);
    const wasted = guess < openLow || guess > openHigh;
    const next = { ...state, guesses };
    const [low, high] = openRange(next);
    return {
      state: next,
      observation: `${guess < state.secret ? "higher" : "lower"} ${low}-${high}`,
      reward: wasted ? -WASTED_GUESS_COST : 0,
      done: false,
      metrics: { wasted_guesses: wasted ? 1 : 0 },
    };
  },
  render: (state) => `secret ${state.secret} · guesses ${state.guesses.join(", ") || "none"}`,
  score: ({ state }) => (state.solved ? 1 : 0),
});

export default guessNumber;
