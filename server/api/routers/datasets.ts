/**
 * Datasets: upload (validated, size-limited, split into train and test), list and preview. Environments read
 * rows by name; SFT runs imitate conversations by name.
 */
import { z } from "zod";
import { builtInDatasets } from "@/lib/envs/datasets";
import { createDataset, listDatasets, MAX_DATASET_BYTES, previewDataset } from "../../datasets";
import { serverEnv } from "../../env";
import { idempotencyKeyField, idempotently } from "../idempotency";
import { createTRPCRouter, projectProcedure, protectedProcedure } from "../trpc";

export const datasetsRouter = createTRPCRouter({
  /** The built-in datasets, and those uploaded to the caller's projects. */
  list: protectedProcedure.query(async ({ ctx }) => {
    const uploaded = await listDatasets(ctx.db, await ctx.access.visibleProjects());
    return {
      builtIn: [...builtInDatasets],
      uploaded: uploaded.map(({ path: _path, ownerId: _owner, ...dataset }) => dataset),
    };
  }),

  /** Validates, splits and stores an upload; a refused one answers BAD_REQUEST in its DatasetError's words. */
  upload: protectedProcedure
    .input(
      z.object({
        name: z.string().min(1).max(64),
        projectId: z.string().min(1).max(200).optional().describe("the project it belongs to (default: the first project the caller may edit)"),
        description: z.string().max(2000).default(""),
        format: z.enum(["jsonl", "csv"]).default("jsonl"),
        text: z.string().max(MAX_DATASET_BYTES, `a dataset holds at most ${MAX_DATASET_BYTES / 2 ** 20} MiB`),
        testShare: z.number().min(0).max(0.9).default(0.2).describe("share of the rows without a split of their own held out for evaluation"),
        idempotencyKey: idempotencyKeyField,
      }),
    )
    .mutation(({ ctx, input }) =>
      idempotently(ctx, "datasets.upload", input, async (ctx) => {
        const { projectId } = await ctx.access.require("editor", { kind: "project", id: input.projectId ?? (await ctx.access.defaultProject()) });
        const {
          path: _path,
          ownerId: _owner,
          ...dataset
        } = await createDataset(ctx.db, serverEnv().ARTIFACTS_DIR, { ...input, ownerId: ctx.user.id, projectId });
        return dataset;
      }),
    ),

  preview: projectProcedure("viewer", "dataset", "id")
    .input(z.object({ id: z.string().min(1).max(200), limit: z.number().int().min(1).max(100).default(20) }))
    .query(async ({ ctx, input }) => ({ rows: await previewDataset(ctx.db, input.id, input.limit) })),
});
