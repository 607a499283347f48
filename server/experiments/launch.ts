/**
 * Launching: a run of an experiment's latest version, or an evaluation or export of a run's checkpoint. What the
 * editor refuses to launch is refused here in its words (server/validation/browser.ts); what passes is queued
 * through server/jobs with its job kind's footprint and cost.
 */
import { TRPCError } from "@trpc/server";
import { and, eq, inArray, sql } from "drizzle-orm";
import { useCases } from "@/lib/envs";
import { type ExperimentConfig, imitates, parseExperiment, totalSteps } from "@/lib/sdk/experiment";
import { baseCheckpointKinds, checkpoints, experiments, experimentVersions, jobs, runs } from "../db";
import { datasetFiles } from "../datasets";
import { JobRejectedError, jobCost, launchRun, runNameStamp } from "../jobs";
import type { ValidationReport } from "../sandbox";
import { defaultSandboxLimits } from "../sandbox/browser";
import { type LaunchRefusal, launchRefusal, refusalMessage } from "../validation";
import { baseShapeFor } from "./base-shape";
import type { Caller } from "./caller";
import { touchExperiment } from "./store";
import { validateSource, validationProtocol } from "./validate";

/**
 * Launches a run of an experiment's latest version: snapshots its source and config into the run and queues a
 * training job. Answers with the diagnostics (warnings) of the validation a custom environment passed.
 */
export async function launchExperiment(caller: Caller, experimentId: string, priority: number) {
  const [version] = await caller.db
    .select({
      id: experimentVersions.id,
      config: experimentVersions.config,
      files: experimentVersions.files,
      experimentName: experiments.name,
      projectId: experiments.projectId,
    })
    .from(experiments)
    .innerJoin(experimentVersions, and(eq(experimentVersions.experimentId, experiments.id), eq(experimentVersions.version, experiments.latestVersion)))
    .where(eq(experiments.id, experimentId));
  if (!version) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${experimentId}'` });
  const { config, report } = await launchableOrRefuse(caller, version);
  if (imitates(config) === "dataset") {
    const file = (await datasetFiles(caller.db, version.projectId))[config.sft.dataset];
    if (!file)
      throw new TRPCError({
        code: "BAD_REQUEST",
        message: `sft.dataset: this project has no uploaded dataset named '${config.sft.dataset}'; upload one on the Datasets page`,
      });
    if (file.kind !== "conversations") {
      throw new TRPCError({
        code: "BAD_REQUEST",
        message: `sft.dataset: '${config.sft.dataset}' holds rows, not conversations; SFT needs JSONL lines {"messages": [{"role", "content"}, …]}`,
      });
    }
  }
  const runId = await queueRun(caller, {
    experimentId,
    projectId: version.projectId,
    experimentVersionId: version.id,
    name: `${version.experimentName}-${config.environment}-s${config.seed}-${runNameStamp()}`,
    config,
    kind: config.algorithm.name === "sft" ? "sft" : "rl",
    priority,
    maxTurns: maxTurnsOf(config, report),
  });
  await touchExperiment(caller.db, experimentId);
  return { runId, diagnostics: report?.diagnostics ?? [] };
}

/**
 * Launches a run's experiment version again, source and config as they were, with another seed: `seed`, else one
 * past the highest seed of that version's runs. A training run only: an evaluation or export is made again from its
 * checkpoint, a remote session by its script.
 */
export async function relaunchRun(caller: Caller, runId: string, seed: number | undefined, priority: number) {
  const [run] = await caller.db
    .select({
      name: runs.name,
      config: runs.config,
      experimentId: runs.experimentId,
      projectId: runs.projectId,
      versionId: runs.experimentVersionId,
      files: experimentVersions.files,
      experimentName: experiments.name,
      // Spelled out with aliases: drizzle leaves a column unqualified where it thinks no other table is in sight.
      kind: sql<string | null>`(select j.kind::text from ${jobs} j where j.run_id = ${runs}.id order by j.submitted_at desc limit 1)`,
      highestSeed: sql<number>`(select max(r.seed) from ${runs} r where r.experiment_version_id = ${runs}.experiment_version_id)`,
    })
    .from(runs)
    .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(eq(runs.id, runId));
  if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${runId}'` });
  if (run.kind !== null && run.kind !== "rl" && run.kind !== "sft") {
    const instead =
      run.kind === "session" ? "a remote session's run is made by its script: run the script again" : "make it again from its source run's checkpoints";
    throw new TRPCError({ code: "BAD_REQUEST", message: `Run '${run.name}' is not a training run (its job is ${run.kind}); ${instead}` });
  }
  const nextSeed = seed ?? Number(run.highestSeed ?? 0) + 1;
  const { session: _session, ...experiment } = run.config;
  const { config, report } = await launchableOrRefuse(caller, { config: { ...experiment, seed: nextSeed }, files: run.files, projectId: run.projectId });
  const newRunId = await queueRun(caller, {
    experimentId: run.experimentId,
    projectId: run.projectId,
    experimentVersionId: run.versionId,
    name: `${run.experimentName}-${config.environment}-s${config.seed}-${runNameStamp()}`,
    config,
    kind: config.algorithm.name === "sft" ? "sft" : "rl",
    priority,
    maxTurns: maxTurnsOf(config, report),
  });
  await touchExperiment(caller.db, run.experimentId);
  return { runId: newRunId, seed: config.seed, diagnostics: report?.diagnostics ?? [] };
}

/**
 * The validation a launch of `experimentId` (or, with `checkpointId`, an evaluation of that checkpoint; with `runId`,
 * a re-run of that run) will ask for, done now: a keyed launch runs in one transaction with its idempotency key
 * (server/api/idempotency.ts), and on PGlite (one connection) a transaction holds the whole database, heartbeats and
 * pages included, while it is open. Validated first, outside it, the launch inside reuses the report
 * (`validateReusing`) at once. Answers nothing and refuses nothing: the launch itself refuses what it must, in its
 * words.
 */
export async function validateAhead(
  caller: Pick<Caller, "db" | "access">,
  of: { experimentId: string } | { checkpointId: string } | { runId: string },
): Promise<void> {
  try {
    if ("runId" in of) {
      const [run] = await caller.db
        .select({ config: runs.config, projectId: runs.projectId, versionId: runs.experimentVersionId })
        .from(runs)
        .where(eq(runs.id, of.runId));
      if (run && run.config.environment === "custom") await validateVersion(caller, run.projectId, run.versionId, run.config);
      return;
    }
    if ("experimentId" in of) {
      const [version] = await caller.db
        .select({ config: experimentVersions.config, files: experimentVersions.files, projectId: experiments.projectId })
        .from(experiments)
        .innerJoin(experimentVersions, and(eq(experimentVersions.experimentId, experiments.id), eq(experimentVersions.version, experiments.latestVersion)))
        .where(eq(experiments.id, of.experimentId));
      if (version) await launchableOrRefuse(caller, version);
      return;
    }
    const [source] = await caller.db
      .select({ config: runs.config, projectId: runs.projectId, versionId: runs.experimentVersionId })
      .from(checkpoints)
      .innerJoin(runs, eq(runs.id, checkpoints.runId))
      .where(eq(checkpoints.id, of.checkpointId));
    if (!source) return;
    const config = parseExperiment(source.config);
    if (config.environment === "custom") await validateVersion(caller, source.projectId, source.versionId, config);
  } catch {
    // the launch refuses it, saying why
  }
}

/**
 * Refuses (BAD_REQUEST, in the editor's words) a version the editor would not launch: the same check as its Launch
 * button (`launchRefusal`), on the version's config, its files and, for a custom environment, its validation as the
 * editor asks for it. Returns the parsed config and that validation's report (null for a built-in environment).
 */
async function launchableOrRefuse(
  caller: Pick<Caller, "db" | "access">,
  version: { config: unknown; files: Record<string, string>; projectId: string },
): Promise<{ config: ExperimentConfig; report: ValidationReport | null }> {
  const context = { files: version.files, builtInEnvironments: Object.keys(useCases) };
  const refuse = (refusal: LaunchRefusal) => new TRPCError({ code: "BAD_REQUEST", message: refusalMessage(refusal) });
  // The config's own errors need no validation (a version saved before configs were checked may have some); nor
  // does a built-in environment, which runs no source.
  const before = launchRefusal(version.config, { ...context, report: null });
  if (before) throw refuse(before);
  const config = parseExperiment(version.config);
  if (config.environment !== "custom") return { config, report: null };
  const report = await validateSource(caller, version.projectId, version.files, {
    base: config.agent.base,
    maxTokens: config.agent.sampling.maxTokens,
    protocol: validationProtocol(config.protocol),
  });
  const refusal = launchRefusal(config, { ...context, report });
  if (refusal) throw refuse(refusal);
  return { config, report };
}

/**
 * The clients a run's job holds on its base (server/worker/job-setup.ts): one per agent with separate policies (an
 * evaluation and an export of such a run load each agent's too), and a league run's learner with each snapshot it
 * keeps (`maxMembers`), every snapshot a client of its own.
 */
function clientsOf(kind: "rl" | "sft" | "eval" | "export", config: ExperimentConfig): number {
  if (config.protocol.policies === "separate") return config.protocol.agents.length;
  const league = config.algorithm.league;
  return kind === "rl" && league ? 1 + league.maxMembers : 1;
}

/**
 * Checks a run's base and queues it with the footprint of its job kind: training (RL, SFT) or an evaluation,
 * which holds the weights and a KV cache but no gradients or optimizer.
 */
async function queueRun(
  caller: Caller,
  run: {
    experimentId: string;
    projectId: string;
    experimentVersionId: string;
    name: string;
    config: ExperimentConfig;
    kind: "rl" | "sft" | "eval" | "export";
    priority: number;
    /** The most turns an episode may take: its cost bound counts them (server/jobs/admission.ts). */
    maxTurns: number;
  },
): Promise<string> {
  const { config } = run;
  const shape = await baseShapeFor(caller, config.agent.base, "agent.base");
  const training = run.kind === "rl" || run.kind === "sft";
  try {
    const { runId } = await launchRun(
      caller.db,
      {
        experimentId: run.experimentId,
        projectId: run.projectId,
        experimentVersionId: run.experimentVersionId,
        createdBy: caller.user.id,
        name: run.name,
        config,
        seed: config.seed,
        totalSteps: training ? totalSteps(config) : 0,
      },
      {
        priority: run.priority,
        cost: jobCost({ kind: run.kind, config, model: shape, maxTurns: run.maxTurns }),
        resources: {
          kind: run.kind,
          mode: training ? config.agent.training.mode : "full",
          baseModel: config.agent.base,
          model: { name: config.agent.base, parameters: shape.parameters, dModel: shape.dModel, nLayers: shape.nLayers },
          batchSize:
            run.kind === "sft" ? config.sft.batchSize : training ? config.algorithm.groupSize * config.algorithm.groupsPerStep : config.evaluation.episodes,
          contextLength: shape.contextLength,
          loraRank: training && config.agent.training.mode === "lora" ? config.agent.training.rank : undefined,
          computeSlots: 1,
          clients: clientsOf(run.kind, config),
        },
      },
    );
    return runId;
  } catch (error) {
    if (error instanceof JobRejectedError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
    throw error;
  }
}

/**
 * Queues an evaluation or export of a run's checkpoint: a run of its own, named after the source, whose base is the
 * checkpoint. `evaluation` changes the source run's evaluation settings (an evaluation's episodes, temperature).
 */
export async function queueFromCheckpoint(
  caller: Caller,
  checkpointId: string,
  kind: "eval" | "export",
  evaluation: (current: ExperimentConfig["evaluation"]) => ExperimentConfig["evaluation"] = (current) => current,
): Promise<string> {
  const [source] = await caller.db
    .select({
      runName: runs.name,
      config: runs.config,
      experimentId: runs.experimentId,
      projectId: runs.projectId,
      versionId: runs.experimentVersionId,
      step: checkpoints.step,
    })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(and(eq(checkpoints.id, checkpointId), inArray(checkpoints.kind, baseCheckpointKinds)));
  if (!source) throw new TRPCError({ code: "NOT_FOUND", message: `No checkpoint '${checkpointId}'; a run's checkpoints are listed on its page` });
  const original = parseExperiment(source.config);
  const config = parseExperiment({
    ...original,
    agent: { ...original.agent, base: checkpointId, training: { mode: "full" } },
    evaluation: evaluation(original.evaluation),
  });
  return queueRun(caller, {
    experimentId: source.experimentId,
    projectId: source.projectId,
    experimentVersionId: source.versionId,
    name: `${source.runName}-${kind}-step${source.step}`,
    config,
    kind,
    priority: 0,
    maxTurns:
      kind === "export"
        ? 0
        : maxTurnsOf(config, config.environment === "custom" ? await validateVersion(caller, source.projectId, source.versionId, original) : null),
  });
}

/**
 * The most turns one of a run's episodes may take: a built-in environment's maxTurns, a custom one's from its
 * validation, else the sandbox's cap on an episode's steps (an episode that runs longer fails).
 */
function maxTurnsOf(config: ExperimentConfig, report: ValidationReport | null): number {
  if (config.environment !== "custom") return useCases[config.environment]?.environment.maxTurns ?? defaultSandboxLimits.maxStepsPerEpisode;
  return report?.environment?.maxTurns ?? defaultSandboxLimits.maxStepsPerEpisode;
}

/** A run version's own environment, validated as its launch did (reused when that validation is recent). */
async function validateVersion(caller: Pick<Caller, "db" | "access">, projectId: string, versionId: string, config: ExperimentConfig) {
  const [version] = await caller.db.select({ files: experimentVersions.files }).from(experimentVersions).where(eq(experimentVersions.id, versionId));
  return validateSource(caller, projectId, version?.files ?? {}, {
    base: config.agent.base,
    maxTokens: config.agent.sampling.maxTokens,
    protocol: validationProtocol(config.protocol),
  }).catch(() => null);
}
