/**
 * Checkpoints and bases: what a run can start from. The built-in bases (shipped checkpoints, made by
 * bin/make-base-models.ts) and every run's checkpoints, with their shape and what made them; any of them may be an
 * agent's base.
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray, isNull } from "drizzle-orm";
import { z } from "zod";
import { builtInBases } from "@/lib/envs/bases";
import { baseCheckpointKinds, checkpoints, experiments, runs } from "../../db";
import { mayManageBases } from "../../base-uploads";
import { describeLineage, resolveBase, UnknownBaseError } from "../../jobs";
import { baseModelShape, builtinBaseNames, checkpointShape, importedBaseNames, importRecord } from "../../bases";
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
    const mayImport = await mayManageBases(ctx.db, ctx.principal);
    const projectIds = await ctx.access.visibleProjects();
    if (projectIds.length === 0) return { builtin, checkpoints: [], mayImport };
    const rows = await ctx.db
      .select({
        id: checkpoints.id,
        step: checkpoints.step,
        kind: checkpoints.kind,
        path: checkpoints.path,
        createdAt: checkpoints.createdAt,
        runId: runs.id,
        runName: runs.name,
        experimentName: experiments.name,
        config: runs.config,
      })
      .from(checkpoints)
      .innerJoin(runs, eq(runs.id, checkpoints.runId))
      .innerJoin(experiments, eq(experiments.id, runs.experimentId))
      .where(and(inArray(checkpoints.kind, baseCheckpointKinds), isNull(checkpoints.setAsideReason), inArray(runs.projectId, projectIds))) // exports and damaged ones are no bases
      .orderBy(desc(checkpoints.createdAt))
      .limit(input.limit);
    const fromRuns = rows.map((row) => {
      const agent = (row.config as { agent?: { base?: string; training?: { mode?: string } } }).agent ?? {};
      return {
        id: row.id,
        step: row.step,
        /** "sampler": the weights alone (a session's saveWeightsForSampler); "state": resumable too. */
        kind: row.kind,
        createdAt: row.createdAt,
        runId: row.runId,
        runName: row.runName,
        experimentName: row.experimentName,
        parentBase: agent.base ?? null,
        mode: agent.training?.mode === "lora" ? ("lora" as const) : ("full" as const),
        shape: shapeOf(() => checkpointShape(row.path)),
      };
    });
    return { builtin, checkpoints: fromRuns, mayImport };
  }),

  /** A run's checkpoints, newest first; a damaged one says why it was set aside. */
  ofRun: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      return ctx.db
        .select({
          id: checkpoints.id,
          step: checkpoints.step,
          kind: checkpoints.kind,
          sizeBytes: checkpoints.sizeBytes,
          createdAt: checkpoints.createdAt,
          setAsideReason: checkpoints.setAsideReason,
        })
        .from(checkpoints)
        .where(eq(checkpoints.runId, input.runId))
        .orderBy(desc(checkpoints.step));
    }),

  /** Where a run's base comes from: "ckpt_b (run x, step 40) ← arithmetic-base". */
  lineage: sharedRunProcedure()
    .input(z.object({ runId: z.string().min(1).max(200) }))
    .query(async ({ ctx, input }) => {
      const [run] = await ctx.db.select({ config: runs.config }).from(runs).where(eq(runs.id, input.runId));
      const base = (run?.config as { agent?: { base?: string } } | undefined)?.agent?.base ?? "";
      try {
        return { base, lineage: describeLineage(await resolveBase(ctx.db, base)) };
      } catch (error) {
        if (error instanceof UnknownBaseError) throw new TRPCError({ code: "NOT_FOUND", message: error.message });
        throw error;
      }
    }),
});
