/**
 * Split the pot: a Nash demand game over up to three rounds. Two players, A and B, each demand a whole number of
 * coins at once, unseen by the other. If the demands fit in the pot, each gets its demand and the game ends;
 * if they exceed it, nothing is paid, the pot shrinks (10, then 8, then 6 coins) and they demand again. A third
 * clash ends the game with nothing for either.
 *
 * Mixed motives: each wants more for itself, and both lose when they clash, so the sum of the two payoffs (how much
 * of the pot was not wasted) matters beside each one's own. Each earns its coins as a share of the first pot,
 * coins / 10.
 *
 * Simultaneous by nature: a demand is sealed until both are in (`stepTogether` under `simultaneous(["A", "B"])`).
 * Under `turnBased(["A", "B"])`, as the episode player plays a duel, A and B seal their demands one after the
 * other (`step`) and neither sees the other's before the round is settled.
 *
 * Two environments: `split-pot`, the policy against a scripted counterpart that asks for 6 of 10, then 3 of 8,
 * then 2 of 6 (a hard opener that gives way), and `split-pot-duel` for two agents.
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment, type EnvironmentDefinition, type ParseResult, type StepOutcome } from "@/lib/sdk/environment";

export const POTS = [10, 8, 6] as const;
export type Bargainer = "A" | "B";
export const BARGAINERS: readonly [Bargainer, Bargainer] = ["A", "B"];

/** Each round's demands so far; `sealed` holds this round's demands made but not yet settled (turn-based play). */
export type SplitState = {
  round: number;
  clashes: { A: number; B: number }[];
  sealed: Partial<Record<Bargainer, number>>;
  /** Coins paid once the game is over (zeros after a third clash); null while it goes on. */
  coins: Record<Bargainer, number> | null;
  /** Each player's uniform draw at the start, which only the demonstrator reads (it is a function of the state). */
  coin: Record<Bargainer, number>;
};

/** The scripted counterpart's demand in each round: 6 of 10, 3 of 8, 2 of 6. */
export const COUNTERPART_DEMANDS = [6, 3, 2] as const;

/**
 * The demonstrator for `player`: half the pot every round, except in the games whose coin (the player's uniform
 * draw at the start) is below 0.2, where it asks one coin less, or above 0.8, one more. Against the scripted counterpart the fair
 * demand clashes once (5 + 6 > 10) and then gets 4 of 8; asking one less gets 4 at once, with nothing wasted;
 * asking one more holds out and gets 5 of 8. Its share is 0.42 on average; 0.5 is the most anyone gets from the
 * counterpart. Two of it agree at once unless one asks more.
 */
export function demonstratedDemand(state: SplitState, player: Bargainer): number {
  const half = Math.floor(POTS[state.round]! / 2);
  const coin = state.coin[player];
  return coin < 0.2 ? half - 1 : coin > 0.8 ? half + 1 : half;
}

const potOf = (state: SplitState) => POTS[state.round]!;

/** The round settled on both demands: paid if they fit the pot, else the next round (or nothing after the last). */
export function settle(state: SplitState, demands: Record<Bargainer, number>): SplitState {
  const pot = potOf(state);
  if (demands.A + demands.B <= pot) return { ...state, sealed: {}, coins: { A: demands.A, B: demands.B } };
  const clashes = [...state.clashes, { A: demands.A, B: demands.B }];
  if (state.round + 1 >= POTS.length) return { ...state, clashes, sealed: {}, coins: { A: 0, B: 0 } };
  return { ...state, round: state.round + 1, clashes, sealed: {}, coins: null };
}

/** What `player` sees: the round, the pot, the last clash, and the demands it may make. */
export function describeFor(state: SplitState, player: Bargainer): string {
  const other: Bargainer = player === "A" ? "B" : "A";
  const last = state.clashes.at(-1);
  const clash = last ? ` Clash: you ${last[player]}, other ${last[other]}.` : "";
  return `Round ${state.round + 1}/${POTS.length}, pot ${potOf(state)}.${clash} Demand 0-${potOf(state)}.`;
}

/** Whether a finished game ended in a deal (a round whose demands fit), not in a third clash. */
const agreed = (state: SplitState) => state.coins !== null && state.clashes.length < POTS.length;

export function renderSplit(state: SplitState): string {
  const lines = state.clashes.map((clash, round) => `round ${round + 1}, pot ${POTS[round]}: A ${clash.A}, B ${clash.B}: clash`);
  if (agreed(state)) lines.push(`round ${state.round + 1}, pot ${potOf(state)}: A ${state.coins!.A}, B ${state.coins!.B}: paid`);
  else if (state.coins) lines.push("nothing paid");
  else lines.push(`round ${state.round + 1}, pot ${potOf(state)}: demands ${Object.keys(state.sealed).length} of 2 in`);
  return lines.join("\n");
}

/** Every demand the current pot allows: "0" to its size. */
const demandsOf = (state: SplitState): string[] => Array.from({ length: potOf(state) + 1 }, (_, coins) => String(coins));

function parseDemand(text: string, state: SplitState): ParseResult<number> {
  const word = text.trim();
  if (/^\d{1,2}$/.test(word) && Number(word) <= potOf(state)) return { ok: true, action: Number(word) };
  return { ok: false, error: `expected a demand from 0 to ${potOf(state)}, got ${JSON.stringify(word.slice(0, 20))}` };
}

const RULES = "Split the pot: demand coins; if both demands fit, each gets its own, else the pot shrinks.";

const fresh = (rng: Rng): SplitState => ({ round: 0, clashes: [], sealed: {}, coins: null, coin: { A: rng.uniform(), B: rng.uniform() } });

const payoffMetrics = (coins: Record<Bargainer, number>, state: SplitState) => ({
  agreed: agreed(state) ? 1 : 0,
  coins_a: coins.A,
  coins_b: coins.B,
  coins_total: coins.A + coins.B,
  clashes: state.clashes.length,
});

/** The policy (A) against the scripted counterpart (B). */
export const splitPot = defineEnvironment<SplitState, number>({
  name: "split-pot",
  description:
    "Split 10 coins with a scripted counterpart: both demand at once, a clash shrinks the pot to 8, then 6. It asks 6, then 3, then 2. Reward: your coins / 10.",
  data: { kind: "free" },
  systemPrompt: RULES,
  maxTurns: POTS.length,
  scoreName: "share",
  reset({ rng }) {
    const state = fresh(rng);
    return { state, observation: describeFor(state, "A") };
  },
  parseAction: parseDemand,
  actions: demandsOf,
  step(state, demand) {
    const next = settle(state, { A: demand, B: COUNTERPART_DEMANDS[state.round]! });
    if (!next.coins) return { state: next, observation: describeFor(next, "A"), reward: 0, done: false };
    return { state: next, reward: next.coins.A / POTS[0], done: true, metrics: payoffMetrics(next.coins, next) };
  },
  demonstrate: (state) => String(demonstratedDemand(state, "A")),
  render: renderSplit,
  score: ({ state }) => (state.coins?.A ?? 0) / POTS[0],
});

/**
 * The step after a settled round, `actor` the player whose demand settled it (null when both moved at once): each
 * player's coins / 10 once the game is over, else the next round, which A opens.
 */
function afterRound(next: SplitState, actor: Bargainer | null): StepOutcome<SplitState> {
  if (!next.coins) return { state: next, observation: describeFor(next, "A"), rewards: { A: 0, B: 0 }, reward: 0, done: false };
  const rewards = { A: next.coins.A / POTS[0], B: next.coins.B / POTS[0] };
  return { state: next, rewards, reward: actor ? rewards[actor] : 0, done: true, metrics: payoffMetrics(next.coins, next) };
}

/**
 * Split the pot for two agents, A and B. The score is A's share; `coins_total` in the metrics is how much of the
 * pot the two kept between them.
 */
export const splitPotDuel: EnvironmentDefinition<SplitState, number> = defineEnvironment<SplitState, number>({
  name: "split-pot-duel",
  description: "Split 10 coins between two agents, A and B: both demand at once; a clash shrinks the pot to 8, then 6, then ends the game.",
  data: { kind: "free" },
  // any other name (a tool asking before the seats are known) gets the rules alone
  systemPrompt: (_sample, agent) => (agent === "A" || agent === "B" ? `${RULES} You are ${agent}.` : RULES),
  maxTurns: 2 * POTS.length,
  scoreName: "share_a",
  reset({ rng }) {
    const state = fresh(rng);
    return { state, observation: describeFor(state, "A") };
  },
  toAct: (state) => (state.sealed.A === undefined ? "A" : "B"),
  observe: (state, agent) => describeFor(state, asBargainer(agent)),
  parseAction: (text, state) => parseDemand(text, state),
  actions: (state) => demandsOf(state),
  stepTogether(state, demands) {
    return afterRound(settle(state, { A: demands.A!, B: demands.B! }), null);
  },
  step(state, demand, { agent }) {
    const actor = asBargainer(agent);
    const sealed = { ...state.sealed, [actor]: demand };
    if (sealed.A === undefined || sealed.B === undefined) {
      const next = { ...state, sealed };
      // nothing is settled yet: the other player sees the same round, never this demand
      return { state: next, observation: describeFor(next, actor === "A" ? "B" : "A"), reward: 0, done: false };
    }
    return afterRound(settle(state, { A: sealed.A, B: sealed.B }), actor);
  },
  demonstrate: (state, agent) => String(demonstratedDemand(state, asBargainer(agent))),
  render: renderSplit,
  score: ({ state }) => (state.coins?.A ?? 0) / POTS[0],
});

function asBargainer(agent: string): Bargainer {
  if (agent === "A" || agent === "B") return agent;
  throw new Error(`split-pot-duel seats A and B; got agent '${agent}'`);
}
