/** Use case 1: two-digit addition. Single turn, data-free, verifiable reward. */
import { defineEnvironment } from "@/lib/sdk/environment";

type State = { a: number; b: number; answer: number | null };

export const arithmetic = defineEnvironment<State, number>({
  name: "arithmetic",
  description: "Add two two-digit numbers. Reward 1 for the exact sum, 0 otherwise.",
  data: { kind: "free" },
  systemPrompt: "Add.",
  maxTurns: 1,
  invalidAction: { penalty: 0, endEpisode: true },
  scoreName: "accuracy",
  reset({ rng }) {
    const a = 10 + Math.floor(rng.uniform() * 90);
    const b = 10 + Math.floor(rng.uniform() * 90);
    return { state: { a, b, answer: null }, observation: `${a}+${b}=` };
  },
  parseAction(text) {
    const trimmed = text.trim();
    if (!/^\d{1,4}$/.test(trimmed)) return { ok: false, error: `expected a number, got ${JSON.stringify(trimmed.slice(0, 20))}` };
    return { ok: true, action: Number(trimmed) };
  },
  step(state, answer) {
    const correct = answer === state.a + state.b;
    return { state: { ...state, answer }, reward: correct ? 1 : 0, done: true, metrics: { correct: correct ? 1 : 0 } };
  },
  score: ({ state }) => (state.answer === state.a + state.b ? 1 : 0),
});
