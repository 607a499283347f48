/**
 * Use case 2: guess a number from 1 to 100; the environment answers "higher" or "lower". Multi-turn. The answer
 * also names the range still open ("higher 51-100"), as a board shows the whole position: the agent's job is to
 * choose where to guess, not to recount the history, so it plays from the latest observation alone.
 *
 * Rewards: 1 for finding the number, −0.02 a guess, −0.1 more for a guess the answers so far already rule out
 * (outside the open range), and a potential-based progress term, 0.1·log2(open before / open after), that pays
 * each guess for the share of the range it rules out (the finding guess closes the range to its one number).
 * It is the difference of a potential, −0.1·log2(open range), between consecutive states, so it moves credit to
 * the guess that earned it without changing which strategy is best (Ng, Harada & Russell, 1999); bisecting
 * earns the most on average.
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

const MAX_GUESSES = 10;
/** The extra cost of a guess outside the open range. */
const WASTED_GUESS_COST = 0.1;
/** Weight of the progress term: this much per halving of the open range. */
const PROGRESS_PER_HALVING = 0.1;

const width = ([low, high]: [number, number]) => high - low + 1;

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
  parseAction(text) {
    const trimmed = text.trim();
    const value = Number(trimmed);
    // The session follows the error with the latest observation (the open range), all the agent sees next turn.
    if (!/^\d{1,3}$/.test(trimmed) || value < 1 || value > 100) return { ok: false, error: "expected a whole number from 1 to 100" };
    return { ok: true, action: value };
  },
  step(state, guess): StepOutcome<State> {
    const guesses = [...state.guesses, guess];
    const before = openRange(state);
    if (guess === state.secret) {
      const progress = PROGRESS_PER_HALVING * Math.log2(width(before));
      return { state: { ...state, guesses, solved: true }, reward: 1 + progress, done: true, metrics: { solved: 1, turns_to_solve: guesses.length } };
    }
    const wasted = guess < before[0] || guess > before[1];
    const next = { ...state, guesses };
    const after = openRange(next);
    const progress = PROGRESS_PER_HALVING * Math.log2(width(before) / width(after));
    return {
      state: next,
      observation: `${guess < state.secret ? "higher" : "lower"} ${after[0]}-${after[1]}`,
      reward: progress - (wasted ? WASTED_GUESS_COST : 0),
      done: false,
      metrics: { wasted_guesses: wasted ? 1 : 0 },
    };
  },
  render: (state) => `secret ${state.secret} · guesses ${state.guesses.join(", ") || "none"}`,
  score: ({ state }) => (state.solved ? 1 : 0),
});
