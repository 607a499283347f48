/**
 * "Write your own environment": one starting point per kind of environment, each a small environment that works
 * as it stands (it validates, trains from the generalist base, and declares its legal actions and a demonstrator),
 * written to be edited into the user's own task. docs/ENVIRONMENTS.md is the reference.
 */
import { GENERALIST_BASE } from "@/lib/sdk/agent";
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";

export const STARTER_ENTRY = "environment.ts";

export type StarterKind = "single-turn" | "multi-turn" | "tool-use" | "dataset";

export type Starter = { kind: StarterKind; title: string; source: string; config(name: string): ExperimentConfigInput };

const singleTurn = `import { defineEnvironment } from "tinkerlab";

// One question, one answer: the agent sees two numbers and names the larger. To make it your own,
// change the problem (reset), the legal answers (actions), what counts as right (step) and what a
// good answer is (demonstrate, which SFT imitates and validation plays).
type State = { a: number; b: number; answer: number | null };

export default defineEnvironment<State, number>({
  name: "larger-number",
  description: "Name the larger of two numbers. Reward 1 when right.",
  data: { kind: "free" },
  systemPrompt: "Which is larger?",
  maxTurns: 1,
  invalidAction: { penalty: 0, endEpisode: true },
  // A curriculum: training starts at level 1 and moves up as the agent masters a level (train/difficulty).
  difficulty: { min: 1, max: 3 },

  reset({ rng, difficulty = 3 }) {
    const top = [10, 30, 100][difficulty - 1]!; // numbers below 10, 30, then 100; held-out episodes play level 3
    const a = Math.floor(rng.uniform() * top);
    let b = Math.floor(rng.uniform() * (top - 1));
    if (b >= a) b += 1;
    return { state: { a, b, answer: null }, observation: \`\${a} or \${b}\` };
  },

  // Sampling is held to these: the policy can only write one of the two numbers.
  actions: (state) => [String(state.a), String(state.b)],

  parseAction(text) {
    const answer = Number(text.trim());
    return Number.isInteger(answer) ? { ok: true, action: answer } : { ok: false, error: "expected a number" };
  },

  step(state, answer) {
    const correct = answer === Math.max(state.a, state.b);
    return { state: { ...state, answer }, reward: correct ? 1 : 0, done: true, metrics: { correct: correct ? 1 : 0 } };
  },

  demonstrate: (state) => String(Math.max(state.a, state.b)),
  score: ({ state }) => (state.answer === Math.max(state.a, state.b) ? 1 : 0),
  scoreName: "accuracy",
});
`;

const multiTurn = `import { defineEnvironment } from "tinkerlab";

// A game of several turns: rock-paper-scissors against an opponent who plays the move that would
// have beaten the agent's last one. The observation shows the last round, so an agent that reads it
// can win every round after the first. Reward 1 per round won, -1 per round lost.
type Move = "rock" | "paper" | "scissors";
type State = { round: number; last: Move | null; wins: number; losses: number };

const MOVES: Move[] = ["rock", "paper", "scissors"];
const beats: Record<Move, Move> = { rock: "paper", paper: "scissors", scissors: "rock" };
const ROUNDS = 5;

export default defineEnvironment<State, Move>({
  name: "rock-paper-scissors",
  description: "Five rounds against an opponent who counters your last move.",
  data: { kind: "free" },
  systemPrompt: "Play rock, paper or scissors.",
  maxTurns: ROUNDS,

  reset({ rng }) {
    const last = MOVES[Math.floor(rng.uniform() * 3)]!;
    return { state: { round: 0, last, wins: 0, losses: 0 }, observation: \`round 1 of \${ROUNDS}. your last move: \${last}\` };
  },

  actions: MOVES,

  parseAction(text) {
    const move = text.trim() as Move;
    return MOVES.includes(move) ? { ok: true, action: move } : { ok: false, error: "play rock, paper or scissors" };
  },

  step(state, move) {
    const opponent = state.last ? beats[state.last] : "rock";
    const won = beats[opponent] === move;
    const lost = beats[move] === opponent;
    const next = { round: state.round + 1, last: move, wins: state.wins + (won ? 1 : 0), losses: state.losses + (lost ? 1 : 0) };
    const done = next.round === ROUNDS;
    return {
      state: next,
      reward: won ? 1 : lost ? -1 : 0,
      done,
      observation: done ? undefined : \`round \${next.round + 1} of \${ROUNDS}. opponent played \${opponent}. your last move: \${move}\`,
      metrics: { won: won ? 1 : 0 },
    };
  },

  // The opponent will play what beats our last move; play what beats that.
  demonstrate: (state) => beats[beats[state.last ?? "scissors"]],
  score: ({ state }) => state.wins / ROUNDS,
  scoreName: "win_rate",
});
`;

const toolUse = `import { defineEnvironment } from "tinkerlab";

// Tool use: the agent may call @calc(expression) as many times as it likes (each answer comes back
// as the next observation), then answers with a number. Reward 1 for the right number.
type State = { km: number; answered: boolean };

export default defineEnvironment<State, number>({
  name: "unit-conversion",
  description: "Convert kilometres to metres, with a calculator.",
  data: { kind: "free" },
  systemPrompt: "Convert to metres. You may use @calc(a*b).",
  maxTurns: 3,
  invalidAction: { penalty: 0, endEpisode: true },

  reset({ rng }) {
    const km = 1 + Math.floor(rng.uniform() * 90);
    return { state: { km, answered: false }, observation: \`\${km} km\` };
  },

  // A number, or a call of the tool (tool calls stay legal beside the declared actions).
  actions: { pattern: "\\\\d{1,7}" },

  tools: {
    calc: {
      description: "multiplies two whole numbers: @calc(12*1000)",
      run(args) {
        const match = /^(\\d+)\\*(\\d+)$/.exec(args.trim());
        if (!match) throw new Error("write @calc(a*b)");
        return String(Number(match[1]) * Number(match[2]));
      },
    },
  },

  parseAction(text) {
    const value = Number(text.trim());
    return Number.isInteger(value) ? { ok: true, action: value } : { ok: false, error: "answer with a number" };
  },

  step(state, metres) {
    const correct = metres === state.km * 1000;
    return { state: { ...state, answered: true }, reward: correct ? 1 : 0, done: true, metrics: { correct: correct ? 1 : 0 } };
  },

  demonstrate: (state) => String(state.km * 1000),
  scoreName: "accuracy",
});
`;

const dataset = `import { defineEnvironment } from "tinkerlab";

// A dataset environment: each episode reads one row. This one reads the built-in word-problems
// dataset ({ question, answer, … }); upload your own JSONL or CSV on the Datasets page and name it
// in data.dataset. Rows marked "split": "test" (or a held-out fifth) are what evaluation plays.
type Row = { question: string; answer: number };
type State = { row: Row; given: number | null };

export default defineEnvironment<State, number, Row>({
  name: "word-problem-quiz",
  description: "Answer a word problem from a dataset with a number.",
  data: { kind: "dataset", dataset: "word-problems" },
  systemPrompt: "Answer with a number.",
  maxTurns: 1,
  invalidAction: { penalty: 0, endEpisode: true },

  reset({ sample }) {
    const row = sample!;
    return { state: { row, given: null }, observation: row.question };
  },

  actions: { pattern: "\\\\d{1,6}" },

  parseAction(text) {
    const value = Number(text.trim());
    return Number.isFinite(value) ? { ok: true, action: value } : { ok: false, error: "expected a number" };
  },

  step(state, given) {
    const correct = given === state.row.answer;
    return { state: { ...state, given }, reward: correct ? 1 : 0, done: true };
  },

  demonstrate: (state) => String(state.row.answer),
  score: ({ state }) => (state.given === state.row.answer ? 1 : 0),
  scoreName: "accuracy",
});
`;

/** The base every starter trains from: generic skills, a context long enough for real prompts (256 tokens). */
export const STARTER_BASE = GENERALIST_BASE;

const config =
  (protocol: ExperimentConfigInput["protocol"], maxTokens: number, algorithm: ExperimentConfigInput["algorithm"]) =>
  (name: string): ExperimentConfigInput => ({
    name,
    environment: "custom",
    agent: { base: STARTER_BASE, training: { mode: "full" }, sampling: { temperature: 1, maxTokens } },
    protocol,
    // RL starts from the policy that imitated demonstrate(state) for 40 steps, and the KL penalty keeps it near that
    // policy unless the reward says otherwise. Groups whose episodes all earned the same reward are replaced by
    // fresh prompts for up to 3 more rounds a step (dynamic sampling): RL alone then finds the rare right answer.
    // While no group differs (an imitated blind spot), the sampling temperature rises towards 2. Without a
    // demonstrator, set sft.steps and klCoef to 0 and entropyCoef to 0.01: explore rather than stay near the base
    // (docs/LEARNING.md: newcomer).
    algorithm: { groupSize: 8, groupsPerStep: 16, learningRate: 3e-4, klCoef: 0.1, resampleRounds: 3, exploreTemperature: 2, ...algorithm },
    sft: { steps: 40, data: "demonstrator", demonstrations: 400 },
    evaluation: { every: 20, episodes: 100 },
  });

export const starters: Record<StarterKind, Starter> = {
  "single-turn": {
    kind: "single-turn",
    title: "Single turn: one question, one answer",
    source: singleTurn,
    config: config({ name: "single-turn" }, 8, { name: "grpo", steps: 60 }),
  },
  "multi-turn": {
    kind: "multi-turn",
    title: "Multi-turn game: several moves, a reward each round",
    source: multiTurn,
    // "scissors" is 8 bytes: the reply needs room for the longest move and its end
    config: config({ name: "multi-turn", history: "last" }, 9, { name: "grpo-per-turn", steps: 40, discount: 0.9 }),
  },
  "tool-use": {
    kind: "tool-use",
    title: "Tool use: call a tool, then answer",
    source: toolUse,
    config: config({ name: "multi-turn" }, 16, { name: "grpo", steps: 60 }),
  },
  dataset: { kind: "dataset", title: "Dataset: one row per episode", source: dataset, config: config({ name: "single-turn" }, 8, { name: "grpo", steps: 60 }) },
};

/** The single-turn starter: what "Write a custom environment" opens with. */
export const starterEnvironment = starters["single-turn"].source;
export const starterConfig = starters["single-turn"].config;
