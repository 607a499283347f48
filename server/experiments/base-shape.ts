/**
 * A base named by a caller (a built-in base or a checkpoint id), checked and measured for a job's footprint: a
 * checkpoint the caller may not see is refused in the same words as one that does not exist, and any base that
 * does not resolve is a BAD_REQUEST naming `field`.
 */
import { TRPCError } from "@trpc/server";
import { isCheckpointBase, resolveBase } from "../jobs";
import { baseModelShape, checkpointShape } from "../bases";
import type { Caller } from "./caller";

export async function baseShapeFor(ctx: Pick<Caller, "db" | "access">, base: string, field: string) {
  if (isCheckpointBase(base)) {
    await ctx.access.require("viewer", { kind: "checkpoint", id: base }).catch((error: unknown) => {
      if (error instanceof TRPCError && error.code === "NOT_FOUND") {
        throw new TRPCError({
          code: "BAD_REQUEST",
          message: `${field}: No checkpoint named '${base}'. A base is a built-in base or a checkpoint id (ckpt_…) from a run's Checkpoints list.`,
        });
      }
      throw error;
    });
  }
  try {
    const resolved = await resolveBase(ctx.db, base);
    return resolved.kind === "builtin" ? baseModelShape(resolved.name) : checkpointShape(resolved.path);
  } catch (error) {
    throw new TRPCError({ code: "BAD_REQUEST", message: `${field}: ${(error as Error).message}` });
  }
}
