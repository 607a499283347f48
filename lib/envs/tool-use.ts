/**
 * Use case 4: word problems that need a calculator. Data-dependent: one row of the shipped dataset
 * (lib/envs/data/word-problems.jsonl, made by bin/make-datasets.ts) per episode. The agent calls
 * `@calc(expression)`, reads the result, then answers with the number.
 */
import { defineEnvironment } from "@/lib/sdk/environment";

type Sample = { question: string; answer: number; split: string };
export type ToolUseState = { question: string; expected: number; answer: number | null; calls: number; lastResult: string | null };

/** + - * / on integers with parentheses: the calculator the agent may call. */
export function calculate(expression: string): number {
  const tokens = expression.match(/\d+|[-+*/()]|\S/g) ?? [];
  let pos = 0;
  const peek = () => tokens[pos];
  const expr = (): number => {
    let value = term();
    while (peek() === "+" || peek() === "-") value = tokens[pos++] === "+" ? value + term() : value - term();
    return value;
  };
  const term = (): number => {
    let value = factor();
    while (peek() === "*" || peek() === "/") {
      const op = tokens[pos++];
      const right = factor();
      if (op === "/" && right === 0) throw new Error("division by zero");
      value = op === "*" ? value * right : value / right;
    }
    return value;
  };
  const factor = (): number => {
    const token = tokens[pos++];
    if (token === "(") {
      const value = expr();
      if (tokens[pos++] !== ")") throw new Error("missing )");
      return value;
    }
    if (token === "-") return -factor();
    if (token !== undefined && /^\d+$/.test(token)) return Number(token);
    throw new Error(token === undefined ? "incomplete expression" : `unexpected '${token}'`);
  };
  if (tokens.length === 0 || tokens.length > 64) throw new Error("expression must have 1 to 64 symbols");
  const value = expr();
  if (pos !== tokens.length) throw new Error(`unexpected '${tokens[pos]}'`);
  return Math.round(value * 1e6) / 1e6;
}

export const toolUse = defineEnvironment<ToolUseState, number, Sample>({
  name: "tool-use",
  description: "Word problems solved with a calculator tool: call @calc(…) and answer with the number.",
  data: { kind: "dataset", dataset: "word-problems" },
  systemPrompt: "Use @calc(...), then answer.",
  maxTurns: 4,
  invalidAction: { penalty: 0, endEpisode: true },
  scoreName: "accuracy",
  tools: {
    calc: {
      description: "evaluates + - * / with parentheses",
      run: (args, state) => {
        state.calls += 1;
        state.lastResult = String(calculate(args));
        return state.lastResult;
      },
    },
  },
  reset({ sample }) {
    if (!sample) throw new Error("tool-use reads one dataset row per episode; none was given");
    return { state: { question: sample.question, expected: Number(sample.answer), answer: null, calls: 0, lastResult: null }, observation: sample.question };
  },
  parseAction(text) {
    const trimmed = text.trim();
    if (!/^-?\d+(\.\d+)?$/.test(trimmed)) return { ok: false, error: `expected @calc(…) or a number, got ${JSON.stringify(trimmed.slice(0, 30))}` };
    return { ok: true, action: Number(trimmed) };
  },
  step(state, answer) {
    const correct = answer === state.expected;
    return { state: { ...state, answer }, reward: correct ? 1 : 0, done: true, metrics: { correct: correct ? 1 : 0, used_tool: state.calls > 0 ? 1 : 0 } };
  },
  score: ({ state }) => (state.answer === state.expected ? 1 : 0),
});
