/**
 * Experiments and their versions: a version is the source files and a parsed config, saved together and never
 * changed; the experiment points at its latest.
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { useCases } from "@/lib/envs";
import { GENERALIST_BASE } from "@/lib/sdk/agent";
import { type ExperimentConfig, parseExperiment } from "@/lib/sdk/experiment";
import { type Database, experiments, experimentVersions, newId, projects, runs } from "../db";

export type SourceFiles = Record<string, string>;

const experimentColumns = {
  id: experiments.id,
  projectId: experiments.projectId,
  name: experiments.name,
  description: experiments.description,
  template: experiments.template,
  latestVersion: experiments.latestVersion,
  createdAt: experiments.createdAt,
  updatedAt: experiments.updatedAt,
};

/** The experiments of these projects that are not archived, most recently changed first, with their run counts. */
export async function listExperiments(db: Database, projectIds: string[], limit: number) {
  if (projectIds.length === 0) return [];
  const runCount = sql<number>`(select count(*)::int from ${runs} where ${runs.experimentId} = ${experiments.id})`;
  return db
    .select({ ...experimentColumns, projectName: projects.name, runCount })
    .from(experiments)
    .innerJoin(projects, eq(projects.id, experiments.projectId))
    .where(and(eq(experiments.archived, false), inArray(experiments.projectId, projectIds)))
    .orderBy(desc(experiments.updatedAt))
    .limit(limit);
}

/** An experiment, or NOT_FOUND. */
export async function requireExperiment(db: Database, id: string) {
  const [row] = await db.select(experimentColumns).from(experiments).where(eq(experiments.id, id)).limit(1);
  if (!row) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${id}'` });
  return row;
}

/** One version of an experiment with its source and config, or null. */
export async function savedVersion(db: Database, experimentId: string, version: number) {
  const [row] = await db
    .select({
      id: experimentVersions.id,
      version: experimentVersions.version,
      files: experimentVersions.files,
      config: experimentVersions.config,
      message: experimentVersions.message,
      createdAt: experimentVersions.createdAt,
    })
    .from(experimentVersions)
    .where(and(eq(experimentVersions.experimentId, experimentId), eq(experimentVersions.version, version)))
    .limit(1);
  return row ?? null;
}

/** One saved version, or NOT_FOUND naming the versions there are. */
export async function requireVersion(db: Database, experimentId: string, version: number) {
  const experiment = await requireExperiment(db, experimentId);
  const row = await savedVersion(db, experimentId, version);
  if (!row)
    throw new TRPCError({
      code: "NOT_FOUND",
      message: `Experiment '${experiment.name}' has no version ${version}; its versions are 1 to ${experiment.latestVersion}.`,
    });
  return row;
}

/** An experiment's versions, newest first, without their files. */
export async function listVersions(db: Database, experimentId: string) {
  await requireExperiment(db, experimentId);
  return db
    .select({ id: experimentVersions.id, version: experimentVersions.version, message: experimentVersions.message, createdAt: experimentVersions.createdAt })
    .from(experimentVersions)
    .where(eq(experimentVersions.experimentId, experimentId))
    .orderBy(desc(experimentVersions.version));
}

/** The project an experiment belongs to, or NOT_FOUND. */
export async function projectOfExperiment(db: Database, experimentId: string): Promise<string> {
  return (await requireExperiment(db, experimentId)).projectId;
}

export type NewExperiment = {
  projectId: string;
  ownerId: string;
  name: string;
  description: string;
  /** A built-in use case whose config is the starting point when no config is given. */
  template?: string;
  files: SourceFiles;
  config?: ExperimentConfig;
};

/**
 * Makes an experiment and its version 1. Its config is the one given, else the template's, else the experiment's
 * own environment.ts with the schema's defaults on the generalist base.
 */
export async function createExperiment(db: Database, input: NewExperiment) {
  let template: object = { environment: "custom", agent: { base: GENERALIST_BASE } };
  if (input.template !== undefined) {
    const useCase = useCases[input.template];
    if (!useCase) {
      throw new TRPCError({
        code: "BAD_REQUEST",
        message: `template: no built-in template '${input.template}'; templates: ${Object.keys(useCases).join(", ")}`,
      });
    }
    template = useCase.template;
  }
  const config = input.config ?? parseExperiment({ ...template, name: input.name });
  const id = newId("exp");
  const versionId = newId("ver");
  await db.transaction(async (tx) => {
    await tx.insert(experiments).values({
      id,
      projectId: input.projectId,
      ownerId: input.ownerId,
      name: input.name,
      description: input.description,
      template: input.template ?? null,
      latestVersion: 1,
    });
    await tx.insert(experimentVersions).values({ id: versionId, experimentId: id, version: 1, files: input.files, config, message: "created" });
  });
  return { id, projectId: input.projectId, versionId, version: 1 };
}

/** Saves the source and a parsed config as the experiment's next version; earlier versions stay as they were. */
export async function saveVersion(db: Database, experimentId: string, version: { files: SourceFiles; config: ExperimentConfig; message: string }) {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .update(experiments)
      .set({ latestVersion: sql`${experiments.latestVersion} + 1`, updatedAt: new Date() })
      .where(eq(experiments.id, experimentId))
      .returning({ latestVersion: experiments.latestVersion });
    if (!row) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${experimentId}'` });
    const versionId = newId("ver");
    await tx
      .insert(experimentVersions)
      .values({ id: versionId, experimentId, version: row.latestVersion, files: version.files, config: version.config, message: version.message });
    return { versionId, version: row.latestVersion };
  });
}

/**
 * A run's exact source and config (its experiment version's files, the config it ran with) saved as its
 * experiment's next version, to edit and launch again.
 */
export async function cloneRunAsVersion(db: Database, runId: string) {
  const [run] = await db
    .select({ name: runs.name, experimentId: runs.experimentId, config: runs.config, files: experimentVersions.files })
    .from(runs)
    .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
    .where(eq(runs.id, runId));
  if (!run) throw new TRPCError({ code: "NOT_FOUND", message: `No run with id '${runId}'` });
  const { session: _session, ...config } = run.config;
  const saved = await saveVersion(db, run.experimentId, { files: run.files, config, message: `cloned from run ${run.name}` });
  return { experimentId: run.experimentId, ...saved };
}

export async function renameExperiment(db: Database, id: string, name: string, description?: string) {
  const updated = await db
    .update(experiments)
    .set({ name, ...(description !== undefined ? { description } : {}), updatedAt: new Date() })
    .where(eq(experiments.id, id))
    .returning({ id: experiments.id });
  if (updated.length === 0) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${id}'` });
  return { id };
}

/** Marks an experiment as changed now (a launch counts). */
export async function touchExperiment(db: Database, id: string) {
  await db.update(experiments).set({ updatedAt: new Date() }).where(eq(experiments.id, id));
}
