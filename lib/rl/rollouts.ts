/**
 * Rollouts: episodes played by the policy through a protocol, sampled in large batches. Also turns finished
 * trajectories into the primitives' batch format and sums them up as metrics.
 */
import type { ChatMessage } from "@/lib/model/chat";
import { Rng } from "@/lib/model/rng";
import { EnvironmentSession, type EnvironmentDefinition } from "@/lib/sdk/environment";
import { runEpisodes, type ActRequest, type ActResponse, type Protocol, type Trajectory } from "@/lib/sdk/protocol";
import { agentReturn, agentsOf, type TurnAdvantages } from "./advantages";
import type { EpisodeSpec } from "./episode-spec";
import type { PolicyModel, SampleOptions, TrainingBatch } from "./primitives";
import { recordSeating, type Seats } from "./seats";

export type { EpisodeSpec };

/** What the RL loop needs to know of an environment besides its sessions. */
export type EnvironmentInfo = Pick<EnvironmentDefinition<any, any, any>, "name" | "data" | "scoreName" | "difficulty">;

/**
 * Plays episodes to their end: the index-th start is the index-th episode of the batch. The default runs an
 * environment definition in this process; the sandbox passes its own, which steps a whole round of episodes in
 * one crossing into the sandbox.
 */
export type EpisodePlayer = (
  protocol: Protocol,
  starts: EpisodeSpec[],
  act: (requests: ActRequest[]) => Promise<ActResponse[]>,
  options: {
    fitsContext?: (messages: ChatMessage[]) => boolean;
    /** The starts of the batch this player will be asked for next, when known: it may prepare them meanwhile. */
    next?: EpisodeSpec[];
  },
) => Promise<Trajectory[]>;

export function defaultPlayer(environment: EnvironmentInfo): EpisodePlayer {
  if (!("reset" in environment)) throw new Error(`environment '${environment.name}' has no definition here: pass playEpisodes`);
  const definition = environment as EnvironmentDefinition<any, any, any>;
  return (protocol, starts, act, options) =>
    runEpisodes(
      protocol,
      starts.map((start) => ({ ...start, session: new EnvironmentSession(definition) })),
      act,
      options,
    );
}

/**
 * Renders a conversation for the policy and samples its replies, one batch for all requests of a round. A seeded
 * actor (evaluation) gives each round its own seed drawn from the first, so a run is reproducible yet one turn's
 * draws are not the last turn's: with one seed for every call, an episode that came back to a state replayed the
 * same choice there, and sampled multi-turn play looped.
 */
export function policyActor(policy: PolicyModel, sampling: SampleOptions) {
  const seeds = sampling.seed === undefined ? null : new Rng(sampling.seed);
  return async (requests: ActRequest[]): Promise<ActResponse[]> => {
    const options = seeds ? { ...sampling, seed: seeds.nextU32() } : sampling;
    const prompts = requests.map((r) => policy.tokenizer.encodeChat(r.messages, { addGenerationPrompt: true }));
    const constraints = requests.map((r) => r.legalActions ?? null);
    const constrained = constraints.some((c) => c !== null);
    // Identical prompts (a group's first turn) are prefilled once and forked, when every prompt repeats equally.
    const unique = new Map<string, number[]>();
    prompts.forEach((p, i) => {
      const key = constrained ? `${p.join(",")}|${JSON.stringify(constraints[i])}` : p.join(",");
      unique.set(key, [...(unique.get(key) ?? []), i]);
    });
    const counts = new Set([...unique.values()].map((indices) => indices.length));
    const responses = new Array<ActResponse>(requests.length);
    if (counts.size === 1 && unique.size < prompts.length) {
      const n = [...counts][0]!;
      const groups = [...unique.values()];
      const { samples } = await policy.primitives.sample(
        groups.map((indices) => prompts[indices[0]!]!),
        n,
        constrained ? { ...options, constraints: groups.map((indices) => constraints[indices[0]!]!) } : options,
      );
      groups.forEach((indices, g) => indices.forEach((index, k) => (responses[index] = toResponse(prompts[index]!, samples[g]![k]!))));
    } else {
      const { samples } = await policy.primitives.sample(prompts, 1, constrained ? { ...options, constraints } : options);
      prompts.forEach((prompt, i) => (responses[i] = toResponse(prompt, samples[i]![0]!)));
    }
    return responses;
  };
}

/**
 * An actor that routes each request to the policy `policyAt` names for it, one sampling batch per distinct policy
 * (a policy playing several agents samples them together), each policy with its own `policyActor`. A seeded
 * actor gives each policy its own seed (the first policy to act keeps `sampling.seed`): with one seed, two policies
 * with the same weights (a learner and its fresh snapshot) drew the same moves and every game mirrored.
 */
export function routedActor(policyAt: (request: ActRequest) => PolicyModel, sampling: SampleOptions) {
  const actors = new Map<PolicyModel, ReturnType<typeof policyActor>>();
  const samplingOf = (k: number) => (sampling.seed === undefined ? sampling : { ...sampling, seed: (sampling.seed + Math.imul(k, 0x9e3779b9)) >>> 0 });
  return async (requests: ActRequest[]): Promise<ActResponse[]> => {
    const responses = new Array<ActResponse>(requests.length);
    const byPolicy = new Map<PolicyModel, number[]>();
    requests.forEach((request, i) => {
      const policy = policyAt(request);
      byPolicy.set(policy, [...(byPolicy.get(policy) ?? []), i]);
    });
    await Promise.all(
      [...byPolicy].map(async ([policy, indices]) => {
        if (!actors.has(policy)) actors.set(policy, policyActor(policy, samplingOf(actors.size)));
        const answers = await actors.get(policy)!(indices.map((i) => requests[i]!));
        indices.forEach((index, k) => (responses[index] = answers[k]!));
      }),
    );
    return responses;
  };
}

/**
 * Whether a prompt leaves room for the reply in the context of every one of `policies`: encoded once per tokenizer
 * (a learner and its frozen snapshots share one), against the smallest context among the policies using it.
 */
export function fitsEveryContext(policies: readonly PolicyModel[], maxTokens: number) {
  const contexts = new Map<PolicyModel["tokenizer"], number>();
  for (const policy of policies) contexts.set(policy.tokenizer, Math.min(contexts.get(policy.tokenizer) ?? Infinity, policy.contextLength));
  return (messages: ChatMessage[]) =>
    [...contexts].every(([tokenizer, context]) => tokenizer.encodeChat(messages, { addGenerationPrompt: true }).length + maxTokens <= context);
}

function toResponse(prompt: number[], sample: { tokens: number[]; text: string; logprobs: number[]; allowedTokens?: number[][] }): ActResponse {
  const response: ActResponse = { text: sample.text, promptTokens: prompt, tokens: sample.tokens, logprobs: sample.logprobs };
  if (sample.allowedTokens) response.allowedTokens = sample.allowedTokens;
  return response;
}

/** `groupSize` episodes from each spec, played by the policy; returns [group][sample]. */
export async function collectGroups(options: {
  policy: PolicyModel;
  /** The environment: a definition run in this process, or (with createSession) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  protocol: Protocol;
  specs: EpisodeSpec[];
  groupSize: number;
  sampling: SampleOptions & { maxTokens: number };
  /** Plays the episodes; the default runs the environment's definition in this process. */
  playEpisodes?: EpisodePlayer;
  /** The specs of the batch that will be collected next (the RL loop's next step, or its next evaluation), if known. */
  nextSpecs?: EpisodeSpec[];
  /** That batch's group size, when it is not this one's (an evaluation plays each spec once). */
  nextGroupSize?: number;
  /** Who plays each agent of each group (./seats.ts); left out, `policy` plays every agent. */
  seats?: Seats;
}): Promise<Trajectory[][]> {
  const { policy, specs, groupSize, sampling, seats } = options;
  const play = options.playEpisodes ?? defaultPlayer(options.environment);
  const startsOf = (of: EpisodeSpec[], size: number) =>
    of.flatMap((spec) => Array.from({ length: size }, () => ({ seed: spec.seed, sample: spec.sample, difficulty: spec.difficulty })));
  const starts = startsOf(specs, groupSize);
  const next = options.nextSpecs && startsOf(options.nextSpecs, options.nextGroupSize ?? groupSize);
  const seatings = seats ? specs.map((spec, g) => seats(g, spec)) : null;
  let trajectories: Trajectory[];
  if (!seatings) {
    const fitsContext = fitsEveryContext([policy], sampling.maxTokens);
    trajectories = await play(options.protocol, starts, policyActor(policy, sampling), { fitsContext, next });
  } else {
    const seatingAt = (episode: number) => seatings[Math.floor(episode / groupSize)]!;
    for (const [g, seating] of seatings.entries()) {
      const missing = options.protocol.agents.filter((agent) => !seating[agent]);
      if (missing.length > 0) throw new Error(`group ${g} seats no policy at agent ${missing.join(", ")}; every agent of the protocol needs one`);
    }
    const policies = [...new Set(seatings.flatMap((seating) => Object.values(seating).map((seat) => seat.policy)))];
    const act = routedActor((request) => seatingAt(request.episode)[request.agent]!.policy, sampling);
    trajectories = await play(options.protocol, starts, act, { fitsContext: fitsEveryContext(policies, sampling.maxTokens), next });
    trajectories.forEach((trajectory, i) => recordSeating(trajectory, seatingAt(i)));
  }
  const groups: Trajectory[][] = [];
  for (let g = 0; g < specs.length; g++) groups.push(trajectories.slice(g * groupSize, (g + 1) * groupSize));
  return groups;
}

/**
 * One sequence per turn: the prompt the policy saw, then its action. Only the action's tokens carry weight, the
 * sampler's logprobs and the turn's advantage (and, for PPO, the value target). With `keep`, only the turns it
 * keeps (a policy's own, when several played: ./seats.ts).
 */
export function toTrainingBatch(
  groups: Trajectory[][],
  advantages: TurnAdvantages,
  returns?: TurnAdvantages,
  keep?: (trajectory: Trajectory, turn: Trajectory["turns"][number]) => boolean,
): TrainingBatch {
  const constrained = groups.some((group) => group.some((trajectory) => trajectory.turns.some((turn) => turn.allowedTokens)));
  const batch: Required<Pick<TrainingBatch, "tokens" | "weights" | "samplingLogprobs" | "advantages">> & Pick<TrainingBatch, "returns" | "allowedTokens"> = {
    tokens: [],
    weights: [],
    samplingLogprobs: [],
    advantages: [],
    ...(returns ? { returns: [] } : {}),
    ...(constrained ? { allowedTokens: [] } : {}),
  };
  groups.forEach((group, g) =>
    group.forEach((trajectory, i) =>
      trajectory.turns.forEach((turn, t) => {
        if (turn.actionTokens.length === 0 || (keep && !keep(trajectory, turn))) return;
        const p = turn.promptTokens.length;
        const zeros = new Array<number>(p).fill(0);
        const a = advantages[g]![i]![t]!;
        batch.tokens.push([...turn.promptTokens, ...turn.actionTokens]);
        batch.weights.push([...zeros, ...turn.actionTokens.map(() => 1)]);
        batch.samplingLogprobs.push([...zeros, ...turn.actionLogprobs]);
        batch.advantages.push([...zeros, ...turn.actionTokens.map(() => a)]);
        if (returns) batch.returns!.push([...zeros, ...turn.actionTokens.map(() => returns[g]![i]![t]!)]);
        if (constrained) batch.allowedTokens!.push([...new Array<null>(p).fill(null), ...(turn.allowedTokens ?? turn.actionTokens.map(() => null))]);
      }),
    ),
  );
  return batch;
}

/**
 * Splits a batch into chunks of at most `size` sequences (gradients accumulate across them). Sequences are
 * grouped by length first: a chunk is padded to its longest sequence, so mixing short and long wastes compute.
 */
export function chunkBatch(batch: TrainingBatch, size: number): TrainingBatch[] {
  const order = batch.tokens.map((_, i) => i).sort((a, b) => batch.tokens[a]!.length - batch.tokens[b]!.length);
  const out: TrainingBatch[] = [];
  for (let start = 0; start < order.length; start += size) {
    const rows = order.slice(start, start + size);
    const part: TrainingBatch = { tokens: rows.map((i) => batch.tokens[i]!) };
    for (const key of ["weights", "samplingLogprobs", "advantages", "returns"] as const) {
      if (batch[key]) part[key] = rows.map((i) => batch[key]![i]!);
    }
    if (batch.allowedTokens) part.allowedTokens = rows.map((i) => batch.allowedTokens![i]!);
    out.push(part);
  }
  return out;
}

/**
 * reward/mean, reward/std, per-reward-function means, episode length, score, and the environment's metrics. With
 * several agents, also each agent's mean return, `reward/agent/NAME` (reward/mean stays the sum over agents), and
 * with two, the share of episodes each won, `episode/win/NAME`: its return above the other's, the rule of
 * lib/rl/league.ts (a zero-sum game's +1 against −1, or a reward to the winner alone; equal returns, a draw or a
 * shared reward, are no one's win).
 */
export function rolloutMetrics(groups: Trajectory[][], scoreName = "score"): Record<string, number> {
  const all = groups.flat();
  const n = Math.max(all.length, 1);
  const rewards = all.map((t) => t.totalReward);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const metrics: Record<string, number> = {
    "reward/mean": mean,
    "reward/std": Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / n),
    [`reward/${scoreName}`]: all.reduce((a, t) => a + t.score, 0) / n,
    "episode/length": all.reduce((a, t) => a + t.turns.length, 0) / n,
    "episode/truncated": all.filter((t) => t.truncated).length / n,
    "episode/invalid_actions": all.reduce((a, t) => a + t.invalidActions, 0) / n,
    "episode/action_tokens": all.reduce((a, t) => a + t.turns.reduce((s, turn) => s + turn.actionTokens.length, 0), 0) / n,
  };
  for (const name of new Set(all.flatMap((t) => Object.keys(t.rewards)))) {
    metrics[`reward/${name}`] = all.reduce((a, t) => a + (t.rewards[name] ?? 0), 0) / n;
  }
  const agents = agentsOf(all);
  if (agents.length > 1) {
    for (const agent of agents) metrics[`reward/agent/${agent}`] = all.reduce((a, t) => a + agentReturn(t, agent), 0) / n;
  }
  if (agents.length === 2) {
    for (const [agent, other] of [agents, [...agents].reverse()] as [string, string][]) {
      metrics[`episode/win/${agent}`] = all.filter((t) => agentReturn(t, agent) > agentReturn(t, other)).length / n;
    }
  }
  const names = new Set(all.flatMap((t) => Object.keys(t.metrics)));
  for (const name of names) metrics[`env/${name}`] = all.reduce((a, t) => a + (t.metrics[name] ?? 0), 0) / n;
  return metrics;
}
