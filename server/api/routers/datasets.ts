/**
 * Datasets: upload (validated, size-limited, split into train and test), list, preview, rename and delete. Environments read
 * rows by name; SFT runs imitate conversations by name.
 */
import { z } from "zod";
import { builtInDatasets } from "@/lib/envs/datasets";
import { createDataset, deleteDataset, listDatasets, MAX_DATASET_BYTES, previewDataset, renameDataset } from "../../datasets";
import { serverEnv } from "../../env";
import { idempotencyKeyField, idempotently } from "../idempotency";
import { createTRPCRouter, projectProcedure, protectedProcedure } from "../trpc";

export const datasetsRouter = createTRPCRouter({
  /** The built-in datasets, and those uploaded to the caller's projects; `mayEdit`: the caller may rename and delete it. */
  list: protectedProcedure.query(async ({ ctx }) => {
    const uploaded = await listDatasets(ctx.db, await ctx.access.visibleProjects());
    const editable = await ctx.access.editableAmong(uploaded.map((dataset) => dataset.projectId));
    return {
      builtIn: [...builtInDatasets],
      uploaded: uploaded.map(({ path: _path, ownerId: _owner, ...dataset }) => ({ ...dataset, mayEdit: editable.has(dataset.projectId) })),
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

  /**
   * Renames a dataset in its project; refused (CONFLICT) while a run that has not ended reads it. `stillNamedBy`:
   * the experiments whose latest version names the old name, to be edited.
   */
  rename: projectProcedure("editor", "dataset", "id")
    .input(z.object({ id: z.string().min(1).max(200), name: z.string().min(1).max(64) }))
    .mutation(async ({ ctx, input }) => {
      const { dataset, stillNamedBy } = await renameDataset(ctx.db, input.id, input.name);
      return { id: dataset.id, name: dataset.name, stillNamedBy };
    }),

  /** Deletes a dataset and its file; refused (CONFLICT) while an experiment's latest version or an unended run names it. */
  delete: projectProcedure("editor", "dataset", "id")
    .input(z.object({ id: z.string().min(1).max(200) }))
    .mutation(({ ctx, input }) => deleteDataset(ctx.db, input.id)),
});
