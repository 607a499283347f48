import { defineEnvironment } from "tinkerlab";

// Find a hidden whole number from 1 to 31 in at most 6 guesses, told "higher" or "lower" after each.
const MAX = 31;
const GUESSES = 6;
type State = { secret: number; lo: number; hi: number; guesses: number; found: boolean };

const range = (lo: number, hi: number) => (lo === hi ? `It is ${lo}.` : `It is between ${lo} and ${hi}.`);
const left = (n: number) => `${n} guess${n === 1 ? "" : "es"} left.`;

export default defineEnvironment<State, number>({
  name: "number-search",
  description: "Find a hidden number from 1 to 31; each guess is answered higher or lower.",
  data: { kind: "free" },
  systemPrompt: `Guess the hidden number. You have ${GUESSES} guesses.`,
  maxTurns: GUESSES,
  stepCost: -0.02, // a small cost per guess
  reset({ rng }) {
    const secret = 1 + Math.floor(rng.uniform() * MAX);
    return {
      state: { secret, lo: 1, hi: MAX, guesses: 0, found: false },
      observation: `It is between 1 and ${MAX}. ${left(GUESSES)}`,
    };
  },
  // Legal: the numbers still possible.
  actions: (state) => Array.from({ length: state.hi - state.lo + 1 }, (_, i) => String(state.lo + i)),
  parseAction(text, state) {
    const t = text.trim();
    if (!/^\d+$/.test(t)) return { ok: false, error: "expected a number" };
    const n = Number(t);
    if (n < state.lo || n > state.hi) return { ok: false, error: `guess a number from ${state.lo} to ${state.hi}` };
    return { ok: true, action: n };
  },
  step(state, guess) {
    const guesses = state.guesses + 1;
    if (guess === state.secret) {
      return { state: { ...state, guesses, found: true }, reward: 1, done: true, metrics: { guesses } };
    }
    const higher = guess < state.secret;
    const lo = higher ? guess + 1 : state.lo;
    const hi = higher ? state.hi : guess - 1;
    const next: State = { ...state, lo, hi, guesses };
    if (guesses === GUESSES) return { state: next, reward: 0, done: true, metrics: { guesses } };
    return {
      state: next,
      observation: `${higher ? "Higher" : "Lower"} than ${guess}. ${range(lo, hi)} ${left(GUESSES - guesses)}`,
      reward: 0,
      done: false,
    };
  },
  render: (state) => `${state.found ? "found" : `open ${state.lo}..${state.hi}`}, ${state.guesses} guesses (secret ${state.secret})`,
  demonstrate: (state) => String(Math.floor((state.lo + state.hi) / 2)), // binary search
  score: ({ state }) => (state.found && state.guesses <= 5 ? 1 : 0),
  scoreName: "solved",
});
