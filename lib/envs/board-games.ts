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
export type OpponentKind = "random" | "greedy";

const COLUMNS = "abcdefgh";

export function cellName(index: number, size: number): string {
  return `${COLUMNS[index % size]}${Math.floor(index / size) + 1}`;
}

/**
 * The board, one row a line; a free cell shows its own name and a taken one its mark (`a1 X c1`), so the moves
 * on offer are written out on the board itself.
 */
export function renderBoard(state: BoardState): string {
  const rows: string[] = [];
  for (let r = 0; r < state.size; r++) {
    const cells = state.cells.slice(r * state.size, (r + 1) * state.size);
    rows.push(cells.map((cell, c) => (cell === "." ? cellName(r * state.size + c, state.size) : cell)).join(" "));
  }
  return rows.join("\n");
}

/** The winner after a move at `index`, if that move completed a line. */
function wins(state: BoardState, index: number): boolean {
  const { size, line, cells } = state;
  const mark = cells[index];
  const r0 = Math.floor(index / size);
  const c0 = index % size;
  for (const [dr, dc] of [[0, 1], [1, 0], [1, 1], [1, -1]] as const) {
    let count = 1;
    for (const sign of [1, -1]) {
      let r = r0 + sign * dr;
      let c = c0 + sign * dc;
      while (r >= 0 && r < size && c >= 0 && c < size && cells[r * size + c] === mark) {
        count++;
        r += sign * dr;
        c += sign * dc;
      }
    }
    if (count >= line) return true;
  }
  return false;
}

function place(state: BoardState, index: number, mark: "X" | "O"): BoardState {
  const cells = state.cells.slice();
  cells[index] = mark;
  const next: BoardState = { ...state, cells, moves: state.moves + 1 };
  if (wins(next, index)) next.winner = mark;
  else if (!cells.includes(".")) next.winner = "draw";
  return next;
}

export function emptyCells(state: BoardState): number[] {
  const out: number[] = [];
  state.cells.forEach((cell, i) => cell === "." && out.push(i));
  return out;
}

/** The scripted opponent's move: win if it can, block if it must ("greedy"), else a random empty cell. */
export function opponentMove(state: BoardState, rng: Rng, kind: OpponentKind): number {
  const empty = emptyCells(state);
  if (kind === "greedy") {
    // Try each cell on one scratch board (set, test, clear) rather than copying the board per candidate.
    const scratch: BoardState = { ...state, cells: state.cells.slice() };
    for (const mark of ["O", "X"] as const) {
      for (const i of empty) {
        scratch.cells[i] = mark;
        const completes = wins(scratch, i);
        scratch.cells[i] = ".";
        if (completes) return i;
      }
    }
  }
  return empty[Math.floor(rng.uniform() * empty.length)]!;
}

function boardGame(options: { name: string; size: number; line: number; opponent: OpponentKind; description: string }): EnvironmentDefinition<BoardState, number> {
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
    parseAction(text, state) {
      const match = /^\s*([a-h])([1-8])\s*$/i.exec(text);
      if (!match) return { ok: false, error: `expected a cell like b2, got ${JSON.stringify(text.trim().slice(0, 20))}` };
      const col = COLUMNS.indexOf(match[1]!.toLowerCase());
      const row = Number(match[2]) - 1;
      if (col >= size || row >= size) return { ok: false, error: `${text.trim()} is off the ${size}x${size} board` };
      const index = row * size + col;
      if (state.cells[index] !== ".") return { ok: false, error: `${text.trim()} is taken` };
      return { ok: true, action: index };
    },
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
