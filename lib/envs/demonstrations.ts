/**
 * Scripted demonstrators for the built-in use cases, and the conversations they produce. The base checkpoints
 * are SFT'd on these (bin/make-base-models.ts), and the games' templates imitate theirs before RL, so each
 * demonstrator is deliberately imperfect: it speaks the environment's format exactly but plays badly, leaving RL
 * something to learn.
 */
import { Rng } from "@/lib/model/rng";
import { EnvironmentSession, type DatasetRow, type EnvironmentDefinition } from "@/lib/sdk/environment";
import { runEpisodes, type Trajectory } from "@/lib/sdk/protocol";
import { builderMove, cellName, completesLine, completingCells, ticTacToeSelfPlay, type BoardState } from "./board-games";
import { openRange, type GuessState } from "./guess-number";
import type { UseCase } from "./index";
import { kuhnPoker, kuhnPokerDuel } from "./kuhn-poker";
import { signalListener, signalSpeaker } from "./signal-game";
import { splitPot } from "./split-pot";
import { HOUSE, legalActions, type Direction, type WorldState } from "./text-world";
import type { ToolUseState } from "./tool-use";

/**
 * The demonstrator's next action for `agent` (the one to act), from the true state (it may peek; the policy never
 * does).
 */
export type Demonstrator = (state: any, rng: Rng, sample: DatasetRow | undefined, agent: string) => string;

const pick = <T>(items: readonly T[], rng: Rng): T => items[Math.floor(rng.uniform() * items.length)]!;

/** Right when no carry is needed; when the ones carry over, it forgets the carry four times in five. */
function arithmetic(state: { a: number; b: number }, rng: Rng): string {
  const carries = (state.a % 10) + (state.b % 10) >= 10;
  return String(carries && rng.uniform() < 0.8 ? state.a + state.b - 10 : state.a + state.b);
}

/** Guesses anywhere in the range still open, never bisecting on purpose. */
function guessNumber(state: GuessState, rng: Rng): string {
  const [low, high] = openRange(state);
  return String(low + Math.floor(rng.uniform() * (high - low + 1)));
}

/**
 * Tic-tac-toe by a player who knows the game's openings and plays perfectly (minimax) but sees a line of two only
 * two times in five: when it could win, or must block, it does so with probability 0.4 and otherwise plays its
 * favourite free cell (centre, then corners, then edges) that does neither. Its most likely move misses every win
 * and every block (played always, that loses 0.63 of the games against a random opponent, where perfect play loses
 * none; the demonstrator itself loses 0.25), while the right move is two fifths of what it samples. A
 * deterministic player underneath matters: SFT'd on a player that moved at random elsewhere, the same model never
 * learned to read the board's lines at all (docs/LEARNING.md).
 */
function ticTacToe(state: BoardState, rng: Rng): string {
  return seesLinesTwoInFive(state, rng, (lines) =>
    lines.size > 0 ? (FAVOURITE_CELLS.find((i) => state.cells[i] === "." && !lines.has(i)) ?? null) : perfectMove(state),
  );
}

/**
 * The board games' blind spot: where X could complete a line (win) it does so with probability 0.4, else where O
 * could (block) with probability 0.4; otherwise it plays `elsewhere(lines)`, a move outside those cells (the first
 * win or block when there is none).
 */
function seesLinesTwoInFive(state: BoardState, rng: Rng, elsewhere: (lines: ReadonlySet<number>) => number | null): string {
  const wins = completingCells(state, "X");
  const blocks = completingCells(state, "O");
  if (wins.length > 0 && rng.uniform() < 0.4) return cellName(wins[0]!, state.size);
  if (blocks.length > 0 && rng.uniform() < 0.4) return cellName(blocks[0]!, state.size);
  return cellName(elsewhere(new Set([...wins, ...blocks])) ?? wins[0] ?? blocks[0]!, state.size);
}

const FAVOURITE_CELLS = [4, 0, 2, 6, 8, 1, 3, 5, 7];

/** X's best move on a 3×3 board by minimax, sooner wins and later losses preferred; the first such cell wins ties. */
export function perfectMove(state: BoardState): number {
  if (state.size !== 3 || state.line !== 3) throw new Error("perfectMove plays 3x3 tic-tac-toe only");
  const cells = state.cells.slice();
  let best = -1;
  let bestValue = -Infinity;
  for (let i = 0; i < 9; i++) {
    if (cells[i] !== ".") continue;
    const value = moveValue(cells, i, "X");
    if (value > bestValue) [best, bestValue] = [i, value];
  }
  return best;
}

/**
 * The value for X of `mark` playing the free cell `index` (placed and taken back): 10 for a win by X (−10 by O),
 * 0 for a draw, else what the rest of the game is worth with perfect play.
 */
function moveValue(cells: BoardState["cells"], index: number, mark: "X" | "O"): number {
  if (completesLine(cells, 3, 3, index, mark)) return mark === "X" ? 10 : -10;
  cells[index] = mark;
  const value = cells.includes(".") ? minimax(cells, mark === "X" ? "O" : "X") : 0;
  cells[index] = ".";
  return value;
}

const minimaxValues = new Map<string, number>();

/** The value for X of an unfinished board with `toMove` to play: a win one move later is worth one less. */
function minimax(cells: BoardState["cells"], toMove: "X" | "O"): number {
  const key = cells.join("") + toMove;
  const known = minimaxValues.get(key);
  if (known !== undefined) return known;
  let value = toMove === "X" ? -Infinity : Infinity;
  for (let i = 0; i < 9; i++) {
    if (cells[i] !== ".") continue;
    const child = moveValue(cells, i, toMove);
    const later = child > 0 ? child - 1 : child < 0 ? child + 1 : 0;
    value = toMove === "X" ? Math.max(value, later) : Math.min(value, later);
  }
  minimaxValues.set(key, value);
  return value;
}

/**
 * Gomoku (four in a row on 6×6, against an opponent that wins or blocks when it can) by a builder: it extends its
 * own lines (`builderMove`) and sees a line of three only two times in five, as the tic-tac-toe demonstrator sees
 * a line of two: where it could win, or must block, it does so with probability 0.4 and otherwise plays its
 * builder move that does neither. A deterministic player underneath, so the model can learn to read the board;
 * the blind spot is what RL has to fix.
 */
function gomoku(state: BoardState, rng: Rng): string {
  return seesLinesTwoInFive(state, rng, (lines) => builderMove(state, lines));
}

/**
 * The right call format and the right numbers, but half the time a wrong operator, drawn afresh each time from
 * the other three; then the tool's answer copied back. The slips have no favourite: an earlier demonstrator had
 * one fixed confusion per operator (+ for *, * for +), and RL, teaching the products to use *, taught the sums the
 * same slip until no sample of theirs was right. Nor may the slips drown the right operator: with a wrong one
 * three times in four, the base hardly learned which problem wants which operator, and RL again pulled the sums
 * and the quotients to the majority's *. (Swapping or shortening the operands left the base unable to copy them.)
 */
const OPERATORS = ["+", "-", "*", "/"] as const;
function toolUse(state: ToolUseState, rng: Rng, sample: DatasetRow | undefined): string {
  if (state.calls === 0) {
    const expression = String(sample?.expression ?? "");
    const operator = /[-+*/]/.exec(expression)?.[0] ?? "+";
    if (rng.uniform() >= 0.5) return `@calc(${expression})`;
    return `@calc(${expression.replace(
      operator,
      pick(
        OPERATORS.filter((o) => o !== operator),
        rng,
      ),
    )})`;
  }
  return state.lastResult ?? "0";
}

/**
 * Knows the house but confuses east and west: it walks the shortest way to the object and then to the goal, except
 * that when that way is east or west it goes the other way three times in five, where a door leads there; it
 * picks the object up when it finds it and drops it in the goal room four times in five. So the base's most likely
 * move on a horizontal leg is the wrong one and greedy play shuttles between two rooms (a systematic slip, like
 * the arithmetic demonstrator's forgotten carry), while the right move is well within what it samples. One move
 * in ten is invalid (a wall, or the object where it is not), so the base sees the error that repeats the state and
 * a move from there: with "last" history that error is all the policy sees on its next turn.
 */
function textWorld(state: WorldState, rng: Rng): string {
  if (rng.uniform() < 0.1) return pick(invalidActions(state), rng);
  const obvious = state.objectAt === state.at ? `take ${state.object}` : state.objectAt === "hand" && state.at === state.goal ? `drop ${state.object}` : null;
  if (obvious) return rng.uniform() < 0.8 ? obvious : pick(legalActions(state), rng);
  const direction = firstStep(state.at, state.objectAt === "hand" ? state.goal : state.objectAt);
  const mirrored = MIRROR[direction];
  if (mirrored && HOUSE[state.at]![mirrored] && rng.uniform() < 0.6) return `go ${mirrored}`;
  return `go ${direction}`;
}

const MIRROR: Partial<Record<Direction, Direction>> = { east: "west", west: "east" };

/** The first move of a shortest walk between two rooms (breadth-first; the first door in the house's order wins ties). */
function firstStep(from: string, to: string): Direction {
  const via = new Map<string, Direction>();
  const queue = [from];
  for (let room = queue.shift(); room !== undefined; room = queue.shift()) {
    for (const [direction, next] of Object.entries(HOUSE[room]!) as [Direction, string][]) {
      if (next === from || via.has(next)) continue;
      via.set(next, via.get(room) ?? direction);
      if (next === to) return via.get(next)!;
      queue.push(next);
    }
  }
  throw new Error(`no way from ${from} to ${to}`);
}

/** Actions a careless player tries that the state does not allow: every one is a well-formed command. */
function invalidActions(state: WorldState): string[] {
  const walls = (["north", "south", "east", "west"] as const).filter((direction) => !HOUSE[state.at]![direction]).map((direction) => `go ${direction}`);
  const misplaced = [state.objectAt === state.at ? null : `take ${state.object}`, state.objectAt === "hand" ? null : `drop ${state.object}`];
  return [...walls, ...misplaced.filter((action): action is string => action !== null)];
}

/** A game's own demonstrator: its environment's `demonstrate(state, agent)`, whose slips the state already holds. */
const ownDemonstrator =
  (environment: EnvironmentDefinition<any, any, any>): Demonstrator =>
  (state, _rng, _sample, agent) =>
    environment.demonstrate!(state, agent);

export const demonstrators: Record<string, Demonstrator> = {
  arithmetic,
  "guess-number": guessNumber,
  "tic-tac-toe": ticTacToe,
  gomoku,
  "tool-use": toolUse,
  "text-world": textWorld,
  "kuhn-poker": ownDemonstrator(kuhnPoker),
  "signal-speaker": ownDemonstrator(signalSpeaker),
  "signal-listener": ownDemonstrator(signalListener),
  "split-pot": ownDemonstrator(splitPot),
  "tic-tac-toe-self-play": ownDemonstrator(ticTacToeSelfPlay),
  "kuhn-poker-duel": ownDemonstrator(kuhnPokerDuel),
};

/** Episodes played by the demonstrator through the use case's own protocol, so the format is the policy's. */
export async function demonstrate(useCase: UseCase, demonstrator: Demonstrator, episodes: number, seed: number, rows?: DatasetRow[]): Promise<Trajectory[]> {
  const rng = new Rng(seed);
  const starts = Array.from({ length: episodes }, () => ({
    session: new EnvironmentSession(useCase.environment),
    seed: rng.nextU32() % 1_000_000, // below the held-out evaluation seeds
    sample: rows ? pick(rows, rng) : undefined,
  }));
  return runEpisodes(useCase.protocol, starts, async (requests) =>
    requests.map(({ episode, agent }) => {
      const { session, sample } = starts[episode]!;
      return { text: demonstrator(session.summary().state, rng, sample, agent) };
    }),
  );
}

export { toConversations } from "@/lib/rl/sft";
