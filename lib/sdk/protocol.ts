/**
 * Interaction protocols: who acts when. A protocol drives many episodes in lockstep: each round it asks every
 * live episode's current agent for an action, hands all requests to `act` at once (so the sampler sees one large
 * batch), and waits for every answer before any episode moves on (the barrier of the turn-based protocol).
 */
import type { ChatMessage } from "@/lib/model/chat";
import type { ActionConstraint } from "./action-space";
import type { DatasetRow, EnvironmentSession, Json } from "./environment";

export type ProtocolName = "single-turn" | "multi-turn" | "turn-based";

export type Protocol = {
  name: ProtocolName;
  /** The agents, in the order they act. Single- and multi-turn protocols have one. */
  agents: string[];
  /**
   * What an agent's prompt holds: "full", the whole conversation so far; "last", the system prompt and the latest
   * observation only (for environments whose observation already shows the whole state, like a board).
   */
  history: "full" | "last";
};

export const singleTurn = (agent = "agent"): Protocol => ({ name: "single-turn", agents: [agent], history: "full" });
export const multiTurn = (agent = "agent", history: Protocol["history"] = "full"): Protocol => ({ name: "multi-turn", agents: [agent], history });
/** Several agents acting in order on one shared environment. */
export function turnBased(agents: string[]): Protocol {
  if (agents.length < 2) throw new Error(`turnBased needs at least two agents; got ${agents.length}`);
  if (new Set(agents).size !== agents.length) throw new Error(`turnBased agents must have distinct names; got ${agents.join(", ")}`);
  return { name: "turn-based", agents, history: "full" };
}

/** One agent's turn to act: its prompt, and the legal actions when the environment declares them. */
export type ActRequest = { episode: number; agent: string; messages: ChatMessage[]; legalActions?: ActionConstraint | null };
/**
 * What the policy returns for one request: its text and, when a model produced it, the tokens and logprobs, and
 * under a constraint the token ids that were allowed at each of its tokens.
 */
export type ActResponse = { text: string; promptTokens?: number[]; tokens?: number[]; logprobs?: number[]; allowedTokens?: number[][] };

export type Turn = {
  agent: string;
  observation: string;
  action: string;
  reward: number;
  promptTokens: number[];
  actionTokens: number[];
  actionLogprobs: number[];
  /** The legal actions the policy was held to, when the environment declares them. */
  legalActions?: ActionConstraint;
  /** Under legal actions: the token ids allowed at each action token (what `forward` must softmax over). */
  allowedTokens?: number[][];
  /** The environment's picture after the action, if it draws one. */
  render?: string;
  info: Record<string, Json>;
};

export type Trajectory = {
  seed: number;
  sample?: DatasetRow;
  systemPrompt: string;
  turns: Turn[];
  /** Sum of the step rewards (per agent for turn-based protocols: see agentReturns). */
  totalReward: number;
  /** The return split by reward function: "env" for the step rewards, then each of the environment's functions. */
  rewards: Record<string, number>;
  agentReturns: Record<string, number>;
  score: number;
  truncated: boolean;
  invalidActions: number;
  /** Per-episode sums of the metrics the environment reported. */
  metrics: Record<string, number>;
  /** The environment's picture of the first state. */
  initialRender?: string;
};

// sessions of any environment mix in one batch
/** One episode to play: its session, seed, dataset row, and level of difficulty (when the environment declares levels). */
export type EpisodeStart = { session: EnvironmentSession<any, any, any>; seed: number; sample?: DatasetRow; difficulty?: number };

/**
 * Runs every episode to its end. `act` receives all pending requests of a round at once. An episode whose
 * prompt outgrows `fitsContext` ends, truncated, instead of failing the batch.
 */
export async function runEpisodes(
  protocol: Protocol,
  starts: EpisodeStart[],
  act: (requests: ActRequest[]) => Promise<ActResponse[]>,
  options: { fitsContext?: (messages: ChatMessage[]) => boolean } = {},
): Promise<Trajectory[]> {
  type Live = {
    start: EpisodeStart;
    histories: Map<string, ChatMessage[]>;
    pendingObservation: string;
    trajectory: Trajectory;
    done: boolean;
    round: number;
  };
  const live: Live[] = starts.map(({ session, seed, sample, difficulty }) => {
    const observation = session.reset(seed, sample, difficulty);
    const systemPrompt = session.systemPrompt;
    const histories = new Map(protocol.agents.map((agent) => [agent, [{ role: "system", content: systemPrompt } as ChatMessage]]));
    return {
      start: { session, seed, sample },
      histories,
      pendingObservation: observation,
      done: false,
      round: 0,
      trajectory: {
        seed,
        sample,
        systemPrompt,
        turns: [],
        totalReward: 0,
        rewards: { env: 0 },
        agentReturns: Object.fromEntries(protocol.agents.map((a) => [a, 0])),
        score: 0,
        truncated: false,
        invalidActions: 0,
        metrics: {},
        initialRender: session.render(),
      },
    };
  });

  while (live.some((episode) => !episode.done)) {
    const requests: ActRequest[] = [];
    const asked: Live[] = [];
    for (const [index, episode] of live.entries()) {
      if (episode.done) continue;
      const agent = protocol.agents[episode.round % protocol.agents.length]!;
      const history = episode.histories.get(agent)!;
      const messages: ChatMessage[] = [...history, { role: "user", content: episode.pendingObservation }];
      if (options.fitsContext && !options.fitsContext(messages)) {
        finish(episode, true);
        continue;
      }
      const legalActions = episode.start.session.legalActions?.() ?? null;
      requests.push(legalActions ? { episode: index, agent, messages, legalActions } : { episode: index, agent, messages });
      asked.push(episode);
    }
    if (requests.length === 0) break;
    const responses = await act(requests);
    if (responses.length !== requests.length) {
      throw new Error(`act answered ${responses.length} requests; it was asked ${requests.length}`);
    }
    for (const [i, episode] of asked.entries()) {
      const request = requests[i]!;
      const response = responses[i]!;
      const result = episode.start.session.step(response.text);
      const history = episode.histories.get(request.agent)!;
      if (protocol.history === "full") {
        history.push({ role: "user", content: episode.pendingObservation }, { role: "assistant", content: response.text });
      }
      episode.trajectory.turns.push({
        agent: request.agent,
        observation: episode.pendingObservation,
        action: response.text,
        reward: result.reward,
        promptTokens: response.promptTokens ?? [],
        actionTokens: response.tokens ?? [],
        actionLogprobs: response.logprobs ?? [],
        ...(request.legalActions ? { legalActions: request.legalActions } : {}),
        ...(response.allowedTokens ? { allowedTokens: response.allowedTokens } : {}),
        render: episode.start.session.render(),
        info: result.info,
      });
      episode.trajectory.totalReward += result.reward;
      episode.trajectory.agentReturns[request.agent]! += result.reward;
      for (const [name, value] of Object.entries(result.metrics)) {
        episode.trajectory.metrics[name] = (episode.trajectory.metrics[name] ?? 0) + value;
      }
      episode.round += 1;
      const cutShort = protocol.name === "single-turn" && !result.done;
      if (result.done || cutShort) finish(episode, cutShort || result.info.truncated === true);
      else episode.pendingObservation = result.observation ?? "";
    }
  }
  return live.map((episode) => episode.trajectory);

  function finish(episode: Live, truncated: boolean) {
    episode.done = true;
    episode.trajectory.truncated = truncated;
    episode.trajectory.invalidActions = episode.start.session.invalidActions;
    episode.trajectory.rewards = episode.start.session.rewardBreakdown();
    episode.trajectory.score = episode.trajectory.turns.length > 0 ? episode.start.session.score() : 0;
  }
}
