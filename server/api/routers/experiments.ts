import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { z } from "zod";
import { useCases } from "@/lib/envs";
import { validateReusing } from "../../validation";
import type { ValidationReport } from "../../sandbox";
import { datasetFiles } from "../../datasets";
import { isCheckpointBase, resolveBase } from "../../jobs";
import { baseModelShape, checkpointShape } from "../../worker/base-catalog";
import { type Context, createTRPCRouter, projectProcedure, protectedProcedure } from "../trpc";
import { type Database, newId, experiments, experimentVersions, projects, runs } from "../../db";

const MAX_FILE_BYTES = 256 * 1024;

export const sourceFilesSchema = z
  .record(
    z
      .string()
      .max(200)
      .regex(/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/, "file paths use letters, digits, '_', '.', '-' and '/'")
      .refine(
        (p) => !p.split("/").some((part) => part === "." || part === ".."),
        "file paths use letters, digits, '_', '.', '-' and '/', without '.' or '..' parts",
      ),
    z.string().max(MAX_FILE_BYTES, `a source file holds at most ${MAX_FILE_BYTES / 1024} KiB`),
  )
  .refine((files) => Object.keys(files).length <= 50, "an experiment holds at most 50 files")
  .describe("source files by path");

export const experimentConfigSchema = z.record(z.string(), z.unknown()).describe("the experiment's config");

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

/** One version of an experiment with its source and config, or null. */
async function savedVersion(db: Database, experimentId: string, version: number) {
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

/** How the editor validates (experiments.validate's defaults); `runs.launch` validates a version so too. */
export const editorValidation = { episodes: 3, typeCheck: true, maxTokens: 32 } as const;

/**
 * Validates source files in a validation process, with the datasets of the project they belong to and, when the
 * base is known, its context length (the first prompt must leave `maxTokens` of it). The editor's validations and
 * `runs.launch`'s go through here, so that the same source, base and reply length give the same report, reused
 * (`validateReusing`) when a launch follows its validation.
 */
export async function validateSource(
  ctx: Pick<Context, "db" | "access">,
  projectId: string,
  files: Record<string, string>,
  options: { entry?: string; episodes?: number; typeCheck?: boolean; base?: string; maxTokens?: number },
): Promise<ValidationReport> {
  const maxTokens = options.maxTokens ?? editorValidation.maxTokens;
  let context;
  if (options.base) {
    try {
      // Another project's checkpoint is as unknown here as anywhere (the catch below leaves the context out).
      if (isCheckpointBase(options.base)) await ctx.access.require("viewer", { kind: "checkpoint", id: options.base });
      const base = await resolveBase(ctx.db, options.base);
      const shape = base.kind === "builtin" ? baseModelShape(base.name) : checkpointShape(base.path);
      context = { base: options.base, contextLength: shape.contextLength, maxTokens };
    } catch {
      // an unknown base is the config form's error to show; the source is still validated
    }
  }
  try {
    return await validateReusing(files, {
      entry: options.entry,
      episodes: options.episodes ?? editorValidation.episodes,
      typeCheck: options.typeCheck ?? editorValidation.typeCheck,
      context,
      datasetFiles: await datasetFiles(ctx.db, projectId),
    });
  } catch (error) {
    // The validation's own failures (it overran its time, its process stopped) are the user's to act on.
    throw new TRPCError({ code: "UNPROCESSABLE_CONTENT", message: (error as Error).message, cause: error });
  }
}

async function requireExperiment(db: Database, id: string) {
  const [row] = await db.select(experimentColumns).from(experiments).where(eq(experiments.id, id)).limit(1);
  if (!row) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${id}'` });
  return row;
}

export const experimentsRouter = createTRPCRouter({
  /** The built-in use cases a new experiment can start from. */
  templates: protectedProcedure.query(() =>
    Object.entries(useCases).map(([key, useCase]) => ({
      key,
      title: useCase.title,
      description: useCase.environment.description ?? "",
      algorithm: String((useCase.template.algorithm as { name?: string } | undefined)?.name ?? "grpo"),
    })),
  ),

  list: protectedProcedure.input(z.object({ limit: z.number().int().min(1).max(200).default(50) }).default({ limit: 50 })).query(async ({ ctx, input }) => {
    const projectIds = await ctx.access.visibleProjects();
    if (projectIds.length === 0) return [];
    const runCount = sql<number>`(select count(*)::int from ${runs} where ${runs.experimentId} = ${experiments.id})`;
    return ctx.db
      .select({ ...experimentColumns, projectName: projects.name, runCount })
      .from(experiments)
      .innerJoin(projects, eq(projects.id, experiments.projectId))
      .where(and(eq(experiments.archived, false), inArray(experiments.projectId, projectIds)))
      .orderBy(desc(experiments.updatedAt))
      .limit(input.limit);
  }),

  /** An experiment with its latest version, and the caller's role in its project (what the editor lets it do). */
  byId: projectProcedure("viewer", "experiment", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const experiment = await requireExperiment(ctx.db, input.id);
      return { ...experiment, role: await ctx.access.roleIn(experiment.projectId), latest: await savedVersion(ctx.db, input.id, experiment.latestVersion) };
    }),

  versions: projectProcedure("viewer", "experiment", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      await requireExperiment(ctx.db, input.id);
      return ctx.db
        .select({
          id: experimentVersions.id,
          version: experimentVersions.version,
          message: experimentVersions.message,
          createdAt: experimentVersions.createdAt,
        })
        .from(experimentVersions)
        .where(eq(experimentVersions.experimentId, input.id))
        .orderBy(desc(experimentVersions.version));
    }),

  /** One saved version's source and config, as it was saved (versions never change). */
  version: projectProcedure("viewer", "experiment", "id")
    .input(z.object({ id: z.string().min(1), version: z.number().int().min(1) }))
    .query(async ({ ctx, input }) => {
      const experiment = await requireExperiment(ctx.db, input.id);
      const row = await savedVersion(ctx.db, input.id, input.version);
      if (!row)
        throw new TRPCError({
          code: "NOT_FOUND",
          message: `Experiment '${experiment.name}' has no version ${input.version}; its versions are 1 to ${experiment.latestVersion}.`,
        });
      return row;
    }),

  create: protectedProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, "give the experiment a name").max(120, "a name holds at most 120 characters"),
        projectId: z.string().min(1).max(200).optional().describe("the project it belongs to (default: the first project the caller may edit)"),
        description: z.string().max(2000, "a description holds at most 2000 characters").default(""),
        template: z.string().max(100).optional(),
        files: sourceFilesSchema.default({}),
        config: experimentConfigSchema.default({}),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const { projectId } = await ctx.access.require("editor", { kind: "project", id: input.projectId ?? (await ctx.access.defaultProject()) });
      const id = newId("exp");
      const versionId = newId("ver");
      if (input.template !== undefined) {
        const useCase = useCases[input.template];
        if (!useCase) {
          throw new TRPCError({
            code: "BAD_REQUEST",
            message: `template: no built-in template '${input.template}'; templates: ${Object.keys(useCases).join(", ")}`,
          });
        }
        // A template's config is the starting point; what the caller gave wins.
        if (Object.keys(input.config).length === 0) input.config = { ...useCase.template, name: input.name } as Record<string, unknown>;
      }
      await ctx.db.transaction(async (tx) => {
        await tx.insert(experiments).values({
          id,
          projectId,
          ownerId: ctx.user.id,
          name: input.name,
          description: input.description,
          template: input.template ?? null,
          latestVersion: 1,
        });
        await tx.insert(experimentVersions).values({
          id: versionId,
          experimentId: id,
          version: 1,
          files: input.files,
          config: input.config,
          message: "created",
        });
      });
      return { id, projectId, versionId, version: 1 };
    }),

  /** Saves the source and config as a new immutable version; earlier versions stay as they were. */
  save: projectProcedure("editor", "experiment", "id")
    .input(
      z.object({
        id: z.string().min(1),
        files: sourceFilesSchema,
        config: experimentConfigSchema,
        message: z.string().max(500).default(""),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      return ctx.db.transaction(async (tx) => {
        const [row] = await tx
          .update(experiments)
          .set({ latestVersion: sql`${experiments.latestVersion} + 1`, updatedAt: new Date() })
          .where(eq(experiments.id, input.id))
          .returning({ latestVersion: experiments.latestVersion });
        if (!row) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${input.id}'` });
        const versionId = newId("ver");
        await tx.insert(experimentVersions).values({
          id: versionId,
          experimentId: input.id,
          version: row.latestVersion,
          files: input.files,
          config: input.config,
          message: input.message,
        });
        return { versionId, version: row.latestVersion };
      });
    }),

  /**
   * Compiles the source, runs it in the sandbox for a few episodes with probing actions, and returns
   * diagnostics (file, line, column) without launching anything.
   */
  validate: projectProcedure("editor", "experiment", "experimentId")
    .input(
      z.object({
        experimentId: z.string().min(1).max(200).describe("the experiment whose project's datasets the environment may read"),
        files: sourceFilesSchema,
        entry: z.string().max(200).optional(),
        episodes: z.number().int().min(1).max(20).default(editorValidation.episodes),
        typeCheck: z.boolean().default(editorValidation.typeCheck),
        base: z.string().max(200).optional().describe("the agent's base: the first prompt must leave maxTokens of its context"),
        maxTokens: z.number().int().min(1).max(4096).default(editorValidation.maxTokens).describe("agent.sampling.maxTokens"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (Object.keys(input.files).length === 0) {
        throw new TRPCError({ code: "BAD_REQUEST", message: "files: give at least one source file, e.g. environment.ts" });
      }
      const [experiment] = await ctx.db.select({ projectId: experiments.projectId }).from(experiments).where(eq(experiments.id, input.experimentId));
      return validateSource(ctx, experiment!.projectId, input.files, input);
    }),

  rename: projectProcedure("editor", "experiment", "id")
    .input(
      z.object({
        id: z.string().min(1),
        name: z.string().trim().min(1, "give the experiment a name").max(120),
        description: z.string().max(2000).optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const updated = await ctx.db
        .update(experiments)
        .set({ name: input.name, ...(input.description !== undefined ? { description: input.description } : {}), updatedAt: new Date() })
        .where(eq(experiments.id, input.id))
        .returning({ id: experiments.id });
      if (updated.length === 0) throw new TRPCError({ code: "NOT_FOUND", message: `No experiment with id '${input.id}'` });
      return { id: input.id };
    }),
});
