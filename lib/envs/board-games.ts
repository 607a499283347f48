/**
 * Use case 3: board games against a scripted opponent. Tic-tac-toe on 3×3 (three in a row) and gomoku on 6×6
 * (four in a row). The agent plays X and moves first; the opponent plays O, winning or blocking when it can and
 * otherwise moving at random ("random" opponent: always at random). An occupied or unknown cell is an invalid
 * move: it costs a penalty and ends the game.
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment, type EnvironmentDefinition } from "@/lib/sdk/environment";

type Cell = "." | "X" | "O";
export type BoardState = { size: number; line: number; cells: Cell[]; winner: "X" | "O" | "draw" | null; moves: number };
type OpponentKind = "random" | "greedy";

const COLUMNS = "abcdefgh";

export function cellName(index: number, size: number): string {
  return `${COLUMNS[index % size]}${Math.floor(index / size) + 1}`;
}

/** Each cell's name by board size, built once: rendering is on every step's path, in the sandbox too. */
const cellNamesBySize = new Map<number, string[]>();

function cellNames(size: number): string[] {
  let names = cellNamesBySize.get(size);
  if (!names) cellNamesBySize.set(size, (names = Array.from({ length: size * size }, (_, i) => cellName(i, size))));
  return names;
}

/**
 * The last board drawn, by state: a step's observation and its render are the same board, drawn once (states are
 * never changed in place). One entry, not a WeakMap: V8's weak maps cost more than the drawing they would save.
 */
let lastDrawn: { state: BoardState; text: string } | null = null;

/**
 * Boards drawn before, by their cells joined (one native call, cheap in the sandbox's interpreter where drawing is
 * not): openings and early positions repeat across episodes. Cleared when full.
 */
const drawnBoards = new Map<string, string>();
const maxDrawnBoards = 4_096;

/**
 * The board, one row a line; a free cell shows its own name and a taken one its mark (`a1 X c1`), so the moves
 * on offer are written out on the board itself.
 */
function renderBoard(state: BoardState): string {
  if (lastDrawn?.state !== state) {
    const key = state.cells.join("");
    let text = drawnBoards.get(key);
    if (text === undefined) {
      if (drawnBoards.size >= maxDrawnBoards) drawnBoards.clear();
      drawnBoards.set(key, (text = drawBoard(state)));
    }
    lastDrawn = { state, text };
  }
  return lastDrawn.text;
}

function drawBoard(state: BoardState): string {
  const { size, cells } = state;
  const names = cellNames(size);
  let text = "";
  for (let i = 0; i < size * size; i++) {
    const cell = cells[i]!;
    if (i > 0) text += i % size === 0 ? "\n" : " ";
    text += cell === "." ? names[i]! : cell;
  }
  return text;
}

/** The four line directions as (row, column) steps. */
const DIRECTIONS = [0, 1, 1, 0, 1, 1, 1, -1];

/** Whether the move at `index` completed a line. */
function wins(state: BoardState, index: number): boolean {
  return completesLine(state.cells, state.size, state.line, index, state.cells[index]!);
}

/**
 * Whether `mark` at `index` makes `line` in a row (the cell itself is not read, so a free cell can be tried
 * without placing anything). Plain loops, no arrays per call: the greedy opponent runs this for every free
 * cell, and the sandbox's interpreter pays for each allocation.
 */
export function completesLine(cells: Cell[], size: number, line: number, index: number, mark: Cell): boolean {
  const r0 = Math.floor(index / size);
  const c0 = index % size;
  for (let d = 0; d < DIRECTIONS.length; d += 2) {
    const dr = DIRECTIONS[d]!;
    const dc = DIRECTIONS[d + 1]!;
    let count = 1;
    for (let r = r0 + dr, c = c0 + dc; r >= 0 && r < size && c >= 0 && c < size && cells[r * size + c] === mark; r += dr, c += dc) count++;
    for (let r = r0 - dr, c = c0 - dc; r >= 0 && r < size && c >= 0 && c < size && cells[r * size + c] === mark; r -= dr, c -= dc) count++;
    if (count >= line) return true;
  }
  return false;
}

/** The free cells where `mark` would complete a line: its wins, or the other side's blocks. */
export function completingCells(state: BoardState, mark: "X" | "O"): number[] {
  const out: number[] = [];
  for (let i = 0; i < state.cells.length; i++) if (state.cells[i] === "." && completesLine(state.cells, state.size, state.line, i, mark)) out.push(i);
  return out;
}

/**
 * The free cell, outside `avoid`, that most extends `mark`'s open lines: the sum over every window of `line` cells
 * through it (in the four directions) that holds none of the other mark of (`mark`'s stones in the window + 1)²,
 * ties to the cell nearest the centre, then the first. On an empty 3×3 board that is the centre, then the corners,
 * then the edges. Null when every free cell is in `avoid`.
 */
export function builderMove(state: BoardState, avoid: ReadonlySet<number> = new Set(), mark: "X" | "O" = "X"): number | null {
  const { size, line, cells } = state;
  const other = mark === "X" ? "O" : "X";
  const centre = (size - 1) / 2;
  let best: number | null = null;
  let bestScore = -Infinity;
  for (let i = 0; i < cells.length; i++) {
    if (cells[i] !== "." || avoid.has(i)) continue;
    const row = Math.floor(i / size);
    const col = i % size;
    let score = 0;
    for (let d = 0; d < DIRECTIONS.length; d += 2) {
      const dr = DIRECTIONS[d]!;
      const dc = DIRECTIONS[d + 1]!;
      // Windows through (row, col): starting `back` cells behind it along the direction.
      for (let back = 0; back < line; back++) {
        const r0 = row - back * dr;
        const c0 = col - back * dc;
        let stones = 0;
        let open = true;
        for (let k = 0; k < line && open; k++) {
          const r = r0 + k * dr;
          const c = c0 + k * dc;
          if (r < 0 || r >= size || c < 0 || c >= size) open = false;
          else if (cells[r * size + c] === other) open = false;
          else if (cells[r * size + c] === mark) stones++;
        }
        if (open) score += (stones + 1) ** 2;
      }
    }
    score -= 0.01 * (Math.abs(row - centre) + Math.abs(col - centre));
    if (score > bestScore) [best, bestScore] = [i, score];
  }
  return best;
}

/** The free cells' names, in board order: the moves on offer. */
export function freeCells(state: BoardState): string[] {
  const names = cellNames(state.size);
  const out: string[] = [];
  for (let i = 0; i < state.cells.length; i++) if (state.cells[i] === ".") out.push(names[i]!);
  return out;
}

function place<S extends BoardState>(state: S, index: number, mark: "X" | "O"): S {
  const cells = state.cells.slice();
  cells[index] = mark;
  const next: S = { ...state, cells, moves: state.moves + 1 };
  if (wins(next, index)) next.winner = mark;
  else if (!cells.includes(".")) next.winner = "draw";
  return next;
}

/** The scripted opponent's move: win if it can, block if it must ("greedy"), else a random empty cell. */
function opponentMove(state: BoardState, rng: Rng, kind: OpponentKind): number {
  const { cells, size, line } = state;
  // An empty board (half of all openings): every cell is free and nothing can be won or blocked.
  if (cells.indexOf("X") === -1 && cells.indexOf("O") === -1) return Math.floor(rng.uniform() * cells.length);
  const empty: number[] = [];
  let stonesO = 0;
  let stonesX = 0;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells[i];
    if (cell === ".") empty.push(i);
    else if (cell === "O") stonesO++;
    else stonesX++;
  }
  if (kind === "greedy") {
    // Win if possible, else block. A move can complete a line only once `line - 1` stones of that mark are down,
    // so early in a game nothing is tried.
    if (stonesO >= line - 1) for (let k = 0; k < empty.length; k++) if (completesLine(cells, size, line, empty[k]!, "O")) return empty[k]!;
    if (stonesX >= line - 1) for (let k = 0; k < empty.length; k++) if (completesLine(cells, size, line, empty[k]!, "X")) return empty[k]!;
  }
  return empty[Math.floor(rng.uniform() * empty.length)]!;
}

/** A move's text as the index of a free cell, or why it is not one. */
function parseCell(text: string, state: BoardState): { ok: true; action: number } | { ok: false; error: string } {
  const { size, cells } = state;
  const match = /^\s*([a-h])([1-8])\s*$/i.exec(text);
  if (!match) return { ok: false, error: `expected a cell like b2, got ${JSON.stringify(text.trim().slice(0, 20))}` };
  const col = COLUMNS.indexOf(match[1]!.toLowerCase());
  const row = Number(match[2]) - 1;
  if (col >= size || row >= size) return { ok: false, error: `${text.trim()} is off the ${size}x${size} board` };
  const index = row * size + col;
  if (cells[index] !== ".") return { ok: false, error: `${text.trim()} is taken` };
  return { ok: true, action: index };
}

function boardGame(options: {
  name: string;
  size: number;
  line: number;
  opponent: OpponentKind;
  description: string;
}): EnvironmentDefinition<BoardState, number> {
  const { size, line } = options;
  return defineEnvironment<BoardState, number>({
    name: options.name,
    description: options.description,
    data: { kind: "free" },
    systemPrompt: `X to play, ${line} in a row.`,
    maxTurns: Math.ceil((size * size) / 2),
    invalidAction: { penalty: -1, endEpisode: true },
    scoreName: "win_rate",
    reset({ rng }) {
      let state: BoardState = { size, line, cells: Array<Cell>(size * size).fill("."), winner: null, moves: 0 };
      // Half of the games the opponent opens, so the agent learns both positions.
      if (rng.uniform() < 0.5) state = place(state, opponentMove(state, rng, options.opponent), "O");
      return { state, observation: renderBoard(state) };
    },
    parseAction: parseCell,
    step(state, index, { rng }) {
      let next = place(state, index, "X");
      if (!next.winner) next = place(next, opponentMove(next, rng, options.opponent), "O");
      if (next.winner) {
        const reward = next.winner === "X" ? 1 : next.winner === "O" ? -1 : 0;
        return {
          state: next,
          reward,
          done: true,
          metrics: { won: next.winner === "X" ? 1 : 0, lost: next.winner === "O" ? 1 : 0, draw: next.winner === "draw" ? 1 : 0 },
        };
      }
      return { state: next, observation: renderBoard(next), reward: 0, done: false };
    },
    render: renderBoard,
    score: ({ state }) => (state.winner === "X" ? 1 : 0),
  });
}

export const ticTacToe = boardGame({
  name: "tic-tac-toe",
  size: 3,
  line: 3,
  opponent: "random",
  description: "Tic-tac-toe against a random opponent. Win +1, draw 0, loss -1; an invalid move -1 and ends the game.",
});

export const gomoku = boardGame({
  name: "gomoku",
  size: 6,
  line: 4,
  opponent: "greedy",
  description: "Four in a row on a 6×6 board against an opponent that wins or blocks when it can, else moves at random.",
});

/**
 * The same board with two players and no scripted opponent: for a person to play against a policy (the
 * playground's episode player, under `turnBased(["X", "O"])` or `turnBased(["O", "X"])` when O opens), or for a
 * policy to play itself. `toAct` names the side to move, so either order of the protocol's agents plays the game
 * the dataset row `{ opens: "O" }` sets up. Both sides see the board as the single-player game shows it, so a
 * policy trained as X plays X here unchanged; each side's system prompt names its mark. Zero-sum: a win pays the
 * winner +1 and the loser −1, a draw 0 each; an invalid move costs its player −1 and ends the game. The score is
 * X's win.
 *
 * The legal actions are the free cells, so a policy that never saw the game (self-play from the generalist base)
 * plays only real moves from its first step. The single-player games declare none: their shipped bases write
 * legal moves already, and their templates' figures were measured unconstrained. The demonstrator (`demonstrate`,
 * for SFT and for a scripted seat) wins where it can, else blocks, else plays its builder move, except that one
 * such move in four (by the move's draw, made at reset) goes to a free cell at random: the games it shows vary,
 * and it misses forks, which leaves self-play something to learn.
 *
 * `opener`: "X" opens unless the row says O; "either": with no row naming the opener, the seed draws it, so a
 * policy in self-play meets both openings (with X always opening, every game of a group starts from the same
 * empty board).
 */
function boardDuel(options: { name: string; size: number; line: number; opener: "X" | "either" }): EnvironmentDefinition<DuelState, number> {
  const { size, line } = options;
  return defineEnvironment<DuelState, number>({
    name: `${options.name}-${options.opener === "X" ? "duel" : "self-play"}`,
    description: `${options.name} for two players: X and O take turns, ${line} in a row wins${options.opener === "X" ? "" : "; either may open"}.`,
    data: { kind: "free" },
    systemPrompt: (_sample, agent) => `${agent === "O" ? "O" : "X"} to play, ${line} in a row.`,
    maxTurns: size * size,
    invalidAction: { penalty: -1, endEpisode: true },
    scoreName: "x_win_rate",
    reset({ sample, rng }) {
      const draws = Array.from({ length: size * size }, () => rng.uniform());
      const drawn = options.opener === "either" && sample?.opens === undefined && rng.uniform() < 0.5;
      const toMove = sample?.opens === "O" || drawn ? "O" : "X";
      const state: DuelState = { size, line, cells: Array<Cell>(size * size).fill("."), winner: null, moves: 0, toMove, draws };
      return { state, observation: renderBoard(state) };
    },
    toAct: (state) => state.toMove,
    actions: freeCells,
    demonstrate(state) {
      const mark = state.toMove;
      const line = completingCells(state, mark)[0] ?? completingCells(state, mark === "X" ? "O" : "X")[0];
      if (line !== undefined) return cellName(line, size);
      const draw = state.draws[state.moves] ?? 1;
      if (draw < DEMONSTRATOR_SLIP) {
        const free = freeCells(state);
        return free[Math.floor((draw / DEMONSTRATOR_SLIP) * free.length)]!;
      }
      return cellName(builderMove(state, new Set(), mark)!, size);
    },
    parseAction: parseCell,
    step(state, index) {
      const mover = state.toMove;
      const placed = place(state, index, mover);
      const next: DuelState = { ...placed, toMove: mover === "X" ? "O" : "X" };
      if (next.winner) {
        const rewards = next.winner === "draw" ? { X: 0, O: 0 } : next.winner === "X" ? { X: 1, O: -1 } : { X: -1, O: 1 };
        return { state: next, rewards, reward: rewards[mover], done: true, info: { winner: next.winner } };
      }
      return { state: next, observation: renderBoard(next), reward: 0, done: false };
    },
    render: renderBoard,
    score: ({ state }) => (state.winner === "X" ? 1 : 0),
  });
}

/** A board for two: the side to move, and one uniform draw per move made at reset that only the demonstrator reads. */
export type DuelState = BoardState & { toMove: "X" | "O"; draws: number[] };

/** How often the duel's demonstrator plays a random free cell where it can neither win nor block. */
const DEMONSTRATOR_SLIP = 0.25;

export const ticTacToeDuel = boardDuel({ name: "tic-tac-toe", size: 3, line: 3, opener: "X" });
export const gomokuDuel = boardDuel({ name: "gomoku", size: 6, line: 4, opener: "X" });
/** Tic-tac-toe for one policy in both seats: the duel, with the opener drawn by the seed. */
export const ticTacToeSelfPlay = boardDuel({ name: "tic-tac-toe", size: 3, line: 3, opener: "either" });
