/**
 * The "blank custom environment": a small environment that works as it stands (it validates and trains on the
 * arithmetic base, whose prompts it shares), written to be edited into the user's own task.
 */
export const STARTER_ENTRY = "environment.ts";

export const starterEnvironment = `import { defineEnvironment } from "tinkerlab";

// The agent sees "a+b=" and answers with the sum. To make it your own, change the problem
// (reset), what counts as an answer (parseAction) and the reward (step). The editor dry-runs
// it in the sandbox as you type.
type State = { a: number; b: number; answer: number | null };

export default defineEnvironment<State, number>({
  name: "my-environment",
  description: "Add two numbers below 50. Reward 1 for the exact sum.",
  data: { kind: "free" },
  systemPrompt: "Add.",
  maxTurns: 1,
  invalidAction: { penalty: 0, endEpisode: true },

  reset({ rng }) {
    const a = Math.floor(rng.uniform() * 50);
    const b = Math.floor(rng.uniform() * 50);
    return { state: { a, b, answer: null }, observation: \`\${a}+\${b}=\` };
  },

  parseAction(text) {
    const answer = text.trim();
    if (!/^\\d{1,4}$/.test(answer)) return { ok: false, error: "expected a number" };
    return { ok: true, action: Number(answer) };
  },

  step(state, answer) {
    const correct = answer === state.a + state.b;
    return { state: { ...state, answer }, reward: correct ? 1 : 0, done: true, metrics: { correct: correct ? 1 : 0 } };
  },

  render: (state) => \`\${state.a} + \${state.b} = \${state.answer ?? "?"}\`,
  score: ({ state }) => (state.answer === state.a + state.b ? 1 : 0),
  scoreName: "accuracy",
});
`;

/** The config of a new custom experiment: the arithmetic base and a short GRPO run. */
export function starterConfig(name: string): Record<string, unknown> {
  return {
    name,
    environment: "custom",
    agent: { base: "arithmetic-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 5 } },
    protocol: { name: "single-turn" },
    algorithm: { name: "grpo", steps: 60, groupSize: 8, groupsPerStep: 16, learningRate: 5e-4 },
    evaluation: { every: 20, episodes: 100 },
  };
}
