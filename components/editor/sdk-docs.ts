/**
 * What the editor tells a user about the SDK they write against (`import { … } from "tinkerlab"`): the fields of
 * `defineEnvironment`, of a `step` outcome and of the seeded `Rng`. The tables are typed against the real SDK
 * types (`satisfies Record<keyof …>`), so a field added to or removed from the SDK fails the type check here, and
 * test/e2e/editor.test.ts checks that each doc starts with the field's JSDoc in lib/sdk.
 */
import type { Rng } from "@/lib/model/rng";
import type { EnvironmentDefinition, StepOutcome } from "@/lib/sdk/environment";

export type SdkDoc = {
  /** The signature or type shown beside the name. */
  detail: string;
  doc: string;
  /** What completing the name inserts (a CodeMirror snippet, `${}` marks a field); the bare name by default. */
  snippet?: string;
  kind: "property" | "method" | "function" | "class" | "type";
};

type EnvironmentField = keyof EnvironmentDefinition<unknown, unknown>;

export const environmentFieldDocs = {
  name: { kind: "property", detail: "string", doc: "The environment's name: 1–64 lowercase letters, digits or '-'.", snippet: 'name: "${name}",' },
  description: { kind: "property", detail: "string?", doc: "A sentence shown in the workbench beside the name." },
  data: {
    kind: "property",
    detail: '{ kind: "free" } | { kind: "dataset"; dataset: string }',
    doc: '"free": the environment makes its own problems from the seed; "dataset": it reads one row per episode.',
    snippet: 'data: { kind: "${free}" },',
  },
  systemPrompt: {
    kind: "property",
    detail: "string | ((sample, agent) => string)",
    doc: "The system message every episode starts with; a function of the dataset row and, with several agents, of the agent (its role).",
    snippet: 'systemPrompt: "${}",',
  },
  maxTurns: {
    kind: "property",
    detail: "number",
    doc: "Turns before the episode is cut off (tool calls and invalid actions count as turns). A cut-off episode is done and marked truncated; its reward functions still run. A whole number from 1 to 1000.",
    snippet: "maxTurns: ${1},",
  },
  invalidAction: {
    kind: "property",
    detail: "{ penalty: number; endEpisode: boolean }?",
    doc: "What an unparseable action costs, and whether the episode goes on after one. Default: penalty -1, the episode ends.",
    snippet: "invalidAction: { penalty: ${-1}, endEpisode: ${true} },",
  },
  stepCost: {
    kind: "property",
    detail: "number?",
    doc: "Added to every step's reward, tool calls and invalid actions included: a number ≤ 0, e.g. -0.01 for a text world.",
    snippet: "stepCost: ${-0.01},",
  },
  difficulty: {
    kind: "property",
    detail: "{ min: number; max: number; start?: number; evaluation?: number }?",
    doc: "Levels of difficulty, whole numbers from `min` to `max` (see Difficulty): the RL trainer keeps drawing episodes at the level where the policy succeeds sometimes but not always, and `reset` receives the level. Training starts at `start` (default min); evaluation plays `evaluation` (default max). The run page charts train/difficulty.",
    snippet: "difficulty: { min: ${1}, max: ${10} },",
  },
  reset: {
    kind: "method",
    detail: "reset({ seed, rng, sample, difficulty }) → { state, observation }",
    doc: "Starts an episode. `difficulty` is the episode's level when the environment declares `difficulty` (training picks it; evaluation and every other episode play `difficulty.evaluation ?? difficulty.max`), else undefined. The same seed (sample and difficulty) must always give the same first state and observation: draw randomness from `rng`, never Math.random.",
    snippet: 'reset({ rng }) {\n\treturn { state: ${}, observation: "" };\n},',
  },
  parseAction: {
    kind: "method",
    detail: "parseAction(text, state, agent) → { ok: true, action } | { ok: false, error }",
    doc: "Turns the text of `agent` (the acting agent) into an action, or says why it cannot. An error costs `invalidAction.penalty`.",
    snippet: "parseAction(text, state) {\n\treturn { ok: true, action: ${text} };\n},",
  },
  step: {
    kind: "method",
    detail: "step(state, action, { rng, agent }) → StepOutcome",
    doc: "Applies the acting agent's action (turn-based protocols: `agent` is who acted). Returns the next state, the reward (or each agent's, in `rewards`), whether the episode is done, and the next observation.",
    snippet: "step(state, action) {\n\treturn { state, reward: ${0}, done: true };\n},",
  },
  toAct: {
    kind: "method",
    detail: "toAct(state) → string",
    doc: "Who acts next under a turn-based protocol: one of the protocol's agents. Left out, the agents act in the protocol's order.",
    snippet: 'toAct(state) {\n\treturn ${"X"};\n},',
  },
  observe: {
    kind: "method",
    detail: "observe(state, agent) → string",
    doc: "What `agent` sees now, under a protocol with several agents (hidden cards, a target only one of them knows). Left out, every agent sees the step's `observation`.",
    snippet: 'observe(state, agent) {\n\treturn ${""};\n},',
  },
  stepTogether: {
    kind: "method",
    detail: "stepTogether(state, actions: Record<agent, Action>, { rng }) → StepOutcome",
    doc: "The simultaneous protocol's step: every agent's action of the round at once (each parsed with `parseAction(text, state, agent)`), applied in one move. Its outcome gives each agent's reward in `rewards`.",
    snippet: "stepTogether(state, actions) {\n\treturn { state, rewards: ${{}}, done: false };\n},",
  },
  render: {
    kind: "method",
    detail: "render(state) → string",
    doc: "The environment's own picture of the state (a board), shown in the trajectory viewer.",
    snippet: "render(state) {\n\treturn ${JSON.stringify(state)};\n},",
  },
  actions: {
    kind: "property",
    detail: "string[] | ((state, agent) → string[]) | { pattern: string }",
    doc: "The legal actions: a list, a function of the state, or a pattern the whole action matches (literals, `.`, classes like `[a-z]` or `[^,]`, `\\d \\w \\s`, groups `( )` and `(?: )`, `|`, `* + ? {n,m}`). Sampling is constrained to them, so the policy cannot write an invalid action as long as agent.sampling.maxTokens covers the longest one (plus its end); tool calls stay allowed. The trajectory viewer shows each turn's legal set.",
    snippet: 'actions: (state) => ${["1", "2", "3"]},',
  },
  demonstrate: {
    kind: "method",
    detail: "demonstrate(state, agent) → string",
    doc: "A demonstrator: the action a good player writes in this state. An SFT run with data 'demonstrator' imitates it, and validation's dry run plays it so that a step() failing on real actions is caught before launch.",
    snippet: 'demonstrate(state) {\n\treturn ${"1"};\n},',
  },
  tools: {
    kind: "property",
    detail: "Record<string, { description; run(args, state) → string }>?",
    doc: "Tools the agent may call with `@name(args)`; the answer comes back as the next observation.",
    snippet: 'tools: {\n\t${name}: { description: "", run: (args, state) => "" },\n},',
  },
  rewardFunctions: {
    kind: "property",
    detail: "Record<string, (summary: EpisodeSummary) → number>?",
    doc: "Extra reward functions, scored once on the finished episode and added to its last step's reward. Each is reported apart (reward/NAME) beside the environment's own step rewards (reward/env).",
    snippet: "rewardFunctions: {\n\t${name}: (summary) => 0,\n},",
  },
  score: {
    kind: "method",
    detail: "score(summary: EpisodeSummary) → number",
    doc: "The headline score of a finished episode for evaluation (e.g. accuracy: 1 if solved). Default: 1 when the return is positive.",
    snippet: "score: (summary) => (summary.totalReward > 0 ? 1 : 0),",
  },
  scoreName: { kind: "property", detail: "string?", doc: 'Name of the score, e.g. "accuracy", "solved", "win_rate".', snippet: 'scoreName: "${accuracy}",' },
} satisfies Record<EnvironmentField, SdkDoc>;

type StepOutcomeField = keyof StepOutcome<unknown>;

export const stepOutcomeDocs = {
  state: { kind: "property", detail: "State", doc: "The state after the action." },
  observation: { kind: "property", detail: "string?", doc: "What the agent sees next; omitted when the episode is done." },
  reward: {
    kind: "property",
    detail: "number?",
    doc: "This step's reward (a finite number), the acting agent's; may be left out when `rewards` is given.",
  },
  rewards: {
    kind: "property",
    detail: "Record<string, number>?",
    doc: "Each agent's reward from this step, under a protocol with several agents: `{ X: 1, O: -1 }` for a zero-sum win, the same number for every agent when they cooperate. The acting agent's own reward is then `rewards[agent] ?? 0`.",
  },
  done: { kind: "property", detail: "boolean", doc: "Whether the episode has ended." },
  info: {
    kind: "property",
    detail: "Record<string, Json>?",
    doc: "JSON shown beside the step in the trajectory viewer. Keys the SDK reads: truncated (true marks the episode cut off), invalid (the step was an invalid action); tool and args are written by the SDK.",
  },
  metrics: {
    kind: "property",
    detail: "Record<string, number>?",
    doc: "Numbers summed over each episode, then averaged over episodes into the run's env/NAME metrics, e.g. {won: 1}.",
  },
} satisfies Record<StepOutcomeField, SdkDoc>;

type RngMethod = keyof Rng;

export const rngMethodDocs = {
  uniform: { kind: "method", detail: "uniform() → number", doc: "Uniform in [0, 1) with 24 bits, the precision of a float32 mantissa.", snippet: "uniform()" },
  normal: { kind: "method", detail: "normal() → number", doc: "Standard normal (Box-Muller).", snippet: "normal()" },
  nextU32: { kind: "method", detail: "nextU32() → number", doc: "The next raw 32-bit unsigned integer.", snippet: "nextU32()" },
  getState: {
    kind: "method",
    detail: "getState() → [number, number, number, number]",
    doc: "The generator's whole state (four 32-bit words), for Rng.fromState.",
    snippet: "getState()",
  },
} satisfies Record<RngMethod, SdkDoc>;

/** The names `tinkerlab` exports to user code (server/sandbox/guest/sdk.ts). */
export const sdkExportDocs: Record<string, SdkDoc> = {
  defineEnvironment: {
    kind: "function",
    detail: "defineEnvironment<State, Action>(definition) → definition",
    doc: "Checks an environment definition once, where it is made, so a mistake names the field instead of failing mid-run. Export the result (default export).",
    snippet: "defineEnvironment<${State}, ${Action}>({\n\t\n})",
  },
  Rng: { kind: "class", detail: "class Rng", doc: "A small seeded random number generator (xoshiro128**); `reset` and `step` receive one as `rng`." },
  EnvironmentSession: { kind: "class", detail: "class EnvironmentSession", doc: "One episode at a time of one environment: the object a protocol drives." },
  singleTurn: { kind: "function", detail: "singleTurn(agent?) → Protocol", doc: "One action per episode." },
  multiTurn: { kind: "function", detail: 'multiTurn(agent?, history?: "full" | "last") → Protocol', doc: "One agent acting until the episode is done." },
  turnBased: {
    kind: "function",
    detail: 'turnBased(agents: string[], history?: "full" | "last") → Protocol',
    doc: "Several agents taking turns on one environment: the environment's `toAct(state)` says who acts next, else they act in this order.",
  },
  simultaneous: {
    kind: "function",
    detail: 'simultaneous(agents: string[], history?: "full" | "last") → Protocol',
    doc: "Several agents acting at once: each round every agent is asked once, then the environment moves once on all their actions (`stepTogether`).",
  },
  EnvironmentDefinition: { kind: "type", detail: "type EnvironmentDefinition<State, Action>", doc: "What defineEnvironment takes." },
  StepOutcome: {
    kind: "type",
    detail: "type StepOutcome<State>",
    doc: "What `step` returns: state, observation, reward (or each agent's, `rewards`), done, info, metrics.",
  },
  ParseResult: { kind: "type", detail: "type ParseResult<Action>", doc: "What `parseAction` returns: { ok: true, action } or { ok: false, error }." },
  EpisodeSummary: {
    kind: "type",
    detail: "type EpisodeSummary<State>",
    doc: "A finished episode: state, turns, totalReward, done, truncated, invalidActions. Given to score and rewardFunctions.",
  },
  Tool: { kind: "type", detail: "type Tool<State>", doc: "A tool the agent may call: { description, run(args, state) → string }." },
};
