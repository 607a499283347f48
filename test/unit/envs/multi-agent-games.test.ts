/** The multi-agent games: their rules, what each agent sees, their rewards, and the scripted players' known scores. */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ticTacToeDuel } from "@/lib/envs/board-games";
import { gameUseCases } from "@/lib/envs/index";
import {
  activeMove,
  type Card,
  deal,
  demonstratedMove,
  describeHand,
  type KuhnHand,
  type KuhnMove,
  type KuhnState,
  kuhnPoker,
  kuhnPokerDuel,
  legalMoves,
  passiveMove,
  payoffs,
  scriptedMove,
  seatToAct,
} from "@/lib/envs/kuhn-poker";
import { CODE, COLOURS, describeFor as describeSignal, SIGNALS, type SignalState, signalGame, signalListener, signalSpeaker } from "@/lib/envs/signal-game";
import { COUNTERPART_DEMANDS, describeFor as describeSplit, POTS, type SplitState, settle, splitPot, splitPotDuel } from "@/lib/envs/split-pot";
import { generalistRecipe } from "@/lib/envs/generalist";
import { type ChatMessage, renderChat } from "@/lib/model/chat";
import { Rng } from "@/lib/model/rng";
import { ByteTokenizer } from "@/lib/model/tokenizer";
import { GENERALIST_BASE } from "@/lib/sdk/agent";
import { type EnvironmentDefinition, EnvironmentSession } from "@/lib/sdk/environment";
import { defineExperiment } from "@/lib/sdk/experiment";
import { runSandboxedEpisodes, SandboxedEnvironmentPool } from "@/server/sandbox";
import { type ActRequest, multiTurn, type Protocol, runEpisodes, singleTurn, simultaneous, type Trajectory, turnBased } from "@/lib/sdk/protocol";

/**
 * Plays `episodes` seeded episodes of `definition` under `protocol`, each action chosen by `choose` from the
 * episode's true state and the request (its agent and legal actions).
 */
async function play<State>(
  definition: EnvironmentDefinition<State, any>,
  protocol: Protocol,
  episodes: number,
  choose: (state: State, request: ActRequest) => string,
  firstSeed = 0,
): Promise<Trajectory[]> {
  const starts = Array.from({ length: episodes }, (_, i) => ({ session: new EnvironmentSession(definition), seed: firstSeed + i }));
  return runEpisodes(protocol, starts, async (requests) =>
    requests.map((request) => ({ text: choose(starts[request.episode]!.session.summary().state as State, request) })),
  );
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
const legalOf = (request: ActRequest) => (request.legalActions && "actions" in request.legalActions ? request.legalActions.actions : []);
const uniform = (rng: Rng) => (_state: unknown, request: ActRequest) => {
  const legal = legalOf(request);
  return legal[Math.floor(rng.uniform() * legal.length)]!;
};

describe("Kuhn poker: the rules", () => {
  const hand = (p1: Card, p2: Card, line: string): KuhnHand => ({ cards: { P1: p1, P2: p2 }, history: line.split(" ") as KuhnMove[] });

  it.each([
    ["check check", "K", "J", 1],
    ["check check", "J", "Q", -1],
    ["bet call", "Q", "J", 2],
    ["bet call", "Q", "K", -2],
    ["check bet call", "K", "Q", 2],
    ["check bet call", "J", "K", -2],
    ["bet fold", "J", "K", 1],
    ["check bet fold", "K", "J", -1],
  ] as const)("%s with P1 %s against P2 %s pays P1 %d and P2 the opposite", (line, p1, p2, chips) => {
    expect(payoffs(hand(p1, p2, line))).toEqual({ P1: chips, P2: -chips });
  });

  it("goes on, with P1 first and then in turn, until a showdown or a fold; every end sums to zero", () => {
    expect(payoffs(hand("K", "J", "check"))).toBeNull();
    expect(payoffs(hand("K", "J", "bet"))).toBeNull();
    expect(payoffs(hand("K", "J", "check bet"))).toBeNull();
    expect([[], ["check"], ["bet"], ["check", "bet"]].map((h) => [seatToAct(h as KuhnMove[]), legalMoves(h as KuhnMove[]).join("/")])).toEqual([
      ["P1", "check/bet"],
      ["P2", "check/bet"],
      ["P2", "call/fold"],
      ["P1", "call/fold"],
    ]);
    const deals = (["J", "Q", "K"] as Card[]).flatMap((a) => (["J", "Q", "K"] as Card[]).filter((b) => b !== a).map((b) => [a, b] as const));
    for (const [a, b] of deals)
      for (const line of ["check check", "bet call", "bet fold", "check bet call", "check bet fold"]) {
        const result = payoffs(hand(a, b, line))!;
        expect(result.P1 + result.P2).toBe(0);
      }
  });

  it("deals two different cards, every pair equally often", () => {
    const rng = new Rng(1);
    const counts = new Map<string, number>();
    for (let i = 0; i < 6000; i++) {
      const cards = deal(rng);
      expect(cards.P1).not.toBe(cards.P2);
      counts.set(`${cards.P1}${cards.P2}`, (counts.get(`${cards.P1}${cards.P2}`) ?? 0) + 1);
    }
    expect(counts.size).toBe(6);
    for (const count of counts.values()) expect(Math.abs(count - 1000)).toBeLessThan(120);
  });

  it("shows each seat its own card and the moves, never the other's card", () => {
    for (const seat of ["P1", "P2"] as const)
      for (const own of ["J", "Q", "K"] as Card[]) {
        const others = (["J", "Q", "K"] as Card[]).filter((card) => card !== own);
        for (const history of [[], ["check"], ["bet"], ["check", "bet"], ["bet", "call"]] as KuhnMove[][]) {
          const views = others.map((other) => describeHand({ cards: seat === "P1" ? { P1: own, P2: other } : { P1: other, P2: own }, history }, seat));
          expect(views[0]).toBe(views[1]); // the same whatever the other holds
          expect(views[0]).toContain(`card ${own}`);
        }
      }
    expect(describeHand({ cards: { P1: "K", P2: "J" }, history: ["check", "bet"] }, "P1")).toBe(
      "You are P1, card K. Moves: P1 check, P2 bet. Yours: call or fold.",
    );
  });
});

describe("Kuhn poker: the scripted opponent and the demonstrator", () => {
  it("plays the equilibrium: always bets or calls a king, never calls with a jack, bluffs a jack first 1/6 of the time", () => {
    const rng = new Rng(3);
    const rate = (card: Card, history: KuhnMove[], move: KuhnMove, n = 6000) => {
      let hits = 0;
      for (let i = 0; i < n; i++) if (scriptedMove(card, history, rng) === move) hits++;
      return hits / n;
    };
    expect(rate("K", ["bet"], "call")).toBe(1);
    expect(rate("K", ["check"], "bet")).toBe(1);
    expect(rate("J", ["bet"], "call")).toBe(0);
    expect(rate("J", ["check", "bet"], "call")).toBe(0);
    expect(rate("Q", [], "bet")).toBe(0);
    expect(rate("J", [], "bet")).toBeCloseTo(1 / 6, 1);
    expect(rate("K", [], "bet")).toBeCloseTo(1 / 2, 1);
    expect(rate("Q", ["bet"], "call")).toBeCloseTo(1 / 3, 1);
  });

  it("the demonstrator plays kings and jacks right, and bets a queen it could check in four hands of five", () => {
    const rng = new Rng(8);
    for (const history of [[], ["check"], ["bet"], ["check", "bet"]] as KuhnMove[][]) {
      expect(demonstratedMove("K", history, rng.uniform())).toBe(activeMove(history));
      expect(demonstratedMove("J", history, rng.uniform())).toBe(passiveMove(history));
    }
    expect(demonstratedMove("Q", ["bet"], 0.99)).toBe("call");
    let bets = 0;
    for (let i = 0; i < 4000; i++) if (demonstratedMove("Q", [], rng.uniform()) === "bet") bets++;
    expect(bets / 4000).toBeCloseTo(0.8, 1);
  });

  it("seats the policy first on even seeds and second on odd ones, where the opponent has moved already", async () => {
    const session = new EnvironmentSession(kuhnPoker);
    session.reset(4);
    expect((session.summary().state as KuhnState).seat).toBe("P1");
    expect((session.summary().state as KuhnState).history).toEqual([]);
    const observation = session.reset(5);
    const state = session.summary().state as KuhnState;
    expect(state.seat).toBe("P2");
    expect(state.history).toHaveLength(1);
    expect(observation).toMatch(/^You are P2, card [JQK]\. Moves: P1 (check|bet)\. Yours: (check or bet|call or fold)\.$/);
  });

  /** Mean chips a hand over 4,000 seeded hands, both seats, for a player choosing by `choose`. */
  const chipsOf = async (choose: (state: KuhnState, request: ActRequest) => string) => {
    const trajectories = await play(kuhnPoker, multiTurn("agent", "last"), 4000, choose);
    expect(trajectories.every((t) => t.invalidActions === 0 && !t.truncated)).toBe(true);
    expect(trajectories.every((t) => t.score === t.totalReward)).toBe(true);
    return { chips: mean(trajectories.map((t) => t.totalReward)), won: mean(trajectories.map((t) => t.metrics.won!)) };
  };

  it("beats a random player, loses less to its demonstrator, and nothing to a player that never misplays", async () => {
    // Exact expectations over both seats: random −0.139 a hand, the demonstrator −0.056, the honest player 0.
    const random = await chipsOf(uniform(new Rng(7)));
    expect(random.chips).toBeLessThan(-0.09);
    const demonstrator = await chipsOf((state) => demonstratedMove(state.cards[state.seat], state.history, state.coin));
    expect(demonstrator.chips).toBeGreaterThan(-0.1);
    expect(demonstrator.chips).toBeLessThan(-0.02);
    // Bets and calls a king, checks and folds a jack, checks a queen and calls with it (a best response).
    const honest = await chipsOf((state) => {
      const card = state.cards[state.seat];
      return card === "K" ? activeMove(state.history) : card === "J" ? passiveMove(state.history) : state.history.at(-1) === "bet" ? "call" : "check";
    });
    expect(Math.abs(honest.chips)).toBeLessThan(0.04);
    // hands won say little: the random player's bluffs win more of them than the sound player's
    expect(random.won).toBeGreaterThan(honest.won);
  }, 30_000);

  it("refuses a move that is not open, as a forfeit", () => {
    const session = new EnvironmentSession(kuhnPoker);
    session.reset(0);
    expect(session.legalActions()).toEqual({ actions: ["check", "bet"] });
    const step = session.step("call");
    expect(step).toMatchObject({ done: true, reward: -2 });
    expect(String(step.info.invalid)).toMatch(/expected check or bet/);
  });
});

describe("the signalling game", () => {
  it("shows the speaker the target and the listener only the signal", () => {
    const round = (target: (typeof COLOURS)[number]): SignalState => ({ target, signal: "x", guess: null, coin: 0.5 });
    expect(describeSignal(round("red"), "speaker")).toBe("Target: red. Send one of w x y z.");
    expect(new Set(COLOURS.map((target) => describeSignal(round(target), "listener")))).toEqual(new Set(["Signal: x. Name one of red green blue gold."]));
  });

  it("a speaker and a listener of the fixed code succeed every time; a speaker of another code, never", async () => {
    const speaker = await play(signalSpeaker, singleTurn(), 200, (state) => CODE[state.target]);
    expect(speaker.every((t) => t.score === 1 && t.totalReward === 1)).toBe(true);
    expect(new Set(speaker.map((t) => t.turns[0]!.action))).toEqual(new Set(SIGNALS)); // every colour came up
    const shifted = await play(signalSpeaker, singleTurn(), 200, (state) => SIGNALS[(SIGNALS.indexOf(CODE[state.target]) + 1) % 4]!);
    expect(shifted.every((t) => t.score === 0 && t.totalReward === 0)).toBe(true);
    const listener = await play(signalListener, singleTurn(), 200, (state) => COLOURS.find((colour) => CODE[colour] === state.signal)!);
    expect(listener.every((t) => t.score === 1)).toBe(true);
  });

  it("a random speaker succeeds one time in four; the demonstrators, who confuse gold with blue three times in five, 0.85", async () => {
    const random = await play(signalSpeaker, singleTurn(), 2000, uniform(new Rng(2)));
    expect(mean(random.map((t) => t.score))).toBeCloseTo(0.25, 1);
    for (const definition of [signalSpeaker, signalListener]) {
      const demonstrated = await play(definition, singleTurn(), 2000, (state) => definition.demonstrate!(state as SignalState, "agent"));
      expect(mean(demonstrated.map((t) => t.score))).toBeCloseTo(0.85, 1);
      const gold = demonstrated.filter((t) => (t.turns[0]!.render ?? "").startsWith("target gold"));
      expect(mean(gold.map((t) => t.score))).toBeCloseTo(0.4, 1);
    }
  });
});

describe("split the pot", () => {
  const start: SplitState = { round: 0, clashes: [], sealed: {}, coins: null, coin: { A: 0.5, B: 0.5 } };

  it("pays demands that fit the pot; a clash shrinks it, and a third clash pays nothing", () => {
    expect(settle(start, { A: 4, B: 6 }).coins).toEqual({ A: 4, B: 6 });
    expect(settle(start, { A: 3, B: 3 }).coins).toEqual({ A: 3, B: 3 }); // the rest is left on the table
    const second = settle(start, { A: 5, B: 6 });
    expect(second).toMatchObject({ round: 1, coins: null, clashes: [{ A: 5, B: 6 }] });
    expect(describeSplit(second, "B")).toBe("Round 2/3, pot 8. Clash: you 6, other 5. Demand 0-8.");
    const third = settle(second, { A: 8, B: 1 });
    expect(third.round).toBe(2);
    expect(settle(third, { A: 4, B: 3 }).coins).toEqual({ A: 0, B: 0 });
  });

  it("against the counterpart: 4 coins at once, 5 by holding out a round (2 lost), nothing by asking too much", async () => {
    const byRound = (demands: number[]) => play(splitPot, multiTurn("agent", "last"), 1, (state) => String(demands[state.round]));
    const [conceding] = await byRound([4, 4, 4]);
    expect(conceding!.metrics).toMatchObject({ coins_a: 4, coins_b: 6, coins_total: 10, agreed: 1, clashes: 0 });
    expect(conceding!.totalReward).toBeCloseTo(0.4, 10);
    const [holdingOut] = await byRound([6, 5, 4]);
    expect(holdingOut!.metrics).toMatchObject({ coins_a: 5, coins_b: 3, coins_total: 8, clashes: 1 });
    expect(holdingOut!.score).toBeCloseTo(0.5, 10);
    const [greedy] = await byRound([9, 8, 6]);
    expect(greedy!.metrics).toMatchObject({ coins_a: 0, coins_total: 0, agreed: 0, clashes: 3 });
  });

  it("the demonstrator asks half the pot, one coin less or more in a fifth of the games each: 4, 4 or 5 coins", async () => {
    const games = await play(splitPot, multiTurn("agent", "last"), 2000, (state) => splitPot.demonstrate!(state, "agent"));
    const outcomes = new Map<string, number>();
    for (const t of games) {
      const key = `${t.turns.map((turn) => turn.action).join(",")}:${t.metrics.coins_a}/${t.metrics.coins_total}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1 / games.length);
    }
    expect([...outcomes.keys()].sort()).toEqual(["4:4/10", "5,4:4/7", "6,5:5/8"]);
    expect(outcomes.get("4:4/10")).toBeCloseTo(0.2, 1);
    expect(outcomes.get("6,5:5/8")).toBeCloseTo(0.2, 1);
    expect(mean(games.map((t) => t.score))).toBeCloseTo(0.42, 2);
  });

  it("no sequence of demands gets more than 5 coins from the counterpart", () => {
    let best = 0;
    const search = (state: SplitState) => {
      if (state.coins) {
        best = Math.max(best, state.coins.A);
        return;
      }
      for (let demand = 0; demand <= POTS[state.round]!; demand++) search(settle(state, { A: demand, B: COUNTERPART_DEMANDS[state.round]! }));
    };
    search(start);
    expect(best).toBe(5);
  });
});

describe("the duels: two agents through runEpisodes", () => {
  it("tic-tac-toe pays the winner +1 and the loser −1, and lets O open whatever the protocol's order", async () => {
    const moves: Record<string, string[]> = { X: ["a1", "a2", "a3"], O: ["b1", "c3", "b3"] };
    const [trajectory] = await runEpisodes(
      turnBased(["X", "O"]),
      [{ session: new EnvironmentSession(ticTacToeDuel), seed: 0, sample: { opens: "O" } }],
      async ([request]) => [{ text: moves[request!.agent]!.shift()! }],
    );
    expect(trajectory!.turns.map((turn) => turn.agent).join("")).toBe("OXOXOX");
    expect(trajectory!.agentReturns).toEqual({ X: 1, O: -1 });
    expect(trajectory!.score).toBe(1);
    expect(trajectory!.systemPrompts).toEqual({ X: "X to play, 3 in a row.", O: "O to play, 3 in a row." });
  });

  it("Kuhn poker: the seat to act moves, each sees only its own card, and the chips sum to zero", async () => {
    const rng = new Rng(11);
    const trajectories = await play(kuhnPokerDuel, turnBased(["P1", "P2"]), 300, (hand, request) => {
      expect(request.agent).toBe(seatToAct(hand.history));
      const observation = request.messages.at(-1)!.content;
      expect(observation).toBe(describeHand(hand, request.agent as "P1" | "P2"));
      return rng.uniform() < 0.5 ? demonstratedMove(hand.cards[request.agent as "P1" | "P2"], hand.history, hand.coin) : uniform(rng)(hand, request);
    });
    for (const t of trajectories) {
      expect(t.agentReturns.P1! + t.agentReturns.P2!).toBe(0);
      expect(Math.abs(t.agentReturns.P1!)).toBeGreaterThanOrEqual(1);
      expect(t.turns.every((turn, i) => turn.agent === (i % 2 === 0 ? "P1" : "P2"))).toBe(true);
      expect(t.score).toBe(t.agentReturns.P1! > 0 ? 1 : 0);
    }
    expect(new Set(trajectories.map((t) => t.turns.map((turn) => turn.action).join(" "))).size).toBe(5); // every betting line
  });

  it("the signalling game: the scripted speaker and listener succeed every time and share the reward", async () => {
    const trajectories = await play(signalGame, turnBased(["speaker", "listener"]), 100, (state, request) =>
      request.agent === "speaker" ? CODE[state.target] : COLOURS.find((colour) => CODE[colour] === state.signal)!,
    );
    for (const t of trajectories) {
      expect(t.turns.map((turn) => turn.agent)).toEqual(["speaker", "listener"]);
      expect(t.turns[1]!.observation).toMatch(/^Signal: [wxyz]\./);
      expect(t.agentReturns).toEqual({ speaker: 1, listener: 1 });
    }
    const wrong = await play(signalGame, turnBased(["listener", "speaker"]), 20, (_state, request) => (request.agent === "speaker" ? "w" : "gold"));
    for (const t of wrong) expect(t.agentReturns.speaker).toBe(t.agentReturns.listener);
  });

  it("split the pot, simultaneous: one round of demands at once, each paid its own share", async () => {
    const demands: Record<string, number[]> = { A: [7, 4], B: [6, 4] };
    const [trajectory] = await runEpisodes(simultaneous(["A", "B"]), [{ session: new EnvironmentSession(splitPotDuel), seed: 0 }], async (requests) =>
      requests.map((request) => ({ text: String(demands[request.agent]!.shift()) })),
    );
    expect(trajectory!.turns.map((turn) => `${turn.agent}:${turn.action}`)).toEqual(["A:7", "B:6", "A:4", "B:4"]);
    expect(trajectory!.agentReturns.A).toBeCloseTo(0.4, 10);
    expect(trajectory!.agentReturns.B).toBeCloseTo(0.4, 10);
    expect(trajectory!.metrics).toMatchObject({ coins_total: 8, clashes: 1 });
  });

  it("split the pot, turn-based: B demands without seeing A's demand", async () => {
    const seen: string[] = [];
    for (const demandOfA of [2, 8]) {
      const [trajectory] = await runEpisodes(turnBased(["A", "B"]), [{ session: new EnvironmentSession(splitPotDuel), seed: 0 }], async ([request]) => {
        if (request!.agent === "B") seen.push(request!.messages.at(-1)!.content);
        return [{ text: request!.agent === "A" ? String(demandOfA) : "5" }];
      });
      expect(trajectory!.turns[0]!.agent).toBe("A");
      if (demandOfA === 2) expect(trajectory!.agentReturns).toEqual({ A: 0.2, B: 0.5 });
    }
    expect(seen[0]).toBe("Round 1/3, pot 10. Demand 0-10.");
    expect(seen[1]).toBe(seen[0]);
  });
});

describe("the games' use cases", () => {
  /** The best mean score against each scripted partner: the equilibrium's value, a perfect code, holding out a round. */
  const best: Record<string, number> = { "kuhn-poker": 0, "signal-speaker": 1, "signal-listener": 1, "split-pot": 0.5 };

  it.each(Object.keys(gameUseCases))(
    "%s: the demonstrator plays valid moves only, better than at random and worse than the best, and plays the two-agent game",
    async (name) => {
      const { environment, protocol, duel } = gameUseCases[name]!;
      const trajectories = await play(environment, protocol, 2000, (state) => environment.demonstrate!(state, "agent"));
      expect(trajectories.every((t) => t.invalidActions === 0 && !t.truncated)).toBe(true);
      const score = mean(trajectories.map((t) => t.score));
      const random = mean((await play(environment, protocol, 2000, uniform(new Rng(6)))).map((t) => t.score));
      expect(score).toBeGreaterThan(random + 0.05);
      expect(score).toBeLessThan(best[name]! - 0.05);
      const games = await play(duel!.environment, turnBased(duel!.sides), 50, (state, request) => duel!.environment.demonstrate!(state, request.agent));
      expect(games.every((t) => t.invalidActions === 0 && !t.truncated && t.turns.length > 0)).toBe(true);
    },
  );

  it.each(Object.keys(gameUseCases))("%s: its template validates, and every turn of the game for two fits the generalist base's context", async (name) => {
    const { template, duel } = gameUseCases[name]!;
    const config = defineExperiment(template);
    expect(config.environment).toBe(name);
    expect(config.agent.base).toBe(GENERALIST_BASE);
    // the two-agent game, whole conversations: longer than any prompt of the one-agent game
    const games = await play(duel!.environment, turnBased(duel!.sides), 100, uniform(new Rng(4)));
    const longest = Math.max(
      ...games.flatMap((t) =>
        duel!.sides.map((agent) => {
          const messages: ChatMessage[] = [{ role: "system", content: t.systemPrompts?.[agent] ?? t.systemPrompt }];
          for (const turn of t.turns.filter((turn) => turn.agent === agent))
            messages.push({ role: "user", content: turn.observation }, { role: "assistant", content: turn.action });
          return renderChat(new ByteTokenizer(), messages).tokens.length;
        }),
      ),
    );
    expect(longest).toBeLessThanOrEqual(generalistRecipe.model.contextLength);
  });

  it("plays the same episode from the same seed", async () => {
    for (const { environment, protocol } of Object.values(gameUseCases)) {
      const a = await play(environment, protocol, 20, uniform(new Rng(5)));
      const b = await play(environment, protocol, 20, uniform(new Rng(5)));
      expect(b.map((t) => t.turns.map((turn) => turn.observation + turn.action))).toEqual(a.map((t) => t.turns.map((turn) => turn.observation + turn.action)));
    }
  });
});

describe("the two-agent games in the sandbox", () => {
  /** A game's own file as an experiment's environment, its two-agent game the default export. */
  const sourceOf = (file: string, name: string) =>
    `${readFileSync(fileURLToPath(new URL(`../../../lib/envs/${file}`, import.meta.url)), "utf8")}\nexport default ${name};\n`;

  it.each([
    ["kuhn-poker.ts", "kuhnPokerDuel", kuhnPokerDuel, turnBased(["P1", "P2"])],
    ["signal-game.ts", "signalGame", signalGame, turnBased(["speaker", "listener"])],
    ["split-pot.ts", "splitPotDuel", splitPotDuel, simultaneous(["A", "B"])],
  ] as const)(
    "%s plays as in-process: the same seeds and moves give the same trajectories",
    async (file, name, definition, protocol) => {
      const pool = await SandboxedEnvironmentPool.create({ files: { [file]: sourceOf(file, name) }, entry: file });
      try {
        const seeds = Array.from({ length: 16 }, (_, seed) => seed);
        // a legal move picked by the prompt's length and the episode: the same in both places
        const policy = async (requests: ActRequest[]) =>
          requests.map((request) => {
            const legal = legalOf(request);
            return { text: legal[(JSON.stringify(request.messages).length + request.episode) % legal.length]! };
          });
        const sandboxed = await runSandboxedEpisodes(
          protocol,
          pool,
          seeds.map((seed) => ({ seed })),
          policy,
        );
        const native = await runEpisodes(
          protocol,
          seeds.map((seed) => ({ seed, session: new EnvironmentSession(definition as EnvironmentDefinition<unknown, unknown>) })),
          policy,
        );
        expect(sandboxed).toEqual(native);
        expect(new Set(native.map((t) => JSON.stringify(t.agentReturns))).size).toBeGreaterThan(1);
      } finally {
        pool.dispose();
      }
    },
    60_000,
  );
});
