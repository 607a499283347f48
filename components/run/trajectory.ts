/**
 * What the trajectory viewer derives from stored rollouts: each turn's return and advantage, which action tokens
 * belong to which turn, and the samples as the user filters and sorts them.
 */
import type { ActionConstraint } from "@/lib/sdk/action-space";
import { actingAgentReturns, perTurnGroupNormalized, turnReturns } from "@/lib/rl/advantages";
import { rewardTo, type Trajectory } from "@/lib/sdk/protocol";

export type RolloutItem = {
  groupIndex: number;
  sampleIndex: number;
  prompt: string;
  turns: {
    /** who acted (kept when several agents played) */
    agent?: string;
    /** every agent's reward from the step after this turn (kept when several agents played and the step gave them) */
    rewards?: Record<string, number>;
    /** what the acting agent saw */
    observation: string;
    action: string;
    /** the acting agent's reward */
    reward?: number;
    advantage?: number | null;
    render?: string;
    legalActions?: ActionConstraint;
  }[];
  rewards: Record<string, number>;
  totalReward: number;
  advantage: number | null;
  tokens: number[] | null;
  tokenLogprobs: number[] | null;
  /** each token's text, for an imported model's tokenizer (the byte tokenizer's ids are read in the page) */
  tokenTexts?: string[] | null;
};

export type AlgorithmSettings = { name: string; discount: number; normalizeAdvantages: boolean };

/** The algorithm settings of a run's config, with the SDK's defaults where the config leaves them out. */
export function algorithmOf(config: unknown): AlgorithmSettings {
  const a = ((config as { algorithm?: Record<string, unknown> } | null)?.algorithm ?? {}) as Record<string, unknown>;
  return {
    name: typeof a.name === "string" ? a.name : "grpo",
    discount: typeof a.discount === "number" ? a.discount : 1,
    normalizeAdvantages: typeof a.normalizeAdvantages === "boolean" ? a.normalizeAdvantages : true,
  };
}

type RolloutTurn = RolloutItem["turns"][number];

const asTrajectory = (item: RolloutItem) =>
  ({
    turns: item.turns.map((t) => ({ agent: t.agent ?? "agent", reward: t.reward ?? 0, ...(t.rewards ? { rewards: t.rewards } : {}) })),
    totalReward: item.totalReward,
    agentReturns: {},
  }) as unknown as Trajectory;

/** What `agent` received at a stored turn (the SDK's `rewardTo`). */
const rewardOf = (turn: RolloutTurn, agent: string): number => rewardTo({ agent: turn.agent ?? "", reward: turn.reward ?? 0, rewards: turn.rewards }, agent);

/** The agents of a run's protocol, in the order they act, from its config (none when it names none). */
export function protocolAgentsOf(config: unknown): string[] {
  const agents = (config as { protocol?: { agents?: unknown } } | null)?.protocol?.agents;
  return Array.isArray(agents) ? agents.filter((agent): agent is string => typeof agent === "string") : [];
}

/**
 * The agents of a sample played by several: those of `order` (the protocol's) first, then the others in the order
 * they first act, then any only rewarded. Null for a sample of one agent.
 */
export function agentsOf(item: RolloutItem, order: readonly string[] = []): string[] | null {
  const agents = new Set<string>();
  for (const turn of item.turns) if (turn.agent !== undefined) agents.add(turn.agent);
  for (const turn of item.turns) for (const agent of Object.keys(turn.rewards ?? {})) agents.add(agent);
  if (agents.size <= 1) return null;
  return [...order.filter((agent) => agents.has(agent)), ...[...agents].filter((agent) => !order.includes(agent))];
}

/** Each agent's return over the sample (`Trajectory.agentReturns` as the episode summed it); null for one agent. */
export function agentReturnsOf(item: RolloutItem, order: readonly string[] = []): Record<string, number> | null {
  const agents = agentsOf(item, order);
  if (!agents) return null;
  return Object.fromEntries(agents.map((agent) => [agent, item.turns.reduce((sum, turn) => sum + rewardOf(turn, agent), 0)]));
}

/**
 * Each turn's discounted return G_t = r_t + γ·G_{t+1}; with several agents, the acting agent's own (its rewards from
 * every later step, the other agents' included).
 */
export const returnsOf = (item: RolloutItem, discount: number) =>
  agentsOf(item) ? actingAgentReturns(asTrajectory(item), discount) : turnReturns(asTrajectory(item), discount);

/**
 * Each turn's advantage as the algorithm computed it. Training rollouts keep every turn's, as the worker wrote
 * it. Rows written before turns kept theirs hold one advantage per sample (its first turn's); the rest follow
 * from the group: GRPO and RLOO give every turn the episode's advantage, GRPO per turn
 * centres each turn's return on the group's (recomputed here from the stored rewards), REINFORCE subtracts one
 * baseline from every turn's return. PPO's come from its value head, which is not stored: only the first turn's
 * is known. Null where unknown (evaluation rollouts have none).
 */
export function turnAdvantages(item: RolloutItem, group: RolloutItem[], algorithm: AlgorithmSettings): (number | null)[] {
  const n = item.turns.length;
  if (n > 0 && item.turns.every((turn) => typeof turn.advantage === "number")) return item.turns.map((turn) => turn.advantage as number);
  if (item.advantage === null) return new Array(n).fill(null);
  switch (algorithm.name) {
    case "grpo-per-turn": {
      const all = perTurnGroupNormalized([group.map(asTrajectory)], algorithm.discount, algorithm.normalizeAdvantages)[0]!;
      return all[group.indexOf(item)] ?? new Array(n).fill(null);
    }
    case "reinforce": {
      const returns = returnsOf(item, algorithm.discount);
      const baseline = (returns[0] ?? 0) - item.advantage;
      return returns.map((g) => g - baseline);
    }
    case "ppo":
      return item.turns.map((_, t) => (t === 0 ? item.advantage : null));
    default:
      return new Array(n).fill(item.advantage);
  }
}

const decoder = new TextDecoder();
const decodeBytes = (bytes: number[]) => decoder.decode(Uint8Array.from(bytes));

/**
 * The turn each action token belongs to. The store keeps all of a sample's action tokens in one list; a turn's
 * tokens are those whose bytes spell its action, and the special token (end of turn) after them. Null when the
 * tokens do not spell the actions in order (then only the whole sample's values apply).
 */
export function tokenTurns(item: RolloutItem): number[] | null {
  const tokens = item.tokens ?? [];
  if (item.turns.length === 1) return tokens.map(() => 0);
  const out: number[] = [];
  let i = 0;
  for (const [t, turn] of item.turns.entries()) {
    const bytes: number[] = [];
    while (decodeBytes(bytes) !== turn.action) {
      if (i >= tokens.length) return null;
      const token = tokens[i]!;
      if (token < 256) bytes.push(token);
      out.push(t);
      i++;
    }
    // Its end-of-turn token, when it has one (an action cut at the token limit has none).
    if (i < tokens.length && tokens[i]! >= 256) out.push(t), i++;
  }
  return i === tokens.length ? out : null;
}

export type SortKey = "sample" | "reward-desc" | "reward-asc" | "advantage-desc" | "advantage-asc";
export const SORTS: Record<SortKey, string> = {
  sample: "group, sample",
  "reward-desc": "reward, highest first",
  "reward-asc": "reward, lowest first",
  "advantage-desc": "advantage, highest first",
  "advantage-asc": "advantage, lowest first",
};

/** The samples whose total reward lies in [min, max] (either bound may be absent), in the chosen order. */
export function filterAndSort<T extends Pick<RolloutItem, "groupIndex" | "sampleIndex" | "totalReward" | "advantage">>(
  items: T[],
  { min, max, sort }: { min: number | null; max: number | null; sort: SortKey },
): T[] {
  const kept = items.filter((item) => (min === null || item.totalReward >= min) && (max === null || item.totalReward <= max));
  const bySample = (a: T, b: T) => a.groupIndex - b.groupIndex || a.sampleIndex - b.sampleIndex;
  const adv = (x: T) => x.advantage ?? -Infinity;
  const order: Record<SortKey, (a: T, b: T) => number> = {
    sample: bySample,
    "reward-desc": (a, b) => b.totalReward - a.totalReward || bySample(a, b),
    "reward-asc": (a, b) => a.totalReward - b.totalReward || bySample(a, b),
    "advantage-desc": (a, b) => adv(b) - adv(a) || bySample(a, b),
    "advantage-asc": (a, b) => adv(a) - adv(b) || bySample(a, b),
  };
  return kept.sort(order[sort]);
}
