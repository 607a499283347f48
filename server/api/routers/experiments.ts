import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { useCases } from "@/lib/envs";
import { completeExperiment, experimentSchema } from "@/lib/sdk/experiment";
import { protocolNames } from "@/lib/sdk/protocol";
import {
  createExperiment,
  editorValidation,
  listExperiments,
  listVersions,
  projectOfExperiment,
  renameExperiment,
  requireExperiment,
  requireVersion,
  savedVersion,
  saveVersion,
  validateSource,
  validationProtocol,
} from "../../experiments";
import { idempotencyKeyField, idempotently } from "../idempotency";
import { createTRPCRouter, projectProcedure, protectedProcedure } from "../trpc";

const MAX_FILE_BYTES = 256 * 1024;

const sourceFilesSchema = z
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

/**
 * An experiment's config as a request carries it: parsed by the schema the editor's form is built from, so a save
 * with a wrong field is refused naming it ("config.algorithm.steps: …"), and only a parsed config is stored.
 */
const experimentConfigSchema = experimentSchema.transform(completeExperiment).describe("the experiment's config");

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

  list: protectedProcedure
    .input(z.object({ limit: z.number().int().min(1).max(200).default(50) }).default({ limit: 50 }))
    .query(async ({ ctx, input }) => listExperiments(ctx.db, await ctx.access.visibleProjects(), input.limit)),

  /** An experiment with its latest version, and the caller's role in its project (what the editor lets it do). */
  byId: projectProcedure("viewer", "experiment", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const experiment = await requireExperiment(ctx.db, input.id);
      return { ...experiment, role: await ctx.access.roleIn(experiment.projectId), latest: await savedVersion(ctx.db, input.id, experiment.latestVersion) };
    }),

  versions: projectProcedure("viewer", "experiment", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(({ ctx, input }) => listVersions(ctx.db, input.id)),

  /** One saved version's source and config, as it was saved (versions never change). */
  version: projectProcedure("viewer", "experiment", "id")
    .input(z.object({ id: z.string().min(1), version: z.number().int().min(1) }))
    .query(({ ctx, input }) => requireVersion(ctx.db, input.id, input.version)),

  create: protectedProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, "give the experiment a name").max(120, "a name holds at most 120 characters"),
        projectId: z.string().min(1).max(200).optional().describe("the project it belongs to (default: the first project the caller may edit)"),
        description: z.string().max(2000, "a description holds at most 2000 characters").default(""),
        template: z.string().max(100).optional(),
        files: sourceFilesSchema.default({}),
        config: experimentConfigSchema
          .optional()
          .describe("the experiment's config (default: the template's, or a custom environment's with the schema's defaults)"),
        idempotencyKey: idempotencyKeyField,
      }),
    )
    .mutation(({ ctx, input }) =>
      idempotently(ctx, "experiments.create", input, async (ctx) => {
        const { projectId } = await ctx.access.require("editor", { kind: "project", id: input.projectId ?? (await ctx.access.defaultProject()) });
        return createExperiment(ctx.db, { ...input, projectId, ownerId: ctx.user.id });
      }),
    ),

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
    .mutation(({ ctx, input }) => saveVersion(ctx.db, input.id, input)),

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
        protocol: z
          .object({
            name: z.enum(protocolNames, `must be one of ${protocolNames.join(", ")}`),
            agents: z.array(z.string().min(1).max(64)).min(1, "name at least one agent").max(16, "at most 16 agents"),
          })
          .optional()
          .describe("the experiment's protocol: the dry run plays its agents"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (Object.keys(input.files).length === 0) {
        throw new TRPCError({ code: "BAD_REQUEST", message: "files: give at least one source file, e.g. environment.ts" });
      }
      return validateSource(ctx, await projectOfExperiment(ctx.db, input.experimentId), input.files, {
        ...input,
        protocol: validationProtocol(input.protocol),
      });
    }),

  rename: projectProcedure("editor", "experiment", "id")
    .input(
      z.object({
        id: z.string().min(1),
        name: z.string().trim().min(1, "give the experiment a name").max(120),
        description: z.string().max(2000).optional(),
      }),
    )
    .mutation(({ ctx, input }) => renameExperiment(ctx.db, input.id, input.name, input.description)),
});
