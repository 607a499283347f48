/**
 * Checkpoints and bases: what a run can start from. The built-in bases (shipped checkpoints, made by
 * bin/make-base-models.ts) and every run's checkpoints, with their shape and what made them; any of them may be an
 * agent's base.
 */
import { z } from "zod";
import { builtInBases } from "@/lib/envs/bases";
import { isServerAdmin } from "../../auth";
import { baseModelShape, builtinBaseNames, checkpointShape, importedBaseNames, importRecord } from "../../bases";
import { baseCheckpoints, baseLineageOfRun, checkpointsOfProjects, checkpointsOfRun } from "../../runs";
import { createTRPCRouter, protectedProcedure, sharedRunProcedure } from "../trpc";

/** What made each built-in base, in a few words. */
function builtinOrigin(name: string): string {
  if (name === "generalist-base")
    return "SFT on a generated corpus of generic skills (pick an option, copy, reverse, sort, count, compare, arithmetic, several turns)";
  const recipe = builtInBases[name];
  return recipe ? `SFT on the ${recipe.useCase} demonstrator (${recipe.sft.steps} steps)` : "a shipped checkpoint";
}

function importedOrigin(name: string): string {
  try {
    const record = importRecord(name);
    return record ? `imported ${record.modelType} model from ${record.source}` : "an imported model";
  } catch {
    return "an imported model (its import record is unreadable)";
  }
}

const shapeOf = (read: () => { parameters: number; contextLength: number; dModel: number; nLayers: number; vocabSize: number; architecture?: string }) => {
  try {
    const { parameters, contextLength, dModel, nLayers, vocabSize, architecture } = read();
    return { parameters, contextLength, dModel, nLayers, vocabSize, architecture: architecture ?? "gpt" };
  } catch {
    return null; // a checkpoint whose folder is gone is listed, without a shape, rather than hidden
  }
};

export const checkpointsRouter = createTRPCRouter({
  /** Every base an agent may name: the built-in bases, then the checkpoints of the caller's projects' runs, newest first (at most `limit`). */
  bases: protectedProcedure.input(z.object({ limit: z.number().int().min(1).max(500).default(200) }).default({ limit: 200 })).query(async ({ ctx, input }) => {
    const builtin = [
      ...builtinBaseNames().map((name) => ({ name, origin: builtinOrigin(name), imported: false, shape: shapeOf(() => baseModelShape(name)) })),
      ...importedBaseNames().map((name) => ({ name, origin: importedOrigin(name), imported: true, shape: shapeOf(() => baseModelShape(name)) })),
    ];
    const fromRuns = await baseCheckpoints(ctx.db, await ctx.access.visibleProjects(), input.limit);
    const checkpoints = fromRuns.map(({ path, ...checkpoint }) => ({ ...checkpoint, shape: shapeOf(() => checkpointShape(path)) }));
    return { builtin, checkpoints, mayImport: isServerAdmin(ctx.principal) };
  }),

  /**
   * The checkpoints of the caller's projects' runs, every kind, newest first (at most `limit`); `mayEdit`: the caller
   * may evaluate and export it (an editor of its project).
   */
  list: protectedProcedure.input(z.object({ limit: z.number().int().min(1).max(500).default(200) }).default({ limit: 200 })).query(async ({ ctx, input }) => {
    const rows = await checkpointsOfProjects(ctx.db, await ctx.access.visibleProjects(), input.limit);
    const editable = await ctx.access.editableAmong(rows.map((row) => row.projectId));
    return rows.map(({ projectId, ...row }) => ({ ...row, mayEdit: editable.has(projectId) }));
  }),

  /** A run's checkpoints, newest first; a damaged one says why it was set aside. */
  ofRun: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1) }))
    .query(({ ctx, input }) => checkpointsOfRun(ctx.db, input.runId)),

  /**
   * Where a run's base comes from: "ckpt_b (run x, step 40) ← arithmetic-base", naming only runs the caller reads
   * (a share link's holder: the link's runs); another run's checkpoint reads "a checkpoint of another run".
   */
  lineage: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1).max(200) }))
    .query(({ ctx, input }) => baseLineageOfRun(ctx.db, input.runId, ctx.access.mayReadRun)),
});
