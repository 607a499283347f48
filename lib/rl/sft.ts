/** Supervised fine-tuning: cross-entropy on the agent's own tokens of demonstration conversations. */
import { renderChat, type ChatMessage } from "@/lib/model/chat";
import { Rng } from "@/lib/model/rng";
import type { DatasetRow } from "@/lib/sdk/environment";
import { learningRateAt, type ExperimentConfig } from "@/lib/sdk/experiment";
import { runEpisodes, type EpisodeStart, type Protocol, type Trajectory } from "@/lib/sdk/protocol";
import { checkpointSchedule } from "./checkpoint-schedule";
import { evaluateAndReport } from "./evaluate";
import type { PolicyModel } from "./primitives";
import { chunkBatch, type EnvironmentInfo, type EpisodePlayer } from "./rollouts";
import { evaluationSpecs, splitDataset, type TrainingHooks } from "./train";
import { separateSeats } from "./seats";
import { CHUNK_SEQUENCES, madeTogether } from "./update";

export type Conversation = ChatMessage[];
export { parseConversations } from "@/lib/sdk/dataset";

/**
 * Renders conversations with the chat template; the loss mask keeps only the assistant's tokens, unless
 * `promptWeight` gives the other tokens (system and user turns) a weight of their own.
 */
export function renderConversations(policy: PolicyModel, conversations: Conversation[], promptWeight = 0) {
  const tokens: number[][] = [];
  const weights: number[][] = [];
  for (const [i, conversation] of conversations.entries()) {
    const rendered = renderChat(policy.tokenizer, conversation);
    if (rendered.tokens.length > policy.contextLength) {
      throw new Error(`conversation ${i} is ${rendered.tokens.length} tokens; the model's context holds ${policy.contextLength}`);
    }
    tokens.push(rendered.tokens);
    weights.push(promptWeight > 0 ? rendered.lossMask.map((m, t) => (m === 1 ? 1 : t === 0 ? 0 : promptWeight)) : rendered.lossMask);
  }
  return { tokens, weights };
}

/** One optimizer step of SFT on a batch of conversations; returns the mean token loss before the step. */
export async function sftStep(
  policy: PolicyModel,
  conversations: Conversation[],
  options: { learningRate: number; weightDecay?: number; gradClip?: number; promptWeight?: number },
): Promise<Record<string, number>> {
  const batch = renderConversations(policy, conversations, options.promptWeight);
  let lossSum = 0;
  let tokens = 0;
  // Made together, then awaited: one request of a remote session (lib/rl/update.ts, `madeTogether`).
  const passes = chunkBatch(batch, CHUNK_SEQUENCES).map((chunk) => policy.primitives.forwardBackward(chunk, "cross_entropy"));
  const stepped = policy.primitives.optimStep({ lr: options.learningRate, weightDecay: options.weightDecay ?? 0, gradClip: options.gradClip ?? 1 });
  const [results, { gradNorm }] = await madeTogether(passes, stepped);
  for (const { loss, metrics } of results) {
    lossSum += loss * (metrics.tokens ?? 1);
    tokens += metrics.tokens ?? 1;
  }
  return { "loss/sft": lossSum / Math.max(tokens, 1), "train/grad_norm": gradNorm, "train/tokens": tokens };
}

/**
 * The conversations the policy would have seen: one per episode ("full" history) or one per turn ("last"). With
 * several agents each agent's turns make conversations of their own, under that agent's system prompt, as each
 * agent's prompt held only its own observations and actions.
 */
export function toConversations(trajectories: Trajectory[], history: "full" | "last"): Conversation[] {
  return toAgentConversations(trajectories, history).map(({ conversation }) => conversation);
}

/** A conversation and the agent whose turns it holds. */
export type AgentConversation = { agent: string; conversation: Conversation };

/** toConversations, each conversation with the agent whose turns it holds: what separate policies imitate, agent by agent. */
export function toAgentConversations(trajectories: Trajectory[], history: "full" | "last"): AgentConversation[] {
  return trajectories.flatMap((trajectory) => {
    const agents = [...new Set(trajectory.turns.map((turn) => turn.agent))];
    return agents.flatMap((agent) => {
      const system: ChatMessage = { role: "system", content: trajectory.systemPrompts?.[agent] ?? trajectory.systemPrompt };
      const exchanges = trajectory.turns
        .filter((turn) => turn.agent === agent)
        .map((turn): ChatMessage[] => [
          { role: "user", content: turn.observation },
          { role: "assistant", content: turn.action },
        ]);
      const conversations: Conversation[] = history === "full" ? [[system, ...exchanges.flat()]] : exchanges.map((exchange) => [system, ...exchange]);
      return conversations.map((conversation) => ({ agent, conversation }));
    });
  });
}

/**
 * Episodes played by a demonstrator through the protocol, as the conversations the policy would have seen (`agents`:
 * the agent whose turns each holds): each
 * turn's action is `demonstrate(episode, agent)`, the environment's demonstrate(state, agent) in that episode's state for the
 * agent whose turn it is. With each
 * episode's score: how good the demonstrator itself is, which a run after SFT is measured against.
 */
export async function demonstrationConversations(
  protocol: Protocol,
  starts: EpisodeStart[],
  demonstrate: (episode: number, agent: string) => string | null,
): Promise<{ conversations: Conversation[]; agents: string[]; scores: number[] }> {
  const trajectories = await runEpisodes(protocol, starts, async (requests) =>
    requests.map(({ episode, agent }) => ({ text: demonstrate(episode, agent) ?? "" })),
  );
  const tagged = toAgentConversations(trajectories, protocol.history);
  return { conversations: tagged.map((c) => c.conversation), agents: tagged.map((c) => c.agent), scores: trajectories.map((t) => t.score) };
}

/** The conversations of one SFT step: a function of (seed, step) alone, so a resumed run sees the same ones. */
export function sftBatch(conversations: Conversation[], seed: number, step: number, size: number): Conversation[] {
  const rng = new Rng((seed * 1_000_003 + step * 7_919 + 17) >>> 0);
  return Array.from({ length: size }, () => conversations[rng.nextU32() % conversations.length]!);
}

/**
 * Drops the conversations longer than the model's context (they cannot be trained on whole); says how many went.
 * Throws when none is left.
 */
export function fitConversations(policy: PolicyModel, conversations: Conversation[]): { kept: Conversation[]; dropped: number } {
  const kept = conversations.filter((c) => policy.tokenizer.encodeChat(c).length <= policy.contextLength);
  if (kept.length === 0) {
    throw new Error(
      `none of the ${conversations.length} conversations fits the model's context of ${policy.contextLength} tokens; pick a base with a longer context or shorter conversations`,
    );
  }
  return { kept, dropped: conversations.length - kept.length };
}

/**
 * The training loop of an SFT run, on the primitives only: each step imitates a batch of the conversations, and
 * the policy plays held-out episodes of the environment on the evaluation schedule, as an RL run's does, so the
 * two kinds of run are compared on the same score.
 */
export async function trainSft(options: {
  config: ExperimentConfig;
  policy: PolicyModel;
  /** What `policy` imitates; with separate policies (`agents`), left empty. */
  conversations: Conversation[];
  /**
   * Separate policies (`protocol.policies: "separate"`): each agent's own policy and the conversations of that
   * agent's turns, which it alone imitates; every step takes a batch of each, and evaluation seats each policy at
   * its agent. `policy` is then the first agent's.
   */
  agents?: Record<string, { policy: PolicyModel; conversations: Conversation[] }>;
  environment: EnvironmentInfo;
  protocol: Protocol;
  /** The environment's dataset rows (its test split is what evaluation plays). */
  dataset?: DatasetRow[];
  startStep?: number;
  hooks?: TrainingHooks;
  playEpisodes?: EpisodePlayer;
}): Promise<{ steps: number; stopped: boolean }> {
  const { config, policy, conversations, agents, hooks = {} } = options;
  const { steps } = config.algorithm;
  if (config.protocol.policies === "separate" && !agents)
    throw new Error('protocol.policies is "separate": pass trainSft each agent\'s policy and conversations (agents)');
  const seats = agents ? separateSeats(Object.fromEntries(Object.entries(agents).map(([agent, { policy }]) => [agent, policy]))) : undefined;
  const evaluation = evaluationSpecs(config, options.dataset ? splitDataset(options.dataset).test : null);
  const evaluatesAfter = (done: number) => done === steps || (config.evaluation.every > 0 && done % config.evaluation.every === 0);
  const runEvaluation = async (step: number) => {
    if (evaluation.length === 0) return;
    await evaluateAndReport(
      step,
      {
        policy,
        environment: options.environment,
        protocol: options.protocol,
        specs: evaluation,
        maxTokens: config.agent.sampling.maxTokens,
        temperature: config.evaluation.temperature,
        playEpisodes: options.playEpisodes,
        seats,
      },
      hooks,
    );
  };
  let step = options.startStep ?? 0;
  const checkpoints = checkpointSchedule(config, steps);
  if (step === 0) await runEvaluation(0);
  while (step < steps) {
    if (hooks.shouldStop?.()) return { steps: step, stopped: true };
    const started = performance.now();
    const learningRate = learningRateAt(config.algorithm, step);
    const settings = { learningRate, weightDecay: config.algorithm.weightDecay, gradClip: config.algorithm.gradClip };
    const metrics = agents
      ? await separateSftStep(agents, config.seed, step, config.sft.batchSize, settings)
      : await sftStep(policy, sftBatch(conversations, config.seed, step, config.sft.batchSize), settings);
    step += 1;
    const seconds = (performance.now() - started) / 1000;
    await hooks.onMetrics?.(step, {
      ...metrics,
      "train/lr": learningRate,
      "perf/step_seconds": seconds,
      "perf/tokens_per_s": (metrics["train/tokens"] ?? 0) / seconds,
    });
    if (evaluatesAfter(step)) await runEvaluation(step);
    if (checkpoints.due(step)) {
      await hooks.onCheckpoint?.(step, {});
      checkpoints.saved();
    }
    // a turn of the event loop, as the RL loop takes: reports and heartbeats leave while it trains
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
  return { steps: step, stopped: false };
}

/**
 * One SFT step of separate policies: each agent's policy on a batch of its own conversations (`batchSize` each).
 * Reports each agent's `train/agent/<agent>/loss/sft`, `.../tokens` and `.../grad_norm`, and over all of them
 * `loss/sft` (per token), `train/tokens` and `train/grad_norm` (the norm of every agent's gradient together).
 */
async function separateSftStep(
  agents: Record<string, { policy: PolicyModel; conversations: Conversation[] }>,
  seed: number,
  step: number,
  batchSize: number,
  settings: { learningRate: number; weightDecay: number; gradClip: number },
): Promise<Record<string, number>> {
  const metrics: Record<string, number> = {};
  let lossSum = 0;
  let tokens = 0;
  let squaredNorm = 0;
  for (const [agent, { policy, conversations }] of Object.entries(agents)) {
    const own = await sftStep(policy, sftBatch(conversations, seed, step, batchSize), settings);
    const [loss, agentTokens, norm] = [own["loss/sft"]!, own["train/tokens"]!, own["train/grad_norm"]!];
    Object.assign(metrics, { [`train/agent/${agent}/loss/sft`]: loss, [`train/agent/${agent}/tokens`]: agentTokens, [`train/agent/${agent}/grad_norm`]: norm });
    lossSum += loss * agentTokens;
    tokens += agentTokens;
    squaredNorm += norm * norm;
  }
  return { ...metrics, "loss/sft": lossSum / Math.max(tokens, 1), "train/grad_norm": Math.sqrt(squaredNorm), "train/tokens": tokens };
}
