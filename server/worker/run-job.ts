/**
 * Runs one training job on this worker: loads (or shares) the base model, builds the client, resumes from the
 * last checkpoint if there is one, and drives the RL loop, sending metrics, rollouts and checkpoints as they happen
 * (to the server, or straight to the database: see ./channel.ts).
 */
import fs from "node:fs";
import path from "node:path";
import { useCases } from "@/lib/envs";
import { demonstrate, demonstrators } from "@/lib/envs/demonstrations";
import type { UseCase } from "@/lib/envs";
import type { HealthWarning } from "@/lib/rl/health";
import { demonstrationConversations, fitConversations, parseConversations, toConversations, trainSft, type Conversation } from "@/lib/rl/sft";
import { evaluateAndReport } from "@/lib/rl/evaluate";
import { evaluationSpecs, splitDataset, trainRl } from "@/lib/rl/train";
import { Rng } from "@/lib/model/rng";
import type { DatasetRow, EnvironmentSession } from "@/lib/sdk/environment";
import { parseRunConfig } from "@/lib/lifecycle/run-config";
import { type ExperimentConfig, sftStepsBeforeRl } from "@/lib/sdk/experiment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { TurnAdvantages } from "@/lib/rl/advantages";
import type { EnvironmentInfo, EpisodePlayer } from "@/lib/rl/rollouts";
import { encodeSafetensors } from "@/lib/model/safetensors";
import { tokenizerSpec } from "@/lib/model/tokenizer-spec";
import { listGPTParameters, parametersToTensorMap } from "@/lib/model/weights";
import { type BaseModel, CheckpointCorruptError } from "../runtime";
import { runSandboxedEpisodes, SandboxedEnvironmentPool } from "../sandbox";
import { loadBaseModel } from "./base-models";
import { builtInDatasets, readBuiltInDataset } from "@/lib/envs/datasets";
import { parseDataset } from "@/lib/sdk/dataset";
import { describeLineage, type ReportInput } from "../jobs";
import { mergeReports, ReportQueue } from "../jobs";
import { runSessionJob } from "./session-job";

import { type JobOptions, type JobOutcome, type JobSpec, newTrainingClient, type StopReason } from "./job";

export { type JobOptions, type JobOutcome, type JobSpec, newTrainingClient, type StopReason };

const MEMORY_FILE = "algorithm-memory.json";
const checkpointDirName = (step: number) => `step-${String(step).padStart(6, "0")}`;

export async function runJob(given: JobOptions): Promise<JobOutcome> {
  // The worker's edge: the config is parsed once here, as this worker's code reads it (a server of another version
  // may have written it), and every kind of job below takes it parsed.
  const options = { ...given, spec: { ...given.spec, run: { ...given.spec.run, config: parseRunConfig(given.spec.run.config) } } };
  // A remote training session has no environment: the script's calls drive it (./session-job.ts).
  if (options.spec.job.kind === "session") return runSessionJob(options);
  // Nor does an export, whatever its run's environment (a session's checkpoint exports as any other).
  if (options.spec.job.kind === "export") return exportJob(options);
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
  const newClient = () => newTrainingClient(base, config);
  let client = newClient();
  let startStep = 0;
  let memory: Record<string, number> = {};
  /** Restores the client, the step and the algorithm's memory from a checkpoint of this run. */
  const restore = async (resume: { path: string; step: number }) => {
    const sftSteps = sftStepsBeforeRl(config);
    const inRlStage = sftSteps > 0 && resume.step >= sftSteps;
    if (inRlStage) {
      // Resumed in the RL stage: the KL penalty's reference is the policy where RL began, saved at step sftSteps.
      const stageStart = path.join(path.dirname(resume.path), checkpointDirName(sftSteps));
      if (fs.existsSync(stageStart)) {
        await client.loadState(stageStart);
        client.beginStage();
      } else if (config.algorithm.klCoef > 0) {
        throw new Error(
          `cannot resume: the checkpoint where RL began (step ${sftSteps}, ${stageStart}) is gone, and the KL penalty's reference is that policy`,
        );
      }
    }
    // At the stage's first step the checkpoint is that policy itself, with the optimizer of the SFT steps.
    if (!(inRlStage && resume.step === sftSteps)) await client.loadState(resume.path);
    startStep = resume.step;
    const memoryFile = path.join(resume.path, MEMORY_FILE);
    if (fs.existsSync(memoryFile)) memory = JSON.parse(fs.readFileSync(memoryFile, "utf8"));
  };
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
      client = newClient(); // a load that failed part-way may have changed it
      startStep = 0;
      memory = {};
    }
  }
  // The experiment's own environment runs in the sandbox, one slot per episode of a batch; a built-in one natively.
  let environment: EnvironmentInfo;
  let playEpisodes: EpisodePlayer | undefined;
  let pool: SandboxedEnvironmentPool | undefined;
  if (custom) {
    pool = await SandboxedEnvironmentPool.create({ files: spec.run.files, entry: "environment.ts" });
    const { name, data, scoreName } = pool.environment;
    environment = { name, data, scoreName: scoreName ?? undefined };
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
  /** Writes a resumable checkpoint after everything reported so far is stored, then records it with the server. */
  const saveCheckpoint = async (step: number, algorithmMemory: Record<string, number>) => {
    await reports.flush();
    const dir = path.resolve(options.artifactsDir, "runs", runId, checkpointDirName(step));
    await client.saveState(dir);
    fs.writeFileSync(path.join(dir, MEMORY_FILE), JSON.stringify(algorithmMemory));
    const sizeBytes = fs.readdirSync(dir).reduce((sum, file) => sum + fs.statSync(path.join(dir, file)).size, 0);
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
    onCheckpoint: saveCheckpoint,
    shouldStop: () => options.stopRequested() !== null,
  };
  const policy = { primitives: client, tokenizer: base.tokenizer, contextLength: base.config.contextLength };
  const save = (memory: Record<string, number>) => (steps: number) => saveCheckpoint(steps, memory);
  /** The conversations SFT steps imitate, fitted to the model's context; the run's log says what and how many. */
  const imitation = async () => {
    const conversations = await sftConversations(config, protocol, useCase, pool, spec, dataset ? splitDataset(dataset).train : undefined);
    const { kept, dropped } = fitConversations(policy, conversations);
    const note = `SFT on ${kept.length} conversations (${config.sft.data === "demonstrator" ? `${config.sft.demonstrations} demonstration episodes` : `dataset '${config.sft.dataset}'`})`;
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
    return kept;
  };

  try {
    if (spec.job.kind === "eval") {
      // An evaluation run: the base (usually another run's checkpoint) plays the held-out episodes once.
      const specs = evaluationSpecs(config, dataset ? splitDataset(dataset).test : null);
      const score = await evaluateAndReport(
        0,
        {
          policy,
          environment,
          protocol,
          specs,
          maxTokens: config.agent.sampling.maxTokens,
          temperature: config.evaluation.temperature,
          playEpisodes,
        },
        hooks,
      );
      const temperature = config.evaluation.temperature === 0 ? "greedy" : `temperature ${config.evaluation.temperature}`;
      reports.push({
        workerId,
        jobId,
        logs: [
          {
            level: "info",
            message: `Evaluated on ${specs.length} held-out episodes (${temperature}): ${environment.scoreName ?? "score"} ${score.toFixed(3)}.`,
          },
        ],
      });
      await reports.flush();
      return { outcome: "completed", reason: null };
    }
    if (config.algorithm.name === "sft") {
      const outcome = await trainSft({ config, policy, conversations: await imitation(), environment, protocol, dataset, startStep, hooks, playEpisodes });
      await reports.flush();
      return await endOf(outcome, save({}), options.stopRequested);
    }

    // An RL run may first take SFT steps (sft.steps): RL then starts from the imitating policy, as a run from
    // that checkpoint would (a fresh optimizer; the policy there is the KL penalty's reference).
    const sftSteps = sftStepsBeforeRl(config);
    if (sftSteps > 0 && startStep < sftSteps) {
      const stage = {
        ...config,
        algorithm: {
          ...config.algorithm,
          name: "sft" as const,
          steps: sftSteps,
          learningRate: config.sft.learningRate,
          lrSchedule: "constant" as const,
          warmupSteps: 0,
        },
      };
      const outcome = await trainSft({
        config: stage,
        policy,
        conversations: await imitation(),
        environment,
        protocol,
        dataset,
        startStep,
        hooks,
        playEpisodes,
      });
      if (outcome.stopped) {
        await reports.flush();
        return await endOf(outcome, save({}), options.stopRequested);
      }
      reports.push({ workerId, jobId, logs: [{ level: "info", message: `SFT done after ${sftSteps} steps; RL starts from this policy.` }] });
      client.beginStage();
      startStep = sftSteps;
    }
    const result = await trainRl({ config, policy, environment, protocol, dataset, startStep, stepsBefore: sftSteps, memory, playEpisodes, hooks });
    await reports.flush();
    return await endOf(result, save(result.memory), options.stopRequested);
  } finally {
    // The sandbox's thread goes as soon as the run ends, however it ends.
    pool?.dispose();
  }
}

/** How a training loop's end becomes the job's outcome; paused or preempted work is saved first, to resume. */
async function endOf(
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
): Promise<Conversation[]> {
  if (config.sft.data === "dataset") {
    const file = spec.datasets?.[config.sft.dataset];
    if (!file) throw new Error(`sft.dataset: no uploaded dataset named '${config.sft.dataset}'; upload one on the Datasets page`);
    if (file.kind !== "conversations") throw new Error(`sft.dataset: '${config.sft.dataset}' holds rows, not conversations ({"messages": [...]} per line)`);
    return parseConversations(fs.readFileSync(file.path, "utf8"), config.sft.dataset);
  }
  const count = config.sft.demonstrations;
  if (useCase) {
    const demonstrator = demonstrators[config.environment];
    if (!demonstrator) throw new Error(`environment '${config.environment}' has no demonstrator`);
    return toConversations(await demonstrate({ ...useCase, protocol }, demonstrator, count, config.seed, rows), protocol.history);
  }
  if (!pool!.environment.hasDemonstrator) {
    throw new Error(
      "sft.data is 'demonstrator', but the environment defines no demonstrate(state): add one that returns a good action's text, or use an uploaded dataset",
    );
  }
  const rng = new Rng(config.seed);
  const conversations: Conversation[] = [];
  for (let start = 0; start < count; start += DEMONSTRATION_BATCH) {
    const size = Math.min(DEMONSTRATION_BATCH, count - start);
    // runEpisodes drives sandboxed sessions as it does native ones (the same public surface)
    const starts = Array.from({ length: size }, (_, slot) => ({
      session: pool!.session(slot) as unknown as EnvironmentSession,
      seed: rng.nextU32() % 1_000_000,
      sample: rows ? rows[rng.nextU32() % rows.length] : undefined,
    }));
    conversations.push(...(await demonstrationConversations(protocol, starts, (episode) => pool!.demonstrate(episode))));
  }
  return conversations;
}

function toRolloutRows(step: number, split: "train" | "eval", groups: Trajectory[][], advantages: TurnAdvantages | null) {
  return groups.flatMap((group, g) =>
    group.map((trajectory, i) => ({
      step,
      split,
      groupIndex: g,
      sampleIndex: i,
      prompt: trajectory.systemPrompt,
      turns: trajectory.turns.map((turn, t) => ({
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

/** An export run: the base (another run's checkpoint, its adapter merged) as one safetensors file to download. */
async function exportJob(options: JobOptions): Promise<JobOutcome> {
  const { channel, workerId, spec } = options;
  const config = spec.run.config;
  const base = loadBaseModel(spec.base ?? config.agent.base);
  const step = spec.base?.kind === "checkpoint" ? spec.base.step : 0;
  const file = path.resolve(options.artifactsDir, "runs", spec.run.id, "export", `${spec.run.id}.safetensors`);
  const sizeBytes = writeModelFile(file, base, describeLineage(spec.base ?? { kind: "builtin", name: config.agent.base }));
  await channel.checkpoint({ workerId, jobId: spec.job.id, step, path: file, sizeBytes, kind: "export" });
  await channel.report({
    workerId,
    jobId: spec.job.id,
    logs: [{ level: "info", message: `Exported ${(sizeBytes / 1024 / 1024).toFixed(1)} MiB: ${path.basename(file)}.` }],
  });
  return { outcome: "completed", reason: null };
}

/**
 * Writes a model as one safetensors file (written beside, then renamed into place): its weights under the tensor
 * names of docs/CHECKPOINTS.md, and in the header's metadata the model's config, its tokenizer and where it came
 * from, so the one file is all a loader needs.
 */
function writeModelFile(file: string, model: BaseModel, origin: string): number {
  const bytes = encodeSafetensors(parametersToTensorMap(listGPTParameters(model.weights, model.config)), {
    format: "tinkerlab.model",
    version: "1",
    model_config: JSON.stringify(model.config),
    tokenizer: JSON.stringify(tokenizerSpec(model.tokenizer)),
    origin,
  });
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const partial = `${file}.partial`;
  fs.writeFileSync(partial, bytes);
  fs.renameSync(partial, file);
  return bytes.length;
}
