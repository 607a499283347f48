/**
 * Kuhn poker: two players, a deck of three cards (J < Q < K), one card each, the third unseen. Each antes 1 chip;
 * P1 acts first. The betting, with one bet size of 1 chip:
 *
 *   P1 check → P2 check: showdown for 1 chip      P1 bet → P2 call: showdown for 2 chips
 *            → P2 bet → P1 call: showdown for 2     P1 bet → P2 fold: P1 wins 1
 *                     → P1 fold: P2 wins 1
 *
 * Imperfect information: each player sees its own card and the betting so far, never the other's card. Zero-sum:
 * what one wins the other loses. Its value is −1/18 chip a hand to P1 (+1/18 to P2) under equilibrium play.
 *
 * Two environments: `kuhn-poker` seats the policy against a scripted opponent that plays an equilibrium (the seat
 * alternates by seed), so no policy wins chips from it on average: 0 chips a hand over both seats is the ceiling, a
 * policy playing uniformly at random loses 0.14. `kuhn-poker-duel` seats two agents, P1 and P2.
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment, type EnvironmentDefinition, type ParseResult, type StepOutcome } from "@/lib/sdk/environment";

export type Card = "J" | "Q" | "K";
export type KuhnMove = "check" | "bet" | "call" | "fold";
export type Seat = "P1" | "P2";
export const KUHN_SEATS: readonly [Seat, Seat] = ["P1", "P2"];

/** A hand: the cards dealt and the moves so far, P1's first and then alternating. */
export type KuhnHand = { cards: Record<Seat, Card>; history: KuhnMove[] };

const RANK: Record<Card, number> = { J: 0, Q: 1, K: 2 };
const CARDS: readonly Card[] = ["J", "Q", "K"];

/** Two different cards of the three, P1's then P2's. */
export function deal(rng: Rng): Record<Seat, Card> {
  const first = Math.floor(rng.uniform() * 3);
  const second = (first + 1 + Math.floor(rng.uniform() * 2)) % 3;
  return { P1: CARDS[first]!, P2: CARDS[second]! };
}

/** Who acts after `history`: P1 first, then they alternate. */
export function seatToAct(history: readonly KuhnMove[]): Seat {
  return history.length % 2 === 0 ? "P1" : "P2";
}

/** The moves open after `history`: check or bet when no bet stands, call or fold against one. */
export function legalMoves(history: readonly KuhnMove[]): KuhnMove[] {
  return history.at(-1) === "bet" ? ["call", "fold"] : ["check", "bet"];
}

/** The move that puts no chip in: check, or fold against a bet. */
export const passiveMove = (history: readonly KuhnMove[]): KuhnMove => (history.at(-1) === "bet" ? "fold" : "check");
/** The move that puts a chip in: bet, or call against a bet. */
export const activeMove = (history: readonly KuhnMove[]): KuhnMove => (history.at(-1) === "bet" ? "call" : "bet");

/** Each seat's chips won or lost once the hand is over (null while it goes on): they sum to zero. */
export function payoffs(hand: KuhnHand): Record<Seat, number> | null {
  const line = hand.history.join(" ");
  const showdown = RANK[hand.cards.P1] > RANK[hand.cards.P2] ? 1 : -1;
  let p1: number;
  if (line === "check check") p1 = showdown;
  else if (line === "bet call" || line === "check bet call") p1 = 2 * showdown;
  else if (line === "bet fold") p1 = 1;
  else if (line === "check bet fold") p1 = -1;
  else return null;
  // + 0 turns a −0 into 0, so a zero-sum check reads as equal numbers
  return { P1: p1, P2: -p1 + 0 };
}

/** Whether the hand ended with the cards shown (no fold). */
export function wentToShowdown(hand: KuhnHand): boolean {
  return payoffs(hand) !== null && hand.history.at(-1) !== "fold";
}

/**
 * The scripted opponent: an equilibrium strategy (Kuhn, 1950) with bluffing rate α = 1/6. As P1: with J bet α of the
 * time (a bluff) and fold to a raise; with Q check, and call a bet α + 1/3 of the time; with K bet 3α of the time and
 * otherwise check and call. As P2: with K bet or call; with Q check behind and call a bet 1/3 of the time; with J
 * bet after a check 1/3 of the time (a bluff) and fold to a bet. Against it every sensible strategy earns the game's
 * value and every mistake (folding a king, calling with a jack, betting a queen) loses chips.
 */
export function scriptedMove(card: Card, history: readonly KuhnMove[], rng: Rng): KuhnMove {
  const alpha = 1 / 6;
  const line = history.join(" ");
  const aggressive: Record<string, Record<Card, number>> = {
    "": { J: alpha, Q: 0, K: 3 * alpha },
    check: { J: 1 / 3, Q: 0, K: 1 },
    bet: { J: 0, Q: 1 / 3, K: 1 },
    "check bet": { J: 0, Q: alpha + 1 / 3, K: 1 },
  };
  return rng.uniform() < aggressive[line]![card] ? activeMove(history) : passiveMove(history);
}

/** How often the demonstrator plays the queen wrong: in four hands of five. */
const QUEEN_SLIP = 0.8;

/**
 * The demonstrator: right with the king (bet, call) and the jack (check, fold); with the queen it checks and calls a
 * bet, except in the hands whose `coin` (drawn at the deal, below 0.8 four times in five) says it slips: then it
 * bets the queen where it could check. So a base SFT'd on it bets the queen greedily, while checking it stays
 * within what it samples for RL to find. Against the scripted opponent it loses 0.056 chip a hand over both seats
 * (0.069 when it always slips), where 0 is possible and a random player loses 0.139.
 */
export function demonstratedMove(card: Card, history: readonly KuhnMove[], coin: number): KuhnMove {
  if (card === "K") return activeMove(history);
  if (card === "J") return passiveMove(history);
  return coin < QUEEN_SLIP || history.at(-1) === "bet" ? activeMove(history) : "check";
}

/** What `seat` sees: its seat and card, the moves so far, and its choices. */
export function describeHand(hand: KuhnHand, seat: Seat): string {
  const moves = hand.history.map((move, i) => `${seatToAct(hand.history.slice(0, i))} ${move}`).join(", ");
  const head = `You are ${seat}, card ${hand.cards[seat]}. Moves: ${moves || "none"}.`;
  if (payoffs(hand) !== null) return head;
  return seatToAct(hand.history) === seat ? `${head} Yours: ${legalMoves(hand.history).join(" or ")}.` : head;
}

/** The table as the trajectory viewer shows it: both cards, the moves, and the result once the hand is over. */
export function renderHand(hand: KuhnHand): string {
  const moves = hand.history.map((move, i) => `${seatToAct(hand.history.slice(0, i))} ${move}`).join(", ");
  const result = payoffs(hand);
  const end = result ? `\nP1 ${signed(result.P1)}, P2 ${signed(result.P2)}${wentToShowdown(hand) ? " at showdown" : ""}` : "";
  return `P1 ${hand.cards.P1} · P2 ${hand.cards.P2}\n${moves || "no moves yet"}${end}`;
}

const signed = (chips: number) => (chips > 0 ? `+${chips}` : String(chips));

function parseMove(text: string, hand: KuhnHand): ParseResult<KuhnMove> {
  const move = text.trim().toLowerCase();
  const legal = legalMoves(hand.history);
  if ((legal as string[]).includes(move)) return { ok: true, action: move as KuhnMove };
  return { ok: false, error: `expected ${legal.join(" or ")}, got ${JSON.stringify(text.trim().slice(0, 20))}` };
}

const RULES = "Kuhn poker: cards J<Q<K, ante 1, bet 1.";

/** An invalid move forfeits the hand and costs as much as losing a called bet. */
const INVALID = { penalty: -2, endEpisode: true };

/**
 * A hand as the environments keep it: `coin`, a uniform draw at the deal that only the demonstrator reads, decides
 * whether it slips in this hand (the demonstrator is a function of the state, and needs its own randomness).
 */
export type KuhnTable = KuhnHand & { coin: number };
/** A hand against the scripted opponent: `seat` is the policy's. */
export type KuhnState = KuhnTable & { seat: Seat };

/** The opponent's moves until the policy's turn or the hand's end. */
function opponentPlays(state: KuhnState, rng: Rng): KuhnState {
  let { history } = state;
  const opponent: Seat = state.seat === "P1" ? "P2" : "P1";
  while (payoffs({ ...state, history }) === null && seatToAct(history) === opponent) {
    history = [...history, scriptedMove(state.cards[opponent], history, rng)];
  }
  return { ...state, history };
}

export const kuhnPoker = defineEnvironment<KuhnState, KuhnMove>({
  name: "kuhn-poker",
  description:
    "Kuhn poker against a scripted opponent playing an equilibrium; the seat alternates by seed. Reward: chips won (−2 to +2). At best 0 a hand on average.",
  data: { kind: "free" },
  systemPrompt: RULES,
  maxTurns: 2,
  invalidAction: INVALID,
  scoreName: "chips",
  reset({ seed, rng }) {
    const seat: Seat = seed % 2 === 0 ? "P1" : "P2";
    const state = opponentPlays({ cards: deal(rng), history: [], seat, coin: rng.uniform() }, rng);
    return { state, observation: describeHand(state, seat) };
  },
  parseAction: (text, state) => parseMove(text, state),
  actions: (state) => legalMoves(state.history),
  step(state, move, { rng }) {
    const next = opponentPlays({ ...state, history: [...state.history, move] }, rng);
    const result = payoffs(next);
    if (!result) return { state: next, observation: describeHand(next, next.seat), reward: 0, done: false };
    const chips = result[next.seat];
    return {
      state: next,
      reward: chips,
      done: true,
      metrics: {
        chips,
        won: chips > 0 ? 1 : 0,
        showdown: wentToShowdown(next) ? 1 : 0,
        folded: next.history.at(-1) === "fold" && seatToAct(next.history.slice(0, -1)) === next.seat ? 1 : 0,
      },
    };
  },
  demonstrate: (state) => demonstratedMove(state.cards[state.seat], state.history, state.coin),
  render: renderHand,
  // chips, not hands won: a player who bluffs at random wins more hands than a sound one and loses more chips
  score: ({ state }) => payoffs(state)?.[state.seat] ?? 0,
});

/**
 * Kuhn poker for two agents, P1 and P2 (`turnBased(["P1", "P2"])`): each sees only its own card (`observe`), the
 * hand's end pays both (`rewards`, zero-sum). The score is P1's: 1 when it wins the hand.
 */
export const kuhnPokerDuel: EnvironmentDefinition<KuhnTable, KuhnMove> = defineEnvironment<KuhnTable, KuhnMove>({
  name: "kuhn-poker-duel",
  description: "Kuhn poker for two agents, P1 and P2; each sees only its own card. Zero-sum: the chips one wins the other loses.",
  data: { kind: "free" },
  // any other name (a tool asking before the seats are known) gets the rules alone
  systemPrompt: (_sample, agent) => (agent === "P1" || agent === "P2" ? `${RULES} You are ${agent}.` : RULES),
  maxTurns: 3,
  invalidAction: INVALID,
  scoreName: "p1_win_rate",
  reset({ rng }) {
    const hand: KuhnTable = { cards: deal(rng), history: [], coin: rng.uniform() };
    return { state: hand, observation: describeHand(hand, "P1") };
  },
  toAct: (hand) => seatToAct(hand.history),
  observe: (hand, agent) => describeHand(hand, asSeat(agent)),
  parseAction: (text, hand) => parseMove(text, hand),
  actions: (hand) => legalMoves(hand.history),
  step(hand, move): StepOutcome<KuhnTable> {
    const actor = seatToAct(hand.history);
    const next: KuhnTable = { ...hand, history: [...hand.history, move] };
    const result = payoffs(next);
    if (!result) return { state: next, observation: describeHand(next, seatToAct(next.history)), rewards: { P1: 0, P2: 0 }, reward: 0, done: false };
    return {
      state: next,
      rewards: { ...result },
      reward: result[actor],
      done: true,
      info: { P1: next.cards.P1, P2: next.cards.P2 },
      metrics: { p1_chips: result.P1, showdown: wentToShowdown(next) ? 1 : 0 },
    };
  },
  demonstrate: (hand, agent) => demonstratedMove(hand.cards[asSeat(agent)], hand.history, hand.coin),
  render: renderHand,
  score: ({ state }) => ((payoffs(state)?.P1 ?? 0) > 0 ? 1 : 0),
});

function asSeat(agent: string): Seat {
  if (agent === "P1" || agent === "P2") return agent;
  throw new Error(`kuhn-poker-duel seats P1 and P2; got agent '${agent}'`);
}
