/** The built-in use cases: each an environment, the protocol it is played with, and an experiment template. */
import type { EnvironmentDefinition } from "@/lib/sdk/environment";
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";
import type { Protocol } from "@/lib/sdk/protocol";
import { GENERALIST_BASE } from "@/lib/sdk/agent";
import { multiTurn, singleTurn, turnBased } from "@/lib/sdk/protocol";
import { arithmetic } from "./arithmetic";
import { gomoku, gomokuDuel, ticTacToe, ticTacToeDuel, ticTacToeSelfPlay } from "./board-games";
import { guessNumber } from "./guess-number";
import { kuhnPoker, kuhnPokerDuel } from "./kuhn-poker";
import { signalGame, signalListener, signalSpeaker } from "./signal-game";
import { splitPot, splitPotDuel } from "./split-pot";
import { textWorld } from "./text-world";
import { toolUse } from "./tool-use";

export type UseCase = {
  environment: EnvironmentDefinition<any, any, any>;
  protocol: Protocol;
  /** Shown in the workbench's template picker. */
  title: string;
  template: ExperimentConfigInput;
  /**
   * The game for two players without the scripted opponent, for a person to play against the policy (the
   * playground's episode player): `sides` are its agents, the policy's trained side first; a dataset row
   * `{ opens: <side> }` says who moves first.
   */
  duel?: { environment: EnvironmentDefinition<any, any, any>; sides: [string, string] };
};

/** The single-agent use cases, each with a base of its own SFT'd on its demonstrator (lib/envs/bases.ts). */
const singleAgentUseCases: Record<string, UseCase> = {
  arithmetic: {
    environment: arithmetic,
    protocol: singleTurn(),
    title: "Two-digit addition (single turn)",
    template: {
      name: "arithmetic-grpo",
      environment: "arithmetic",
      agent: { base: "arithmetic-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 5 } },
      protocol: { name: "single-turn" },
      algorithm: { name: "grpo", steps: 120, groupSize: 8, groupsPerStep: 32, learningRate: 5e-4, loss: "ppo" },
      evaluation: { every: 20, episodes: 200 },
    },
  },
  "guess-number": {
    environment: guessNumber,
    protocol: multiTurn("agent", "last"),
    title: "Guess the number (multi-turn)",
    template: {
      name: "guess-number-ppo",
      environment: "guess-number",
      agent: { base: "guess-number-base", training: { mode: "full" }, sampling: { temperature: 0.7, maxTokens: 4 } },
      protocol: { name: "multi-turn", history: "last" },
      // PPO's value head learns what an open range is worth, so each guess is credited by how much it narrowed.
      algorithm: { name: "ppo", steps: 500, groupSize: 8, groupsPerStep: 16, learningRate: 2e-4, lrSchedule: "cosine", discount: 0.9 },
      evaluation: { every: 50, episodes: 200 },
    },
  },
  "tic-tac-toe": {
    environment: ticTacToe,
    protocol: multiTurn("agent", "last"),
    title: "Tic-tac-toe against a random opponent",
    duel: { environment: ticTacToeDuel, sides: ["X", "O"] },
    template: {
      name: "tic-tac-toe-ppo",
      environment: "tic-tac-toe",
      agent: { base: "tic-tac-toe-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 3 } },
      protocol: { name: "multi-turn", history: "last" },
      // PPO's value head credits each move by what the next position is worth (GAE λ 0.5): a missed block costs a
      // loss one time in five against this opponent, too little to see through the rest of a game's noise. 48
      // groups a step for the same reason: at 32 the same rate ended at 0.055, at 48 at 0.040 (docs/LEARNING.md).
      algorithm: { name: "ppo", steps: 300, groupSize: 8, groupsPerStep: 48, learningRate: 1e-3, lrSchedule: "cosine", gaeLambda: 0.5 },
      evaluation: { every: 50, episodes: 200 },
    },
  },
  gomoku: {
    environment: gomoku,
    protocol: multiTurn("agent", "last"),
    title: "Gomoku, four in a row on 6×6",
    duel: { environment: gomokuDuel, sides: ["X", "O"] },
    template: {
      name: "gomoku-ppo",
      environment: "gomoku",
      agent: { base: "gomoku-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 3 } },
      protocol: { name: "multi-turn", history: "last" },
      algorithm: { name: "ppo", steps: 150, groupSize: 8, groupsPerStep: 16, learningRate: 1e-3, lrSchedule: "cosine", gaeLambda: 0.5 },
      evaluation: { every: 25, episodes: 200 },
    },
  },
  "tool-use": {
    environment: toolUse,
    protocol: multiTurn(),
    title: "Word problems with a calculator tool",
    template: {
      name: "tool-use-grpo",
      environment: "tool-use",
      agent: { base: "tool-use-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 16 } },
      protocol: { name: "multi-turn" },
      algorithm: { name: "grpo", steps: 60, groupSize: 8, groupsPerStep: 16, learningRate: 5e-4, lrSchedule: "cosine" },
      evaluation: { every: 20, episodes: 200 },
    },
  },
  "text-world": {
    environment: textWorld,
    protocol: multiTurn("agent", "last"),
    title: "Text world: bring an object to a room",
    template: {
      name: "text-world-ppo",
      environment: "text-world",
      agent: { base: "text-world-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 12 } },
      protocol: { name: "multi-turn", history: "last" },
      // PPO's value head learns what a room is worth given where the object and the goal are (per-turn GRPO
      // compares turns of different states by their index, a poor baseline for a walk). Two passes over each batch:
      // sampling 64 walks costs more than a second pass of training on them. GAE's λ at 0.5: the progress term
      // pays each move at once, so a move's credit lies mostly in its own reward, and the later moves' noise
      // weighs less (60 steps: 0.880 against 0.835 at λ 0.95; λ 0, the value head alone, 0.375).
      algorithm: {
        name: "ppo",
        steps: 150,
        groupSize: 8,
        groupsPerStep: 8,
        learningRate: 1e-3,
        lrSchedule: "cosine",
        discount: 0.95,
        gaeLambda: 0.5,
        epochs: 2,
      },
      evaluation: { every: 20, episodes: 200 },
    },
  },
};

/**
 * The multi-agent games, each played by the policy against a scripted opponent or partner (so one learned role can
 * be measured against a fixed one), with the game for two agents as its `duel`: Kuhn poker (zero-sum, hidden
 * cards), the signalling game (cooperative, a shared reward) as speaker or as listener, and split the pot (mixed
 * motives). They ship no base of their own: each template starts from the generalist base and imitates the game's
 * demonstrator for a few SFT steps first.
 */
export const gameUseCases: Record<string, UseCase> = {
  "kuhn-poker": {
    environment: kuhnPoker,
    protocol: multiTurn("agent", "last"),
    title: "Kuhn poker against an equilibrium opponent",
    duel: { environment: kuhnPokerDuel, sides: ["P1", "P2"] },
    template: gameTemplate("kuhn-poker", "multi-turn", 6),
  },
  "signal-speaker": {
    environment: signalSpeaker,
    protocol: singleTurn(),
    title: "Signalling game: speak a fixed code to a scripted listener",
    duel: { environment: signalGame, sides: ["speaker", "listener"] },
    template: gameTemplate("signal-speaker", "single-turn", 2),
  },
  "signal-listener": {
    environment: signalListener,
    protocol: singleTurn(),
    title: "Signalling game: decode a scripted speaker's code",
    duel: { environment: signalGame, sides: ["listener", "speaker"] },
    template: gameTemplate("signal-listener", "single-turn", 6),
  },
  "split-pot": {
    environment: splitPot,
    protocol: multiTurn("agent", "last"),
    title: "Split the pot with a scripted counterpart",
    duel: { environment: splitPotDuel, sides: ["A", "B"] },
    template: gameTemplate("split-pot", "multi-turn", 3),
  },
};

/**
 * Self-play: one policy plays both seats of a game for two under the turn-based protocol, each seat prompted with
 * its own role (the board's mark, the poker seat). With several agents each turn is credited with its own agent's
 * return, so one policy learns both sides of a zero-sum game whose rewards sum to 0. Measured by the first seat's
 * win rate against the policy's own other seat; the episode player sets either seat to the policy or to a person.
 */
const selfPlayUseCases: Record<string, UseCase> = {
  "tic-tac-toe-self-play": {
    environment: ticTacToeSelfPlay,
    protocol: turnBased(["X", "O"], "last"),
    title: "Tic-tac-toe in self-play: one policy plays X and O",
    template: selfPlayTemplate("tic-tac-toe-self-play", ["X", "O"], 3),
  },
  "kuhn-poker-duel": {
    environment: kuhnPokerDuel,
    protocol: turnBased(["P1", "P2"], "last"),
    title: "Kuhn poker in self-play: one policy plays both seats",
    template: selfPlayTemplate("kuhn-poker-duel", ["P1", "P2"], 6),
  },
};

/**
 * Every built-in use case: the workbench's example experiments and templates, the worker's built-in environments,
 * the episode player's games.
 */
export const useCases: Record<string, UseCase> = { ...singleAgentUseCases, ...gameUseCases, ...selfPlayUseCases };

/**
 * A game's template: GRPO from the generalist base, after 100 SFT steps on the game's demonstrator (the base has
 * never seen the game's prompts; its legal actions keep every move valid from the start).
 */
function gameTemplate(environment: string, protocol: "single-turn" | "multi-turn", maxTokens: number): ExperimentConfigInput {
  return {
    name: `${environment}-grpo`,
    environment,
    agent: { base: GENERALIST_BASE, training: { mode: "full" }, sampling: { temperature: 1, maxTokens } },
    protocol: { name: protocol, history: "last" },
    sft: { data: "demonstrator", steps: 100, demonstrations: 2000, learningRate: 1e-3 },
    algorithm: { name: "grpo", steps: 100, groupSize: 8, groupsPerStep: 16, learningRate: 3e-4, lrSchedule: "cosine" },
    evaluation: { every: 20, episodes: 400 },
  };
}

/**
 * A self-play template: the game's template (generalist base, SFT on the demonstrator playing both seats, then
 * GRPO) under the turn-based protocol with `agents`, one policy in every seat.
 */
function selfPlayTemplate(environment: string, agents: [string, string], maxTokens: number): ExperimentConfigInput {
  return { ...gameTemplate(environment, "multi-turn", maxTokens), protocol: { name: "turn-based", agents, history: "last" } };
}
