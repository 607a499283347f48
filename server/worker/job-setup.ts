/**
 * What RL, SFT and evaluation jobs share before their loop starts: the environment (built in, or the experiment's
 * own in the sandbox), the base and a client of it, resumed from the run's last good checkpoint, and the hooks that
 * send metrics, rollouts, warnings and checkpoints as they happen (to the server, or straight to the database:
 * see ./channel.ts).
 */
import fs from "node:fs";
import path from "node:path";
import { useCases } from "@/lib/envs";
import type { UseCase } from "@/lib/envs";
import { demonstrate, demonstrators } from "@/lib/envs/demonstrations";
import { builtInDatasets, readBuiltInDataset } from "@/lib/envs/datasets";
import { Rng } from "@/lib/model/rng";
import type { TurnAdvantages } from "@/lib/rl/advantages";
import type { LeagueState } from "@/lib/rl/league";
import { samplerSnapshots } from "@/lib/rl/league-training";
import { LEAGUE_FILE } from "@/lib/rl/league-table";
import type { PolicyModel } from "@/lib/rl/primitives";
import type { HealthWarning } from "@/lib/rl/health";
import type { EnvironmentInfo, EpisodePlayer } from "@/lib/rl/rollouts";
import { demonstrationConversations, fitConversations, parseConversations, toAgentConversations, type Conversation } from "@/lib/rl/sft";
import { splitDataset } from "@/lib/rl/train";
import { parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow, EnvironmentSession } from "@/lib/sdk/environment";
import { type ExperimentConfig, imitates, sftStepsBeforeRl } from "@/lib/sdk/experiment";
import { hasSeveralAgents, type Protocol, type Trajectory } from "@/lib/sdk/protocol";
import { mergeReports, type ReportInput, ReportQueue } from "../jobs";
import { CheckpointCorruptError, type TrainingClient } from "../runtime";
import { runSandboxedEpisodes, SandboxedEnvironmentPool } from "../sandbox";
import { loadBaseModel } from "./base-models";
import { type JobOptions, type JobOutcome, type JobSpec, newTrainingClient, type StopReason } from "./job";

const MEMORY_FILE = "algorithm-memory.json";
/**
 * With separate policies, each agent's training state after the first: `<checkpoint>/agents/<agent>`. The first
 * agent's is the checkpoint's own, so the folder still reads as one policy (a base, an export, an evaluation).
 */
const agentStateDir = (checkpoint: string, agent: string) => path.join(checkpoint, "agents", agent);
export const checkpointDirName = (step: number) => `step-${String(step).padStart(6, "0")}`;

/** A training job made ready: what each kind's loop (./rl-job.ts, ./sft-job.ts, ./eval-job.ts) runs with. */
export type PreparedJob = Awaited<ReturnType<typeof prepareJob>>;

/** Loads what a job of the run needs and resumes it; the caller disposes of `pool` when the job ends. */
export async function prepareJob(options: JobOptions) {
  const { channel, workerId, spec } = options;
  const jobId = spec.job.id;
  const runId = spec.run.id;
  const config = spec.run.config;
  const custom = config.environment === "custom";
  const useCase = useCases[config.environment];
  if (!useCase && !custom) {
    throw new Error(
      `Unknown environment '${config.environment}'. Built-in environments: ${Object.keys(useCases).join(", ")}, or "custom" for the experiment's own environment.ts.`,
    );
  }
  const protocol: Protocol = { name: config.protocol.name, agents: config.protocol.agents, history: config.protocol.history };
  const base = loadBaseModel(spec.base ?? config.agent.base);
  const separate = config.protocol.policies === "separate";
  if (separate && imitates(config) === "dataset") {
    throw new Error(
      `protocol.policies "separate": each agent's policy imitates that agent's demonstrations, and an uploaded dataset's conversations name no agent; set sft.data to "demonstrator", sft.steps to 0, or protocol.policies "shared"`,
    );
  }
  /** Each agent's client on the one base (separate policies), else one: the run's agent. Seeds differ by agent. */
  const newClients = (): TrainingClient[] =>
    (separate ? protocol.agents : [protocol.agents[0]!]).map((_, i) => newTrainingClient(base, i === 0 ? config : { ...config, seed: config.seed + i }));
  let clients = newClients();
  let client = clients[0]!;
  let startStep = 0;
  let memory: Record<string, number> = {};
  let leagueState: LeagueState | undefined;
  /** Restores the client, the step and the algorithm's memory from a checkpoint of this run. */
  const restore = async (resume: { path: string; step: number }) => {
    const sftSteps = sftStepsBeforeRl(config);
    const inRlStage = sftSteps > 0 && resume.step >= sftSteps;
    if (inRlStage) {
      // Resumed in the RL stage: the KL penalty's reference is the policy where RL began, saved at step sftSteps.
      const stageStart = path.join(path.dirname(resume.path), checkpointDirName(sftSteps));
      if (fs.existsSync(stageStart)) {
        // Each agent's policy where its RL began, with separate policies (its state beside the first agent's).
        for (const [i, each] of clients.entries()) {
          await each.loadState(i === 0 ? stageStart : agentStateDir(stageStart, protocol.agents[i]!));
          each.beginStage();
        }
      } else if (config.algorithm.klCoef > 0) {
        throw new Error(
          `cannot resume: the checkpoint where RL began (step ${sftSteps}, ${stageStart}) is gone, and the KL penalty's reference is that policy`,
        );
      }
    }
    // At the stage's first step the checkpoint is that policy itself, with the optimizer of the SFT steps.
    if (!(inRlStage && resume.step === sftSteps)) await client.loadState(resume.path);
    for (const [i, agent] of protocol.agents.entries()) {
      if (i === 0 || !separate) continue;
      const dir = agentStateDir(resume.path, agent);
      if (!fs.existsSync(dir)) {
        throw new Error(
          `cannot resume: checkpoint '${resume.path}' holds no policy for agent '${agent}' (${dir}); it was saved by a run whose agents shared one policy`,
        );
      }
      await clients[i]!.loadState(dir);
    }
    startStep = resume.step;
    const memoryFile = path.join(resume.path, MEMORY_FILE);
    if (fs.existsSync(memoryFile)) memory = JSON.parse(fs.readFileSync(memoryFile, "utf8"));
    const leagueFile = path.join(resume.path, LEAGUE_FILE);
    if (fs.existsSync(leagueFile)) leagueState = JSON.parse(fs.readFileSync(leagueFile, "utf8"));
  };
  // An evaluation of a checkpoint of a run whose agents had separate policies: the base holds the first agent's
  // policy, and each other agent's is in the checkpoint's agents/<agent>, trained on the same base.
  const source = spec.base;
  if (separate && spec.job.kind === "eval" && source?.kind === "checkpoint") {
    for (const [i, agent] of protocol.agents.entries()) {
      if (i === 0) continue;
      const dir = agentStateDir(source.path, agent);
      if (!fs.existsSync(dir)) {
        throw new Error(`checkpoint '${source.id}' holds no policy for agent '${agent}' (${dir}): it was saved by a run whose agents shared one policy`);
      }
      // The agent's state read as a checkpoint base of its own (its adapter folded into the run's base), as the
      // first agent's is: the evaluation's client plays it as it is.
      const agentBase = loadBaseModel({ ...source, id: `${source.id}/agents/${agent}`, path: dir });
      clients[i] = newTrainingClient(agentBase, { ...config, seed: config.seed + i });
    }
  }
  // A damaged checkpoint (its checksum fails) is set aside, and the job resumes from the run's newest good one
  // before it, or from the base when there is none.
  let resume: { id?: string; path: string; step: number } | null = spec.resume;
  while (resume) {
    try {
      await restore(resume);
      break;
    } catch (error) {
      if (!(error instanceof CheckpointCorruptError) || !resume.id || path.resolve(error.dir) !== path.resolve(resume.path)) throw error;
      const reason = error.message;
      ({ next: resume } = await channel.setAside({ workerId, jobId, checkpointId: resume.id, reason }));
      clients = newClients(); // a load that failed part-way may have changed them
      client = clients[0]!;
      startStep = 0;
      memory = {};
      leagueState = undefined;
    }
  }
  // The experiment's own environment runs in the sandbox, one slot per episode of a batch; a built-in one natively.
  let environment: EnvironmentInfo;
  let playEpisodes: EpisodePlayer | undefined;
  let pool: SandboxedEnvironmentPool | undefined;
  if (custom) {
    pool = await SandboxedEnvironmentPool.create({ files: spec.run.files, entry: "environment.ts" });
    const { name, data, scoreName, difficulty } = pool.environment;
    // The declared levels, so that trainRl keeps a curriculum (lib/rl/curriculum.ts) for the sandboxed environment too.
    environment = { name, data, scoreName: scoreName ?? undefined, difficulty: difficulty ?? undefined };
    // One crossing into the sandbox per round of a lane, not per step; the sandbox's thread steps one part of the
    // batch while the policy samples another (laneShape), and resets the next step's episodes (trainRl passes
    // them as `next`) while this step's first lane samples.
    playEpisodes = (protocol, starts, act, options) => runSandboxedEpisodes(protocol, pool!, starts, act, options);
  } else {
    environment = useCase!.environment;
  }
  const dataset = environment.data.kind === "dataset" ? readDataset(environment.data.dataset, spec) : undefined;

  let stepReached = startStep;
  const reports = new ReportQueue<ReportInput>((report) => channel.report(report), { merge: mergeReports });
  /**
   * Writes a resumable checkpoint after everything reported so far is stored, then records it with the server: the
   * first agent's state (the only one, unless the agents have separate policies), each other agent's in
   * `agents/<agent>`, the algorithm's memory and a league run's league.
   */
  const saveCheckpoint = async (step: number, algorithmMemory: Record<string, number>, league?: LeagueState) => {
    await reports.flush();
    const dir = path.resolve(options.artifactsDir, "runs", runId, checkpointDirName(step));
    await client.saveState(dir);
    for (const [i, other] of clients.entries()) if (i > 0) await other.saveState(agentStateDir(dir, protocol.agents[i]!));
    fs.writeFileSync(path.join(dir, MEMORY_FILE), JSON.stringify(algorithmMemory));
    if (league) fs.writeFileSync(path.join(dir, LEAGUE_FILE), JSON.stringify(league));
    const sizeBytes = folderBytes(dir);
    await channel.checkpoint({ workerId, jobId, step, path: dir, sizeBytes });
  };
  const hooks = {
    onMetrics: async (step: number, metrics: Record<string, number>) => {
      stepReached = Math.max(stepReached, step);
      const wallTime = new Date();
      const points = Object.entries(metrics)
        .filter(([, value]) => Number.isFinite(value))
        .map(([name, value]) => ({ step, name, value, wallTime }));
      reports.push({ workerId, jobId, step: stepReached, metrics: points });
      options.onStep?.(stepReached);
    },
    onRollouts: async (step: number, split: "train" | "eval", groups: Trajectory[][], advantages: TurnAdvantages | null) => {
      reports.push({ workerId, jobId, rollouts: toRolloutRows(step, split, groups, advantages) });
      // A step's rollouts are its last report. The loop itself never gives the event loop a turn (the matrix
      // kernel waits on its threads synchronously), so without one here the reports, heartbeats and stop
      // requests would all wait until the run's next checkpoint.
      await new Promise<void>((resolve) => setImmediate(resolve));
    },
    onWarning: (warning: HealthWarning) => {
      reports.push({ workerId, jobId, logs: [{ level: "warn", message: warning.message }], warnings: [warning] });
    },
    onCheckpoint: (step: number, algorithmMemory: Record<string, number>, extra?: { league?: LeagueState }) =>
      saveCheckpoint(step, algorithmMemory, extra?.league),
    shouldStop: () => options.stopRequested() !== null,
  };
  const policyOf = (primitives: TrainingClient): PolicyModel => ({ primitives, tokenizer: base.tokenizer, contextLength: base.config.contextLength });
  const policy = policyOf(client);
  /** Separate policies: each agent's, the first agent's being `policy`. */
  const policies = separate ? Object.fromEntries(protocol.agents.map((agent, i) => [agent, i === 0 ? policy : policyOf(clients[i]!)])) : undefined;
  /**
   * A league run's frozen members: the learner's sampler weights in the run's `league/<member>` folders, each
   * loaded into a client of its own on the base (no value head, a seed of its own), so a resumed run finds them.
   */
  const leagueDir = path.resolve(options.artifactsDir, "runs", runId, "league");
  const league = config.algorithm.league
    ? {
        state: leagueState,
        snapshots: samplerSnapshots({
          dir: leagueDir,
          save: (at) => client.saveWeightsForSampler(at),
          async open(at, member) {
            const frozen = newTrainingClient(base, { ...config, agent: { ...config.agent, valueHead: false }, seed: config.seed + 7_919 * (member.step + 1) });
            await frozen.loadState(at);
            return policyOf(frozen);
          },
        }),
      }
    : undefined;
  const save = (memory: Record<string, number>, league?: LeagueState) => (steps: number) => saveCheckpoint(steps, memory, league);
  /**
   * The conversations SFT steps imitate, fitted to the model's context; the run's log says what and how many. With
   * separate policies, `agents` holds each agent's policy and the conversations of its own turns (`kept` is empty).
   */
  const imitation = async () => {
    const {
      conversations,
      agents: agentOf,
      scores,
    } = await sftConversations(config, protocol, useCase, pool, spec, dataset ? splitDataset(dataset).train : undefined);
    const agents = policies ? byAgent(protocol, policies, conversations, agentOf!) : undefined;
    const { kept, dropped } = agents
      ? { kept: [] as Conversation[], dropped: conversations.length - Object.values(agents).reduce((n, a) => n + a.conversations.length, 0) }
      : fitConversations(policy, conversations);
    // The demonstrator's own mean score on its episodes: what SFT can reach by imitation, and RL should pass.
    const demonstratorScore = scores.length > 0 ? scores.reduce((a, b) => a + b, 0) / scores.length : null;
    if (demonstratorScore !== null) {
      reports.push({
        workerId,
        jobId,
        step: stepReached,
        metrics: [{ step: 0, name: "sft/demonstrator_score", value: demonstratorScore, wallTime: new Date() }],
      });
    }
    const source =
      config.sft.data === "demonstrator"
        ? `${config.sft.demonstrations} demonstration episodes${demonstratorScore !== null ? `, in which the demonstrator scored ${demonstratorScore.toFixed(3)}` : ""}`
        : `dataset '${config.sft.dataset}'`;
    const note = agents
      ? `SFT of each agent's policy on its own turns: ${Object.entries(agents)
          .map(([agent, { conversations }]) => `${agent} ${conversations.length}`)
          .join(", ")} conversations (${source})`
      : `SFT on ${kept.length} conversations (${source})`;
    reports.push({
      workerId,
      jobId,
      logs: [
        {
          level: dropped > 0 ? "warn" : "info",
          message: dropped > 0 ? `${note}; ${dropped} longer than the context of ${policy.contextLength} tokens were left out` : `${note}.`,
        },
      ],
    });
    return { conversations: kept, agents };
  };
  /** The RL stage begins (after SFT steps): each policy's reference for the KL penalty is where it is now. */
  const beginStage = () => {
    for (const each of clients) each.beginStage();
  };

  return {
    config,
    protocol,
    base,
    client,
    startStep,
    memory,
    environment,
    playEpisodes,
    pool,
    dataset,
    reports,
    hooks,
    policy,
    policies,
    league,
    save,
    imitation,
    beginStage,
  };
}

/**
 * Separate policies' demonstrations: each agent's conversations (`agentOf[i]` the agent of conversation i), fitted to
 * its policy's context. An agent with none left cannot be taught: refused, naming it.
 */
function byAgent(protocol: Protocol, policies: Record<string, PolicyModel>, conversations: Conversation[], agentOf: string[]) {
  return Object.fromEntries(
    protocol.agents.map((agent) => {
      const own = conversations.filter((_, i) => agentOf[i] === agent);
      if (own.length === 0) {
        throw new Error(`no demonstration has a turn of agent '${agent}': its own policy has nothing to imitate (protocol.policies "separate")`);
      }
      const { kept } = fitConversations(policies[agent]!, own);
      return [agent, { policy: policies[agent]!, conversations: kept }];
    }),
  );
}

/** The bytes of every file under `dir`, its agents' folders included. */
function folderBytes(dir: string): number {
  return fs.readdirSync(dir, { withFileTypes: true }).reduce((sum, entry) => {
    const at = path.join(dir, entry.name);
    return sum + (entry.isDirectory() ? folderBytes(at) : fs.statSync(at).size);
  }, 0);
}

/** How a training loop's end becomes the job's outcome; paused or preempted work is saved first, to resume. */
export async function endOf(
  result: { steps: number; stopped: boolean },
  save: (steps: number) => Promise<void>,
  stopRequested: () => StopReason | null,
): Promise<JobOutcome> {
  if (!result.stopped) return { outcome: "completed", reason: null };
  const why = stopRequested()!;
  if (why === "cancel") return { outcome: "cancelled", reason: "cancelled by user" };
  await save(result.steps);
  return why === "pause"
    ? { outcome: "paused", reason: `paused by user at step ${result.steps}` }
    : { outcome: "preempted", reason: `preempted at step ${result.steps} for higher-priority work; will resume from there` };
}

/** An environment's rows: a built-in dataset, or an uploaded one (its file on this machine). */
function readDataset(name: string, spec: JobSpec): DatasetRow[] {
  if ((builtInDatasets as readonly string[]).includes(name)) return readBuiltInDataset(name);
  const file = spec.datasets?.[name];
  if (!file) throw new Error(`the environment reads dataset '${name}', which is neither built in (${builtInDatasets.join(", ")}) nor uploaded`);
  if (file.kind !== "rows") throw new Error(`dataset '${name}' holds SFT conversations, not rows an environment can read`);
  return parseDataset(fs.readFileSync(file.path, "utf8"), "jsonl", name);
}

/** Episodes a demonstrator plays at once (sandbox slots), when SFT makes its conversations. */
const DEMONSTRATION_BATCH = 64;

/**
 * What an SFT run imitates: the environment's demonstrator playing `sft.demonstrations` episodes through the
 * experiment's protocol (a built-in use case's scripted demonstrator, or a custom environment's demonstrate(state)
 * in the sandbox), or an uploaded dataset of conversations.
 */
async function sftConversations(
  config: ExperimentConfig,
  protocol: Protocol,
  useCase: UseCase | undefined,
  pool: SandboxedEnvironmentPool | undefined,
  spec: JobSpec,
  /** A dataset environment's training rows: each demonstration episode reads one. */
  rows: DatasetRow[] | undefined,
): Promise<{ conversations: Conversation[]; agents?: string[]; scores: number[] }> {
  if (config.sft.data === "dataset") {
    const file = spec.datasets?.[config.sft.dataset];
    if (!file) throw new Error(`sft.dataset: no uploaded dataset named '${config.sft.dataset}'; upload one on the Datasets page`);
    if (file.kind !== "conversations") throw new Error(`sft.dataset: '${config.sft.dataset}' holds rows, not conversations ({"messages": [...]} per line)`);
    return { conversations: parseConversations(fs.readFileSync(file.path, "utf8"), config.sft.dataset), scores: [] };
  }
  const count = config.sft.demonstrations;
  if (useCase) {
    const demonstrator = demonstrators[config.environment];
    if (!demonstrator) throw new Error(`environment '${config.environment}' has no demonstrator`);
    const trajectories = await demonstrate({ ...useCase, protocol }, demonstrator, count, config.seed, rows);
    const tagged = toAgentConversations(trajectories, protocol.history);
    return { conversations: tagged.map((c) => c.conversation), agents: tagged.map((c) => c.agent), scores: trajectories.map((t) => t.score) };
  }
  if (!pool!.environment.hasDemonstrator) {
    throw new Error(
      "sft.data is 'demonstrator', but the environment defines no demonstrate(state): add one that returns a good action's text, set sft.steps to 0 (and, to learn from the reward alone, algorithm.klCoef to 0 and algorithm.entropyCoef to 0.01), or use an uploaded dataset",
    );
  }
  const rng = new Rng(config.seed);
  const conversations: Conversation[] = [];
  const agents: string[] = [];
  const scores: number[] = [];
  for (let start = 0; start < count; start += DEMONSTRATION_BATCH) {
    const size = Math.min(DEMONSTRATION_BATCH, count - start);
    // runEpisodes drives sandboxed sessions as it does native ones (the same public surface)
    const starts = Array.from({ length: size }, (_, slot) => ({
      session: pool!.session(slot) as unknown as EnvironmentSession,
      seed: rng.nextU32() % 1_000_000,
      sample: rows ? rows[rng.nextU32() % rows.length] : undefined,
    }));
    // A single agent's demonstrator is asked as before; with several, for the agent whose turn it is.
    const several = hasSeveralAgents(protocol);
    const played = await demonstrationConversations(protocol, starts, (episode, agent) => pool!.demonstrate(episode, several ? agent : undefined));
    conversations.push(...played.conversations);
    agents.push(...played.agents);
    scores.push(...played.scores);
  }
  return { conversations, agents, scores };
}

/**
 * The rollouts as the trajectory viewer reads them. With several agents each turn also keeps who acted and, when the
 * step gave them, every agent's rewards; a single agent's turns leave both out.
 */
function toRolloutRows(step: number, split: "train" | "eval", groups: Trajectory[][], advantages: TurnAdvantages | null) {
  return groups.flatMap((group, g) =>
    group.map((trajectory, i) => ({
      step,
      split,
      groupIndex: g,
      sampleIndex: i,
      prompt: trajectory.systemPrompt,
      turns: trajectory.turns.map((turn, t) => ({
        ...(Object.keys(trajectory.agentReturns).length > 1 ? { agent: turn.agent, ...(turn.rewards ? { rewards: turn.rewards } : {}) } : {}),
        observation: turn.observation,
        action: turn.action,
        reward: turn.reward,
        ...(advantages ? { advantage: advantages[g]?.[i]?.[t] ?? null } : {}),
        ...(turn.render !== undefined ? { render: turn.render } : {}),
        ...(turn.legalActions ? { legalActions: turn.legalActions } : {}),
        info: turn.info,
      })),
      rewards: trajectory.rewards,
      totalReward: trajectory.totalReward,
      advantage: advantages?.[g]?.[i]?.[0] ?? null,
      tokens: trajectory.turns.flatMap((turn) => turn.actionTokens),
      tokenLogprobs: trajectory.turns.flatMap((turn) => turn.actionLogprobs),
    })),
  );
}
