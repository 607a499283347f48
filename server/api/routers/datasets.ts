/**
 * Datasets: upload (validated, size-limited, split into train and test), list and preview. Environments read
 * rows by name; SFT runs imitate conversations by name.
 */
import { TRPCError } from "@trpc/server";
import { eq } from "drizzle-orm";
import { z } from "zod";
import { builtInDatasets } from "@/lib/envs/datasets";
import { datasets } from "../../db";
import { createDataset, DatasetError, listDatasets, MAX_DATASET_BYTES, previewDataset } from "../../datasets";
import { serverEnv } from "../../env";
import { createTRPCRouter, protectedProcedure } from "../trpc";

export const datasetsRouter = createTRPCRouter({
  list: protectedProcedure.query(async ({ ctx }) => {
    const uploaded = await listDatasets(ctx.db);
    return {
      builtIn: [...builtInDatasets],
      uploaded: uploaded.map(({ path: _path, ownerId: _owner, ...dataset }) => dataset),
    };
  }),

  upload: protectedProcedure
    .input(
      z.object({
        name: z.string().min(1).max(64),
        description: z.string().max(2000).default(""),
        format: z.enum(["jsonl", "csv"]).default("jsonl"),
        text: z.string().max(MAX_DATASET_BYTES, `a dataset holds at most ${MAX_DATASET_BYTES / 2 ** 20} MiB`),
        testShare: z.number().min(0).max(0.9).default(0.2).describe("share of the rows without a split of their own held out for evaluation"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      try {
        const { path: _path, ownerId: _owner, ...dataset } = await createDataset(ctx.db, serverEnv().ARTIFACTS_DIR, { ownerId: ctx.user.id, ...input });
        return dataset;
      } catch (error) {
        if (error instanceof DatasetError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
        throw error;
      }
    }),

  preview: protectedProcedure
    .input(z.object({ name: z.string().min(1).max(64), limit: z.number().int().min(1).max(100).default(20) }))
    .query(async ({ ctx, input }) => {
      const [row] = await ctx.db.select({ path: datasets.path }).from(datasets).where(eq(datasets.name, input.name));
      if (!row) throw new TRPCError({ code: "NOT_FOUND", message: `No dataset named '${input.name}'` });
      return { rows: previewDataset(row.path, input.limit) };
    }),
});
