/** The built-in use cases: their environments, demonstrators, templates and shipped base checkpoints. */
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { builtInBaseDir, builtInBases } from "@/lib/envs/bases";
import { readBuiltInDataset } from "@/lib/envs/datasets";
import { builderMove, cellName, completingCells, type BoardState } from "@/lib/envs/board-games";
import { demonstrate, demonstrators, perfectMove, toConversations } from "@/lib/envs/demonstrations";
import { generalistRecipe } from "@/lib/envs/generalist";
import { openRange } from "@/lib/envs/guess-number";
import { useCases } from "@/lib/envs/index";
import { distance, HOUSE, planLength, textWorld, type Direction, type WorldState } from "@/lib/envs/text-world";
import { renderChat } from "@/lib/model/chat";
import { Rng } from "@/lib/model/rng";
import { ByteTokenizer } from "@/lib/model/tokenizer";
import { splitDataset } from "@/lib/rl/train";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { GENERALIST_BASE } from "@/lib/sdk/agent";
import { defineExperiment } from "@/lib/sdk/experiment";
import { runEpisodes } from "@/lib/sdk/protocol";

const rows = splitDataset(readBuiltInDataset("word-problems"));

/** The context of the base a use case's template starts from: its own shipped base, or the generalist base. */
function templateContext(name: string): number {
  const base = useCases[name]!.template.agent?.base;
  if (base === GENERALIST_BASE) return generalistRecipe.model.contextLength;
  return Object.values(builtInBases).find((r) => r.useCase === name)!.model.contextLength;
}

describe("demonstrators", () => {
  it.each(Object.keys(useCases))("%s: speaks the format but plays imperfectly, and fits its base's context", async (name) => {
    const useCase = useCases[name]!;
    const trajectories = await demonstrate(useCase, demonstrators[name]!, 60, 7, useCase.environment.data.kind === "dataset" ? rows.train : undefined);
    const invalid = trajectories.reduce((a, t) => a + t.invalidActions, 0) / trajectories.reduce((a, t) => a + t.turns.length, 0);
    // Only the text world's demonstrator errs on purpose (one move in ten), so its base learns to read the error.
    if (name === "text-world") expect(invalid).toBeGreaterThan(0.05);
    else expect(invalid).toBe(0);
    expect(trajectories.every((t) => t.turns.every((turn) => !/unknown verb|expected/.test(turn.observation)))).toBe(true);
    const score = trajectories.reduce((a, t) => a + t.score, 0) / trajectories.length;
    expect(score).toBeLessThan(0.95);
    const longest = Math.max(...toConversations(trajectories, useCase.protocol.history).map((c) => renderChat(new ByteTokenizer(), c).tokens.length));
    expect(longest).toBeLessThanOrEqual(templateContext(name));
  });
});

describe("tool-use demonstrator", () => {
  it("copies the numbers but picks a wrong operator half the time, with no favourite slip", async () => {
    const useCase = useCases["tool-use"]!;
    const trajectories = await demonstrate(useCase, demonstrators["tool-use"]!, 400, 3, rows.train);
    const right = trajectories.filter((t) => t.score === 1).length / trajectories.length;
    expect(right).toBeGreaterThan(0.4);
    expect(right).toBeLessThan(0.6);
    const slips = new Map<string, number>();
    for (const t of trajectories) {
      const expression = rows.train.find((row) => row.question === t.turns[0]!.observation)!.expression as string;
      const call = /^@calc\((\d+)([-+*/])(\d+)\)$/.exec(t.turns[0]!.action)!;
      expect(`${call[1]}${call[3]}`).toBe(expression.replace(/[-+*/]/, "")); // the numbers, in order
      const operator = /[-+*/]/.exec(expression)![0];
      if (call[2] !== operator) slips.set(`${operator}${call[2]}`, (slips.get(`${operator}${call[2]}`) ?? 0) + 1);
    }
    expect(slips.size).toBe(12); // every wrong operator turns up for every operator
  });
});

/**
 * A board game's demonstrator over `episodes` games: the moves where a line could be completed (a win or a
 * block), how many of them took it, the moves elsewhere, and how many of those were `underneath`'s move.
 */
async function lineMoves(name: "tic-tac-toe" | "gomoku", episodes: number, underneath: (state: BoardState) => number | null) {
  const useCase = useCases[name]!;
  const starts = Array.from({ length: episodes }, (_, seed) => ({ session: new EnvironmentSession(useCase.environment), seed }));
  const rng = new Rng(5);
  const counts = { lines: 0, took: 0, elsewhere: 0, underneath: 0 };
  await runEpisodes(useCase.protocol, starts, async (requests) =>
    requests.map(({ episode }) => {
      const state = starts[episode]!.session.summary().state as BoardState;
      const move = demonstrators[name]!(state, rng, undefined, "agent");
      const parsed = useCase.environment.parseAction(move, state, "agent");
      const index = parsed.ok ? (parsed.action as number) : -1;
      const lines = [...completingCells(state, "X"), ...completingCells(state, "O")];
      if (lines.length > 0) {
        counts.lines++;
        if (lines.includes(index)) counts.took++;
      } else {
        counts.elsewhere++;
        if (index === underneath(state)) counts.underneath++;
      }
      return { text: move };
    }),
  );
  return counts;
}

describe("tic-tac-toe demonstrator", () => {
  const useCase = useCases["tic-tac-toe"]!;

  it("plays perfectly underneath: minimax never loses to the random opponent", async () => {
    const trajectories = await demonstrate(useCase, (state: BoardState) => cellName(perfectMove(state), 3), 300, 11);
    expect(trajectories.filter((t) => t.metrics.lost).length).toBe(0);
    expect(trajectories.filter((t) => t.metrics.won).length / 300).toBeGreaterThan(0.8);
  });

  it("wins or blocks only two times in five where it can, and plays its perfect move everywhere else", async () => {
    const counts = await lineMoves("tic-tac-toe", 600, perfectMove);
    expect(counts.lines).toBeGreaterThan(300);
    expect(counts.took / counts.lines).toBeGreaterThan(0.4); // 0.4 for the win, then 0.4 of the rest to block
    expect(counts.took / counts.lines).toBeLessThan(0.7);
    expect(counts.underneath).toBe(counts.elsewhere);
  });
});

describe("gomoku demonstrator", () => {
  const useCase = useCases.gomoku!;
  const seesEveryLine = (state: BoardState) => {
    const line = completingCells(state, "X")[0] ?? completingCells(state, "O")[0];
    return cellName(line ?? builderMove(state)!, state.size);
  };

  it("builds lines well enough to beat the blocking opponent when it sees every line, and loses every game when it sees none", async () => {
    const sighted = await demonstrate(useCase, seesEveryLine, 300, 11);
    expect(sighted.filter((t) => t.metrics.won).length / 300).toBeGreaterThan(0.95);
    const blind = await demonstrate(
      useCase,
      (state: BoardState) => cellName(builderMove(state, new Set([...completingCells(state, "X"), ...completingCells(state, "O")]))!, state.size),
      300,
      11,
    );
    expect(blind.filter((t) => t.metrics.won).length).toBe(0);
  });

  it("wins or blocks only two times in five where it can, and plays its builder move everywhere else", async () => {
    const counts = await lineMoves("gomoku", 300, (state) => builderMove(state));
    expect(counts.lines).toBeGreaterThan(200);
    expect(counts.took / counts.lines).toBeGreaterThan(0.4);
    expect(counts.took / counts.lines).toBeLessThan(0.7);
    expect(counts.underneath).toBe(counts.elsewhere);
  });
});

describe("text-world demonstrator", () => {
  it("walks the shortest way but goes west for east (and east for west) three times in five where it can", async () => {
    const useCase = useCases["text-world"]!;
    const starts = Array.from({ length: 400 }, (_, seed) => ({ session: new EnvironmentSession(useCase.environment), seed }));
    const rng = new Rng(5);
    let horizontal = 0;
    let mirrored = 0;
    let vertical = 0;
    let verticalRight = 0;
    await runEpisodes(useCase.protocol, starts, async (requests) =>
      requests.map(({ episode }) => {
        const state = starts[episode]!.session.summary().state as WorldState;
        const move = demonstrators["text-world"]!(state, rng, undefined, "agent");
        const target = state.objectAt === "hand" ? state.goal : state.objectAt;
        if (state.at !== target && move.startsWith("go ")) {
          const shortest = (Object.entries(HOUSE[state.at]!) as [Direction, string][])
            .filter(([, room]) => distance(room, target) < distance(state.at, target))
            .map(([d]) => d);
          const onlyHorizontal = shortest.length === 1 && ["east", "west"].includes(shortest[0]!);
          const other = shortest[0] === "east" ? "west" : "east";
          if (onlyHorizontal && HOUSE[state.at]![other]) {
            horizontal++;
            if (move === `go ${other}`) mirrored++;
          } else if (shortest.length === 1 && ["north", "south"].includes(shortest[0]!)) {
            vertical++;
            if (move === `go ${shortest[0]}`) verticalRight++;
          }
        }
        return { text: move };
      }),
    );
    expect(horizontal).toBeGreaterThan(100);
    expect(mirrored / horizontal).toBeGreaterThan(0.45); // 0.6 of the 0.9 that are valid moves
    expect(mirrored / horizontal).toBeLessThan(0.65);
    expect(verticalRight / vertical).toBeGreaterThan(0.8); // north and south it gets right (but for the one in ten invalid)
  });
});

describe("environments", () => {
  it("guess-number names the range still open", () => {
    expect(openRange({ secret: 40, guesses: [50, 20, 45], solved: false })).toEqual([21, 44]);
    const session = new EnvironmentSession(useCases["guess-number"]!.environment);
    session.reset(3);
    const secret = (session.summary().state as { secret: number }).secret;
    const guess = secret === 100 ? 99 : 100;
    const first = session.step(String(guess));
    expect(first.observation).toBe(`lower 1-${guess - 1}`);
    // Progress: 0.1 per halving of the open range, less the 0.02 a guess costs.
    expect(first.reward).toBeCloseTo(0.1 * Math.log2(100 / (guess - 1)) - 0.02, 10);
    // A guess the answers already rule out is wasted: no progress, and 0.1 on top of the guess's cost.
    const wasted = session.step(String(guess));
    expect(wasted.reward).toBeCloseTo(-0.12, 10);
    expect(wasted.metrics).toEqual({ wasted_guesses: 1 });
  });

  it("guess-number: the progress term is a potential's difference, so every solved game earns the same progress", async () => {
    const play = async (choose: (low: number, high: number) => number) => {
      const session = new EnvironmentSession(useCases["guess-number"]!.environment);
      session.reset(8); // the secret is 8: found by the 8th guess from the bottom, by the 7th bisecting
      let total = 0;
      let outcome;
      do {
        const [low, high] = openRange(session.summary().state as never);
        outcome = session.step(String(choose(low, high)));
        total += outcome.reward;
      } while (!outcome.done);
      return { total, turns: session.summary().turns };
    };
    const bisect = await play((low, high) => Math.floor((low + high) / 2));
    const linear = await play((low) => low);
    // 1 for the find, 0.1·log2(100) of progress in all, 0.02 a guess: only the number of guesses differs.
    expect(bisect.total).toBeCloseTo(1 + 0.1 * Math.log2(100) - 0.02 * bisect.turns, 10);
    expect(linear.total).toBeCloseTo(1 + 0.1 * Math.log2(100) - 0.02 * linear.turns, 10);
    expect(bisect.turns).toBeLessThan(linear.turns);
  });

  it("text-world: a shortest-path player brings the object in at most 8 steps, from every start", async () => {
    const route = (from: string, to: string): Direction => {
      const seen = new Map<string, Direction | null>([[from, null]]);
      const queue = [from];
      while (queue.length) {
        const room = queue.shift()!;
        for (const [direction, next] of Object.entries(HOUSE[room]!)) {
          if (seen.has(next)) continue;
          seen.set(next, seen.get(room) ?? (direction as Direction));
          queue.push(next);
        }
      }
      return seen.get(to)!;
    };
    const play = async (detour: boolean) => {
      const starts = Array.from({ length: 100 }, (_, seed) => ({ session: new EnvironmentSession(textWorld), seed }));
      const firstPlan = new Map<number, number>();
      const detoured = new Set<number>();
      const trajectories = await runEpisodes(useCases["text-world"]!.protocol, starts, async (requests) =>
        requests.map(({ episode }) => {
          const state = starts[episode]!.session.summary().state as WorldState;
          if (!firstPlan.has(episode)) {
            firstPlan.set(episode, planLength(state));
            // The detour: one step away from the object first, where a door leads away, then back.
            const away = Object.entries(HOUSE[state.at]!).find(([, room]) => distance(room, state.objectAt) > distance(state.at, state.objectAt));
            if (detour && away) {
              detoured.add(episode);
              return { text: `go ${away[0]}` };
            }
          }
          if (state.objectAt === state.at) return { text: `take ${state.object}` };
          if (state.objectAt === "hand" && state.at === state.goal) return { text: `drop ${state.object}` };
          return { text: `go ${route(state.at, state.objectAt === "hand" ? state.goal : state.objectAt)}` };
        }),
      );
      return trajectories.map((t, episode) => ({ ...t, firstPlan: firstPlan.get(episode)!, detoured: detoured.has(episode) }));
    };
    const shortest = await play(false);
    expect(shortest.every((t) => t.score === 1 && t.turns.length <= 8 && t.invalidActions === 0)).toBe(true);
    // The progress term adds up to 0.1 per action of the first shortest plan; only the step cost tells runs apart.
    for (const t of shortest) {
      expect(t.turns.length).toBe(t.firstPlan);
      expect(t.totalReward).toBeCloseTo(1 + 0.1 * t.firstPlan - 0.02 * t.turns.length, 10);
    }
    // A detour is paid back in the progress term (−0.1 there, +0.1 back) and costs two more steps.
    const detour = await play(true);
    expect(detour.filter((t) => t.detoured).length).toBeGreaterThan(50);
    for (const [i, t] of detour.entries()) {
      expect(t.score).toBe(1);
      expect(t.totalReward).toBeCloseTo(shortest[i]!.totalReward - (t.detoured ? 0.04 : 0), 10);
    }
  });
});

describe("experiment templates", () => {
  it.each(Object.keys(useCases))("%s: validates and names its own shipped base, or the generalist base after SFT on its demonstrator", (name) => {
    const useCase = useCases[name]!;
    const config = defineExperiment(useCase.template);
    expect(config.environment).toBe(name);
    // The protocol the use case is played with (a single turn has no history to keep).
    expect(config.protocol).toMatchObject({ name: useCase.protocol.name, agents: useCase.protocol.agents });
    if (config.protocol.name !== "single-turn") expect(config.protocol.history).toBe(useCase.protocol.history);
    if (config.agent.base === GENERALIST_BASE) {
      // The generalist base never saw the game: the template imitates the demonstrator before RL.
      expect(config.sft).toMatchObject({ data: "demonstrator", steps: expect.any(Number) });
      expect(config.sft.steps).toBeGreaterThan(0);
      expect(useCase.environment.demonstrate).toBeTypeOf("function");
      expect(existsSync(new URL(`../../../lib/envs/bases/${GENERALIST_BASE}/manifest.json`, import.meta.url))).toBe(true);
    } else {
      expect(builtInBases[config.agent.base]?.useCase).toBe(name);
      expect(existsSync(`${builtInBaseDir(config.agent.base)}/manifest.json`)).toBe(true);
    }
  });

  it("refuses an unknown base with the list of built-in ones", () => {
    expect(() => builtInBaseDir("nope")).toThrow(/no built-in base 'nope'; the built-in bases are arithmetic-base/);
  });
});

describe("board games for two players (the episode player's duel)", () => {
  it("alternates X and O from the side the row says opens, and pays the winner +1 and the loser -1", async () => {
    const duel = useCases["tic-tac-toe"]!.duel!;
    expect(duel.sides).toEqual(["X", "O"]);
    const moves: Record<string, string[]> = { X: ["a1", "a2", "a3"], O: ["b1", "c3", "b3"] };
    const [trajectory] = await runEpisodes(
      { name: "turn-based", agents: ["O", "X"], history: "full" },
      [{ session: new EnvironmentSession(duel.environment), seed: 0, sample: { opens: "O" } }],
      async ([request]) => [{ text: moves[request!.agent]!.shift()! }],
    );
    expect(trajectory!.turns.map((turn) => `${turn.agent}:${turn.action}`)).toEqual(["O:b1", "X:a1", "O:c3", "X:a2", "O:b3", "X:a3"]);
    expect(trajectory!.turns[0]!.render).toBe("a1 O c1\na2 b2 c2\na3 b3 c3");
    expect(trajectory!.agentReturns).toEqual({ O: -1, X: 1 });
    expect(trajectory!.turns.at(-1)!.info).toEqual({ winner: "X" });
  });

  it("offers the free cells as the legal moves, and its demonstrator wins where it can, else blocks", async () => {
    const duel = useCases["tic-tac-toe"]!.duel!.environment;
    const rng = new Rng(3);
    let wins = 0;
    let blocks = 0;
    for (let game = 0; game < 200; game++) {
      // Random moves to a random depth, then the demonstrator's move in that position.
      const session = new EnvironmentSession(duel);
      session.reset(game, game % 2 ? { opens: "O" } : undefined, undefined, { agents: ["X", "O"], simultaneous: false });
      for (let moves = Math.floor(rng.uniform() * 6); moves > 0; moves--) {
        const free = (duel.actions as (state: BoardState) => string[])(session.summary().state as BoardState);
        if (session.step(free[Math.floor(rng.uniform() * free.length)]!).done) break;
      }
      if (session.summary().done) continue;
      const state = session.summary().state as BoardState & { toMove: "X" | "O" };
      const free = state.cells.flatMap((cell, i) => (cell === "." ? [cellName(i, 3)] : []));
      expect(session.legalActions()).toEqual({ actions: free });
      const move = session.demonstrate()!;
      expect(free).toContain(move);
      const own = completingCells(state, state.toMove).map((i) => cellName(i, 3));
      const theirs = completingCells(state, state.toMove === "X" ? "O" : "X").map((i) => cellName(i, 3));
      if (own.length > 0) {
        expect(own).toContain(move);
        wins++;
      } else if (theirs.length > 0) {
        expect(theirs).toContain(move);
        blocks++;
      }
    }
    expect(wins).toBeGreaterThan(10);
    expect(blocks).toBeGreaterThan(10);
  });

  it("seats its demonstrator against a random player: it wins most games from either side and never loses as X", async () => {
    const duel = useCases["tic-tac-toe"]!.duel!.environment;
    const rng = new Rng(8);
    for (const demonstrator of ["X", "O"]) {
      const starts = Array.from({ length: 200 }, (_, seed) => ({ session: new EnvironmentSession(duel), seed }));
      const games = await runEpisodes({ name: "turn-based", agents: ["X", "O"], history: "last" }, starts, async (requests) =>
        requests.map(({ episode, agent }) => {
          const session = starts[episode]!.session;
          if (agent === demonstrator) return { text: session.demonstrate()! };
          const free = (session.legalActions() as { actions: string[] }).actions;
          return { text: free[Math.floor(rng.uniform() * free.length)]! };
        }),
      );
      const won = games.filter((t) => t.agentReturns[demonstrator] === 1).length / games.length;
      const lost = games.filter((t) => t.agentReturns[demonstrator] === -1).length / games.length;
      console.log(`demonstrator as ${demonstrator}: won ${won.toFixed(3)}, lost ${lost.toFixed(3)}`);
      expect(won).toBeGreaterThan(demonstrator === "X" ? 0.9 : 0.75);
      if (demonstrator === "X") expect(lost).toBe(0);
      expect(games.every((t) => t.invalidActions === 0)).toBe(true);
    }
  });

  it("self-play's tic-tac-toe lets the seed pick who opens, unless the row names the opener", () => {
    const { environment } = useCases["tic-tac-toe-self-play"]!;
    const opener = (seed: number, sample?: { opens: string }) => {
      const session = new EnvironmentSession(environment);
      session.reset(seed, sample, undefined, { agents: ["X", "O"], simultaneous: false });
      return session.agent;
    };
    const oOpens = Array.from({ length: 400 }, (_, seed) => opener(seed)).filter((agent) => agent === "O").length;
    expect(oOpens).toBeGreaterThan(160);
    expect(oOpens).toBeLessThan(240);
    expect(Array.from({ length: 20 }, (_, seed) => opener(seed, { opens: "X" }))).toEqual(Array(20).fill("X"));
    expect(opener(3)).toBe(opener(3));
  });

  it("answers a taken cell as an invalid move that costs its player and ends the game", async () => {
    const session = new EnvironmentSession(useCases.gomoku!.duel!.environment);
    session.reset(0);
    session.step("a1");
    const taken = session.step("a1");
    expect(taken).toMatchObject({ done: true, reward: -1 });
    expect(String(taken.info.invalid)).toMatch(/a1 is taken/);
  });
});
