/**
 * Interaction protocols: who acts when. A protocol drives many episodes in lockstep: each round it asks every
 * live episode's current agent for an action, hands all requests to `act` at once (so the sampler sees one large
 * batch), and waits for every answer before any episode moves on (the barrier of the turn-based protocol).
 */
import type { ChatMessage } from "@/lib/model/chat";
import type { ActionConstraint } from "./action-space";
import type { DatasetRow, EnvironmentSession, Json, Seats } from "./environment";

export const protocolNames = ["single-turn", "multi-turn", "turn-based", "simultaneous"] as const;
export type ProtocolName = (typeof protocolNames)[number];

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
/**
 * Several agents taking turns on one environment: the environment's `toAct(state)` says who acts next, else they act
 * in this order.
 */
export function turnBased(agents: string[], history: Protocol["history"] = "full"): Protocol {
  checkAgents("turnBased", agents);
  return { name: "turn-based", agents, history };
}

/**
 * Several agents acting at once: each round every agent is asked once, then the environment moves once on all
 * their actions (`stepTogether`).
 */
export function simultaneous(agents: string[], history: Protocol["history"] = "full"): Protocol {
  checkAgents("simultaneous", agents);
  return { name: "simultaneous", agents, history };
}

/** Whether a protocol seats several agents (its turns carry per-agent rewards and observations). */
export function hasSeveralAgents(protocol: Pick<Protocol, "name">): boolean {
  return protocol.name === "turn-based" || protocol.name === "simultaneous";
}

function checkAgents(maker: string, agents: string[]): void {
  if (agents.length < 2) throw new Error(`${maker} needs at least two agents; got ${agents.length}`);
  if (new Set(agents).size !== agents.length) throw new Error(`${maker} agents must have distinct names; got ${agents.join(", ")}`);
}

/** One agent's turn to act: its prompt, and the legal actions when the environment declares them. */
export type ActRequest = { episode: number; agent: string; messages: ChatMessage[]; legalActions?: ActionConstraint | null };
/**
 * What the policy returns for one request: its text and, when a model produced it, the tokens and logprobs, and
 * under a constraint the token ids that were allowed at each of its tokens.
 */
export type ActResponse = { text: string; promptTokens?: number[]; tokens?: number[]; logprobs?: number[]; allowedTokens?: number[][] };

export type Turn = {
  /** Who acted. */
  agent: string;
  /** What the acting agent saw (its own view, `observe(state, agent)`, when the environment defines one). */
  observation: string;
  action: string;
  /** The acting agent's reward at this turn. */
  reward: number;
  /**
   * Every agent's reward from the environment step that followed this turn, when the step gave per-agent
   * rewards; in a simultaneous round the round's step follows its last turn, so the earlier turns carry none.
   * Read one agent's reward of a turn with `rewardTo`.
   */
  rewards?: Record<string, number>;
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
  /** The system prompt (the first agent's, when each agent has its own: see systemPrompts). */
  systemPrompt: string;
  /** Each agent's system prompt, when the environment's systemPrompt is a function of the agent. */
  systemPrompts?: Record<string, string>;
  turns: Turn[];
  /** Sum of every reward of the episode, all agents together (split by agent in agentReturns). */
  totalReward: number;
  /** The return split by reward function: "env" for the step rewards, then each of the environment's functions. */
  rewards: Record<string, number>;
  /** Each agent's return: the sum over turns of `rewardTo(turn, agent)`. */
  agentReturns: Record<string, number>;
  score: number;
  truncated: boolean;
  invalidActions: number;
  /** Per-episode sums of the metrics the environment reported. */
  metrics: Record<string, number>;
  /** The environment's picture of the first state. */
  initialRender?: string;
};

/**
 * One agent's reward at one turn: its entry in the turn's per-agent rewards when the turn has them, else the
 * turn's reward if it acted. Summed over a trajectory's turns, the agent's return (`agentReturns`).
 */
export function rewardTo(turn: Pick<Turn, "agent" | "reward" | "rewards">, agent: string): number {
  return turn.rewards ? (turn.rewards[agent] ?? 0) : turn.agent === agent ? turn.reward : 0;
}

// sessions of any environment mix in one batch
/** One episode to play: its session, seed, dataset row, and level of difficulty (when the environment declares levels). */
export type EpisodeStart = { session: EnvironmentSession<any, any, any>; seed: number; sample?: DatasetRow; difficulty?: number };

/**
 * The barrier of a simultaneous round: admits exactly one action per agent, then hands the round over whole. A
 * second action from the same agent, an unknown agent, or a round closed with an agent missing is an error.
 */
export class RoundBarrier {
  private readonly actions: Record<string, string> = {};

  constructor(private readonly agents: readonly string[]) {}

  admit(agent: string, text: string): void {
    if (!this.agents.includes(agent)) throw new Error(`an action from '${agent}', which is not an agent of this round (${this.agents.join(", ")})`);
    if (Object.hasOwn(this.actions, agent)) throw new Error(`agent '${agent}' acted twice in one round; each agent acts exactly once a round`);
    this.actions[agent] = text;
  }

  /** Every agent's action, by agent; throws naming the agents that have not acted. */
  close(): Record<string, string> {
    const missing = this.agents.filter((agent) => !Object.hasOwn(this.actions, agent));
    if (missing.length > 0)
      throw new Error(`the round is missing the action of ${missing.map((agent) => `'${agent}'`).join(", ")}; each agent acts exactly once a round`);
    return this.actions;
  }
}

/**
 * Runs every episode to its end. `act` receives all pending requests of a round at once. An episode whose
 * prompt outgrows `fitsContext` ends, truncated, instead of failing the batch (`fitsContext` is told whose prompt it
 * is: where a person plays one side, only the policy's prompts need fit its context).
 *
 * Turn-based protocols ask one agent of each episode per round (the session's agent to act: the environment's
 * `toAct`, else the protocol's order); the simultaneous protocol asks every agent of each episode, and the round's
 * actions pass a barrier (exactly one per agent) before the environment moves once on all of them.
 */
export async function runEpisodes(
  protocol: Protocol,
  starts: EpisodeStart[],
  act: (requests: ActRequest[]) => Promise<ActResponse[]>,
  options: { fitsContext?: (messages: ChatMessage[], agent: string) => boolean } = {},
): Promise<Trajectory[]> {
  const seats: Seats = { agents: protocol.agents, simultaneous: protocol.name === "simultaneous" };
  type Live = {
    start: EpisodeStart;
    histories: Map<string, ChatMessage[]>;
    /** What the agent to act sees at its turn (turn-based). */
    pendingObservation: string;
    /** What each agent sees at the next round (simultaneous). */
    views: Record<string, string>;
    trajectory: Trajectory;
    done: boolean;
    round: number;
  };
  const live: Live[] = starts.map(({ session, seed, sample, difficulty }) => {
    const observation = session.reset(seed, sample, difficulty, seats);
    const prompts = protocol.agents.map((agent) => (session.systemPromptOf ? session.systemPromptOf(agent) : session.systemPrompt));
    const histories = new Map(protocol.agents.map((agent, i) => [agent, [{ role: "system", content: prompts[i]! } as ChatMessage]]));
    const views: Record<string, string> = {};
    if (seats.simultaneous) for (const agent of protocol.agents) views[agent] = session.observationOf(agent);
    return {
      start: { session, seed, sample },
      histories,
      pendingObservation: observation,
      views,
      done: false,
      round: 0,
      trajectory: {
        seed,
        sample,
        systemPrompt: prompts[0]!,
        ...(prompts.some((prompt) => prompt !== prompts[0])
          ? { systemPrompts: Object.fromEntries(protocol.agents.map((agent, i) => [agent, prompts[i]!])) }
          : {}),
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
    /** The episodes asked this round, with where their requests start and the picture each agent acted on. */
    const asked: { episode: Live; from: number; render: string | undefined }[] = [];
    for (const [index, episode] of live.entries()) {
      if (episode.done) continue;
      const { session } = episode.start;
      const agents = seats.simultaneous ? protocol.agents : [actorOf(episode)];
      const own: ActRequest[] = [];
      for (const agent of agents) {
        const observation = seats.simultaneous ? episode.views[agent]! : episode.pendingObservation;
        const messages: ChatMessage[] = [...episode.histories.get(agent)!, { role: "user", content: observation }];
        if (options.fitsContext && !options.fitsContext(messages, agent)) break;
        const legalActions = (seats.simultaneous ? session.legalActions(agent) : session.legalActions?.()) ?? null;
        own.push(legalActions ? { episode: index, agent, messages, legalActions } : { episode: index, agent, messages });
      }
      if (own.length < agents.length) {
        finish(episode, true);
        continue;
      }
      asked.push({ episode, from: requests.length, render: seats.simultaneous ? session.render() : undefined });
      requests.push(...own);
    }
    if (requests.length === 0) break;
    const responses = await act(requests);
    if (responses.length !== requests.length) {
      throw new Error(`act answered ${responses.length} requests; it was asked ${requests.length}`);
    }
    for (const { episode, from, render } of asked) {
      if (seats.simultaneous)
        playRound(episode, requests.slice(from, from + protocol.agents.length), responses.slice(from, from + protocol.agents.length), render);
      else playTurn(episode, requests[from]!, responses[from]!);
    }
  }
  return live.map((episode) => episode.trajectory);

  /** The agent to act: the session's (sessions that do not track it, such as the browser's sandboxed one, rotate). */
  function actorOf(episode: Live): string {
    const session = episode.start.session as { agent?: string | null };
    return session.agent ?? protocol.agents[episode.round % protocol.agents.length]!;
  }

  function playTurn(episode: Live, request: ActRequest, response: ActResponse) {
    const result = episode.start.session.step(response.text);
    const history = episode.histories.get(request.agent)!;
    if (protocol.history === "full") {
      history.push({ role: "user", content: episode.pendingObservation }, { role: "assistant", content: response.text });
    }
    const turn = turnOf(request, response, episode.pendingObservation, result.reward, episode.start.session.render(), result.info);
    if (result.rewards) turn.rewards = result.rewards;
    credit(episode, turn);
    addMetrics(episode, result.metrics);
    episode.round += 1;
    const cutShort = protocol.name === "single-turn" && !result.done;
    if (result.done || cutShort) finish(episode, cutShort || result.info.truncated === true);
    else episode.pendingObservation = result.observation ?? "";
  }

  /** A simultaneous round: the actions pass the barrier, the environment moves once, the round's rewards land on its last turn. */
  function playRound(episode: Live, requests: ActRequest[], responses: ActResponse[], renderBefore: string | undefined) {
    const barrier = new RoundBarrier(protocol.agents);
    for (const [i, request] of requests.entries()) barrier.admit(request.agent, responses[i]!.text);
    const { session } = episode.start;
    const result = session.stepTogether(barrier.close());
    const { invalid: _invalid, ...roundInfo } = result.info;
    for (const [i, request] of requests.entries()) {
      const last = i === requests.length - 1;
      const { agent } = request;
      const response = responses[i]!;
      const observation = episode.views[agent]!;
      if (protocol.history === "full") {
        episode.histories.get(agent)!.push({ role: "user", content: observation }, { role: "assistant", content: response.text });
      }
      const invalid = result.invalid[agent];
      const info = { ...(last ? roundInfo : {}), ...(invalid === undefined ? {} : { invalid }) };
      const turn = turnOf(request, response, observation, last ? (result.rewards[agent] ?? 0) : 0, last ? session.render() : renderBefore, info);
      if (last) turn.rewards = result.rewards;
      credit(episode, turn);
    }
    addMetrics(episode, result.metrics);
    episode.round += 1;
    if (result.done) finish(episode, result.info.truncated === true);
    else episode.views = result.observations!;
  }

  function turnOf(
    request: ActRequest,
    response: ActResponse,
    observation: string,
    reward: number,
    render: string | undefined,
    info: Record<string, Json>,
  ): Turn {
    return {
      agent: request.agent,
      observation,
      action: response.text,
      reward,
      promptTokens: response.promptTokens ?? [],
      actionTokens: response.tokens ?? [],
      actionLogprobs: response.logprobs ?? [],
      ...(request.legalActions ? { legalActions: request.legalActions } : {}),
      ...(response.allowedTokens ? { allowedTokens: response.allowedTokens } : {}),
      render,
      info,
    };
  }

  /** Adds a turn, and its rewards to the episode's total and each agent's return: each reward once. */
  function credit(episode: Live, turn: Turn) {
    const { trajectory } = episode;
    trajectory.turns.push(turn);
    if (!turn.rewards) {
      trajectory.totalReward += turn.reward;
      trajectory.agentReturns[turn.agent]! += turn.reward;
      return;
    }
    for (const [agent, reward] of Object.entries(turn.rewards)) {
      if (!Object.hasOwn(trajectory.agentReturns, agent)) {
        throw new Error(`a reward for '${agent}', which is not an agent of the protocol (${protocol.agents.join(", ")})`);
      }
      trajectory.agentReturns[agent]! += reward;
      trajectory.totalReward += reward;
    }
  }

  function addMetrics(episode: Live, metrics: Record<string, number>) {
    for (const [name, value] of Object.entries(metrics)) {
      episode.trajectory.metrics[name] = (episode.trajectory.metrics[name] ?? 0) + value;
    }
  }

  function finish(episode: Live, truncated: boolean) {
    episode.done = true;
    episode.trajectory.truncated = truncated;
    episode.trajectory.invalidActions = episode.start.session.invalidActions;
    episode.trajectory.rewards = episode.start.session.rewardBreakdown();
    episode.trajectory.score = episode.trajectory.turns.length > 0 ? episode.start.session.score() : 0;
  }
}
