/**
 * The training loop of an RL experiment, on the primitives only: for each step, pick the step's prompts, run the
 * algorithm (rollouts, advantages, update), report metrics and rollouts, evaluate on held-out episodes on
 * schedule, and checkpoint. The same loop serves the built-in runs and a user's script.
 */
import type { EnvironmentInfo, EpisodePlayer } from "./rollouts";
import { Rng } from "@/lib/model/rng";
import type { DatasetRow } from "@/lib/sdk/environment";
import { learningRateAt, type AlgorithmName, type ExperimentConfig } from "@/lib/sdk/experiment";
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { TurnAdvantages } from "./advantages";
import type { RlAlgorithm } from "./algorithm";
import { checkpointSchedule } from "./checkpoint-schedule";
import { Curriculum, curriculumLevels } from "./curriculum";
import { evaluateAndReport } from "./evaluate";
import { Exploration } from "./exploration";
import { grpo, grpoPerTurn } from "./grpo";
import { RunHealth, type HealthWarning } from "./health";
import { ppo } from "./ppo";
import type { PolicyModel } from "./primitives";
import { reinforce } from "./reinforce";
import { type LeagueSnapshots, TrainingLeague, type TrainingLeagueState } from "./league-training";
import { separateSeats } from "./seats";
import { rloo } from "./rloo";
import { collectGroups, defaultPlayer, type EpisodeSpec } from "./rollouts";

export const rlAlgorithms: Record<Exclude<AlgorithmName, "sft">, RlAlgorithm> = {
  grpo,
  "grpo-per-turn": grpoPerTurn,
  ppo,
  rloo,
  reinforce,
};

export type TrainingHooks = {
  onMetrics?(step: number, metrics: Record<string, number>): void | Promise<void>;
  onRollouts?(step: number, split: "train" | "eval", groups: Trajectory[][], advantages: TurnAdvantages | null): void | Promise<void>;
  /**
   * Save a resumable checkpoint after `step`; `memory` is the algorithm's state to save with it, and `league` a
   * league run's members and games (./league-training.ts).
   */
  onCheckpoint?(step: number, memory: Record<string, number>, extra?: { league?: TrainingLeagueState }): void | Promise<void>;
  /** A sign that the run cannot learn, the first time it shows (lib/rl/health.ts). */
  onWarning?(warning: HealthWarning): void | Promise<void>;
  /** Asked between steps; true ends the loop early (cancel, pause, preemption). */
  shouldStop?(): boolean;
};

/** Splits a dataset: rows marked split "test" are held out; without such a field, the last fifth is. */
export function splitDataset(rows: DatasetRow[]): { train: DatasetRow[]; test: DatasetRow[] } {
  if (rows.some((row) => "split" in row)) {
    return { train: rows.filter((row) => row.split !== "test"), test: rows.filter((row) => row.split === "test") };
  }
  const cut = Math.floor(rows.length * 0.8);
  return { train: rows.slice(0, cut), test: rows.slice(cut) };
}

/**
 * The prompts of one training step: a function of (seed, step, round, level) alone, so a resumed run sees the same
 * ones. Round r > 0 gives the fresh prompts of the step's r-th extra sampling round (dynamic sampling), drawn
 * apart. With `difficulty` (an environment's levels: the curriculum's current one and the highest), each prompt
 * carries its level (`curriculumLevels`); the seeds and rows are the same as without.
 */
export function trainingSpecs(
  config: ExperimentConfig,
  step: number,
  rows: DatasetRow[] | null,
  round = 0,
  difficulty?: { level: number; max: number },
): EpisodeSpec[] {
  const rng = new Rng((config.seed * 1_000_003 + step * 7_919 + round * 104_729) >>> 0);
  const count = config.algorithm.groupsPerStep;
  const levels = difficulty ? curriculumLevels(count, step, round, difficulty.level, difficulty) : null;
  return Array.from({ length: count }, (_, i) => {
    const seed = rng.nextU32() % config.evaluation.seedOffset; // training seeds stay below the held-out range
    const spec: EpisodeSpec = rows ? { seed, sample: rows[rng.nextU32() % rows.length]! } : { seed };
    if (levels) spec.difficulty = levels[i]!;
    return spec;
  });
}

export function evaluationSpecs(config: ExperimentConfig, rows: DatasetRow[] | null): EpisodeSpec[] {
  const { episodes, seedOffset } = config.evaluation;
  return Array.from({ length: rows ? Math.min(episodes, rows.length) : episodes }, (_, i) =>
    rows ? { seed: seedOffset + i, sample: rows[i]! } : { seed: seedOffset + i },
  );
}

export async function trainRl(options: {
  config: ExperimentConfig;
  policy: PolicyModel;
  /** The environment: a definition run in this process, or (with playEpisodes) what a sandbox reports of one. */
  environment: EnvironmentInfo;
  protocol: Protocol;
  dataset?: DatasetRow[];
  /** Resume after this many completed steps (from a checkpoint), with the algorithm state saved there. */
  startStep?: number;
  /**
   * Steps the run took before its first RL step (SFT steps): the RL steps are numbered after them, and see the
   * prompts and learning rates a run without them would at its own step 0, 1, …
   */
  stepsBefore?: number;
  memory?: Record<string, number>;
  hooks?: TrainingHooks;
  /** Plays the episodes; the sandbox batches each round's steps into one crossing. Default: the definition, here. */
  playEpisodes?: EpisodePlayer;
  /**
   * Separate policies (`protocol.policies: "separate"`): each agent's own, every one trained on its agent's turns
   * and evaluated at its agent. `policy` is then the first agent's.
   */
  policies?: Record<string, PolicyModel>;
  /** A league run (`algorithm.league`): where its frozen members are kept, and its state when resumed. */
  league?: { snapshots: LeagueSnapshots; state?: TrainingLeagueState };
}): Promise<{
  steps: number;
  evaluations: { step: number; score: number }[];
  stopped: boolean;
  memory: Record<string, number>;
  /** A league run's members and games at the end, to save with its last checkpoint. */
  league?: TrainingLeagueState;
}> {
  const { config, policy, environment, protocol, hooks = {} } = options;
  if (config.algorithm.name === "sft") throw new Error("trainRl runs RL algorithms; use sftStep for algorithm 'sft'");
  if (config.protocol.policies === "separate" && !options.policies)
    throw new Error('protocol.policies is "separate": pass trainRl a policy per agent (policies)');
  const seats = options.policies ? separateSeats(checkSeparatePolicies(config, protocol, options.policies)) : undefined;
  if (environment.data.kind === "dataset" && !options.dataset) {
    throw new Error(`environment '${environment.name}' reads dataset '${environment.data.dataset}', but no rows were given`);
  }
  const algorithm = rlAlgorithms[config.algorithm.name];
  const split = options.dataset ? splitDataset(options.dataset) : null;
  const memory = { ...(options.memory ?? {}) };
  const evaluations: { step: number; score: number }[] = [];
  const sampling = { ...config.agent.sampling };
  const offset = options.stepsBefore ?? 0;
  let step = Math.max(options.startStep ?? 0, offset);
  const { groupSize } = config.algorithm;
  /** The run's last step. */
  const steps = offset + config.algorithm.steps;
  const evaluation = evaluationSpecs(config, split?.test ?? null);
  /** Whether an evaluation follows training step `done` (counted from 1). */
  const evaluatesAfter = (done: number) => done === steps || (config.evaluation.every > 0 && done % config.evaluation.every === 0);
  const rows = split?.train ?? null;
  const health = new RunHealth({ contextLength: policy.contextLength, maxTokens: sampling.maxTokens });
  const leagueConfig = config.algorithm.league;
  if (leagueConfig && !options.league) throw new Error("algorithm.league is set, but the run keeps no league snapshots: pass trainRl's league option");
  if (leagueConfig && seats) throw new Error('algorithm.league trains one policy against its past selves: set protocol.policies to "shared"');
  const league = leagueConfig
    ? await TrainingLeague.open({
        config: leagueConfig,
        protocol,
        seed: config.seed,
        learner: policy,
        snapshots: options.league!.snapshots,
        step,
        first: offset,
        last: offset + config.algorithm.steps,
        state: options.league!.state,
      })
    : null;
  const done = (stopped: boolean) => ({ steps: step, evaluations, stopped, memory, ...(league ? { league: league.state } : {}) });
  /** The sampling temperature rises while steps find no signal (`algorithm.exploreTemperature`; ./exploration.ts). */
  const exploration = new Exploration(sampling.temperature, config.algorithm.exploreTemperature, memory);
  const samplingNow = () => (exploration.enabled ? { ...sampling, temperature: exploration.temperature } : sampling);

  /**
   * An environment that declares levels trains on a curriculum (./curriculum.ts), kept in `memory` so that a
   * checkpoint carries it. Every training episode is played through `trainingPlayer`, which hands each group's
   * success at its level to the curriculum; the curriculum settles once per step, after the step's episodes have
   * all played (at `updateMade`, before the next step's are drawn, or else when the step returns). So step s's
   * prompts are always drawn at the level settled after step s - 1, the level a checkpoint after step s - 1 holds.
   */
  const curriculum = environment.difficulty ? new Curriculum(environment.difficulty, memory) : null;
  curriculum?.save(memory);
  const levelNow = () => (curriculum ? { level: curriculum.level, max: curriculum.range.max } : undefined);
  const basePlayer = options.playEpisodes ?? (curriculum ? defaultPlayer(environment) : undefined);
  const trainingPlayer: typeof options.playEpisodes =
    curriculum && basePlayer
      ? async (playedProtocol, starts, act, playOptions) => {
          const trajectories = await basePlayer(playedProtocol, starts, act, playOptions);
          for (let g = 0; g < starts.length; g += groupSize) {
            const group = trajectories.slice(g, g + groupSize);
            const level = starts[g]!.difficulty;
            if (level !== undefined && group.length > 0) curriculum.observe(level, group.reduce((a, t) => a + t.score, 0) / group.length);
          }
          return trajectories;
        }
      : options.playEpisodes;

  /**
   * Every rollout is told what is played after it (`nextSpecs`, or an evaluation's `next`), so that a sandboxed
   * player resets those episodes while it samples: the next training step's, or the evaluation's that follows
   * this step. Only a run's first rollout (a resumed run's too) resets its own.
   */
  const runEvaluation = async (next: EpisodeSpec[] | undefined) => {
    const score = await evaluateAndReport(
      step,
      {
        policy,
        environment,
        protocol,
        specs: evaluation,
        maxTokens: sampling.maxTokens,
        temperature: config.evaluation.temperature,
        playEpisodes: options.playEpisodes,
        seats,
        next: next && { specs: next, groupSize },
      },
      hooks,
    );
    evaluations.push({ step, score });
  };

  const checkpoints = checkpointSchedule(config, steps);
  // Each step's specs are made once: as what the rollout before is told comes next (the same rows, so a
  // sandboxed player recognizes the episodes it reset ahead), then as its own.
  // Made again when the curriculum's level moved since: what the step before was told then was a guess.
  const specsByStep = new Map<number, { level: number | undefined; specs: EpisodeSpec[] }>();
  const specsOf = (at: number): EpisodeSpec[] => {
    const level = curriculum?.level;
    let made = specsByStep.get(at);
    if (!made || made.level !== level) specsByStep.set(at, (made = { level, specs: trainingSpecs(config, at - offset, rows, 0, levelNow()) }));
    return made.specs;
  };
  /** What the rollouts of step `at` (0-based) are told is played after them: the next step's, or an evaluation's. */
  const playedAfter = (at: number): { nextSpecs?: EpisodeSpec[]; nextGroupSize?: number } => {
    if (evaluation.length > 0 && evaluatesAfter(at + 1)) return { nextSpecs: evaluation, nextGroupSize: 1 };
    return { nextSpecs: at + 1 < steps ? specsOf(at + 1) : undefined };
  };
  /**
   * Primitives whose calls travel while the worker computes (`overlapsCalls`) get each step's rollouts started as
   * soon as the step before has made its update: its first sample waits on the server behind the update instead
   * of after a round trip. Not before an evaluation or a checkpoint, which see the policy between steps, and the
   * algorithms' RNG-drawing order is the same either way (the worker runs calls in the order made).
   */
  const overlap = policy.primitives.overlapsCalls === true && !league;
  /** The next step's rollouts when started ahead, and when the step before them ended (its time starts there). */
  let ahead: { rollouts: Promise<Trajectory[][]>; since: number; sampling: typeof sampling } | null = null;

  if (step === 0) await runEvaluation(step < steps ? specsOf(step) : undefined);
  while (step < steps) {
    if (hooks.shouldStop?.()) return done(true);
    const started = ahead?.since ?? performance.now();
    const learningRate = learningRateAt(config.algorithm, step - offset);
    const current = step;
    let next: Promise<Trajectory[][]> | undefined;
    // Rollouts started ahead sampled at the temperature of their time; the update is taken at the one they used.
    const stepSampling = ahead?.sampling ?? samplingNow();
    const nextSampling = samplingNow();
    const startsNext = overlap && current + 1 < steps && !evaluatesAfter(current + 1) && !checkpoints.dueByStep(current + 1);
    /** The step's level: its prompts', and its extra rounds' (drawn before it settles). */
    const level = levelNow();
    let settled = false;
    const settle = () => {
      if (settled || !curriculum) return;
      settled = true;
      curriculum.settle();
      curriculum.save(memory);
    };
    const output = await algorithm({
      policy,
      environment,
      protocol,
      specs: specsOf(current),
      seats: league ? league.seats(current) : seats,
      ...playedAfter(current),
      config: { ...config.algorithm, learningRate },
      sampling: stepSampling,
      memory,
      playEpisodes: trainingPlayer,
      moreSpecs: (round) => trainingSpecs(config, current - offset, rows, round, level),
      rollouts: ahead?.rollouts,
      updateMade:
        startsNext || curriculum
          ? () => {
              settle();
              if (!startsNext) return;
              next ??= collectGroups({
                policy,
                environment,
                protocol,
                specs: specsOf(current + 1),
                seats,
                ...playedAfter(current + 1),
                groupSize,
                sampling: nextSampling,
                playEpisodes: trainingPlayer,
              });
              // Awaited by the next step; a loop that stops first leaves them, and their failure, unheard.
              next.catch(() => {});
            }
          : undefined,
    });
    settle();
    specsByStep.delete(current);
    step += 1;
    const finished = performance.now();
    ahead = next ? { rollouts: next, since: finished, sampling: nextSampling } : null;
    exploration.observe(output.metrics["train/signal_groups"] ?? 1, output.metrics["train/mastered_groups"] ?? 0);
    const seconds = (finished - started) / 1000;
    const sampled = output.groups.flat().reduce((a, t) => a + t.turns.reduce((s, turn) => s + turn.actionTokens.length, 0), 0);
    const leagueMetrics = league ? { ...league.observe(output.groups), ...(await league.afterStep(step)) } : {};
    await hooks.onMetrics?.(step, {
      ...output.metrics,
      ...leagueMetrics,
      "train/lr": learningRate,
      ...(level ? { "train/difficulty": level.level } : {}),
      ...(exploration.enabled ? { "train/temperature": stepSampling.temperature } : {}),
      "perf/step_seconds": seconds,
      "perf/sampled_tokens_per_s": sampled / seconds,
      "perf/tokens_per_s": (sampled + (output.metrics["train/tokens"] ?? 0)) / seconds,
    });
    // Warnings before the rollouts: a worker sends a step's reports together after its rollouts.
    for (const warning of health.observe(step, output.groups, output.metrics)) await hooks.onWarning?.(warning);
    await hooks.onRollouts?.(step, "train", output.groups, output.advantages);
    if (evaluatesAfter(step)) await runEvaluation(step < steps ? specsOf(step) : undefined);
    // By time only when no rollouts were started ahead: a checkpoint sees the policy between steps.
    if (next ? checkpoints.dueByStep(step) : checkpoints.due(step)) {
      await hooks.onCheckpoint?.(step, memory, league ? { league: league.state } : undefined);
      checkpoints.saved();
    }
    // A turn of the event loop after every step: the engine's awaits resolve as microtasks, so without it a run
    // whose hooks do no I/O holds the loop for its whole length (timers, messages, a test runner's calls wait).
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
  return done(false);
}

/** Separate policies as the config asks: one per agent of the protocol, each its own. */
function checkSeparatePolicies(config: ExperimentConfig, protocol: Protocol, policies: Record<string, PolicyModel>): Record<string, PolicyModel> {
  if (config.protocol.policies !== "separate") throw new Error(`trainRl was given a policy per agent, but protocol.policies is '${config.protocol.policies}'`);
  const missing = protocol.agents.filter((agent) => !policies[agent]);
  const extra = Object.keys(policies).filter((agent) => !protocol.agents.includes(agent));
  if (missing.length > 0 || extra.length > 0) {
    throw new Error(
      `separate policies: one per agent of the protocol (${protocol.agents.join(", ")}); missing ${missing.join(", ") || "none"}, unknown ${extra.join(", ") || "none"}`,
    );
  }
  const distinct = new Set(protocol.agents.map((agent) => policies[agent]!.primitives));
  if (distinct.size < protocol.agents.length) throw new Error("separate policies: two agents were given the same training client; each agent needs its own");
  return policies;
}
