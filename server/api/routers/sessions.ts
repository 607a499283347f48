/**
 * Remote training sessions (server/jobs/sessions.ts): a script opens one on a base, then calls the training
 * primitives on it, each call by its own id so that a retry after a lost connection is answered once. What the
 * typed client's `createTrainingClient` speaks (lib/client).
 */
import { tokenizerSpecOfBase } from "../../base-tokenizers";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import {
  type BaseSource,
  callSession,
  callSessionMany,
  DEFAULT_LEASE_SECONDS,
  isCheckpointBase,
  JobRejectedError,
  MAX_CALLS_PER_REQUEST,
  MAX_LEASE_SECONDS,
  openSession,
  resolveBase,
  RunStateError,
  sessionBase,
  sessionMethods,
} from "../../jobs";
import { type SessionCallArgs, sessionCallSchemas } from "@/lib/rl/session-calls";
import { baseShapeFor } from "../../experiments";
import { idempotencyKeyField, idempotently } from "../idempotency";
import { type Context, createTRPCRouter, projectProcedure, protectedProcedure } from "../trpc";

const callId = z.string().min(8, "give each call an id of at least 8 characters (e.g. a UUID)").max(128);
const method = z.enum(sessionMethods);

/**
 * A call's arguments as JSON text: stored and handed to the worker as they are, so that neither the server nor the
 * worker decodes and re-encodes a batch of tokens on the way. Held to what `args` accepts (a JSON object).
 */
const argsJson = z
  .string()
  .refine(isJsonObject, 'argsJson: expected a JSON object as text (JSON.stringify of the arguments, e.g. {"batch":{"tokens":[[1,2]]}})');

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value);
  } catch {
    return false;
  }
}

export const sessionsRouter = createTRPCRouter({
  /** Opens a session: a run of job kind "session", queued for a place like any job. */
  create: protectedProcedure
    .input(
      z.object({
        projectId: z.string().min(1).max(200).optional().describe("the project it belongs to (default: the first the caller may edit)"),
        base: z.string().min(1).max(200).describe("a built-in base or a checkpoint id (ckpt_…)"),
        lora: z
          .object({ rank: z.number().int().min(1).max(256), alpha: z.number().positive().max(4096).optional() })
          .nullable()
          .default(null)
          .describe("train a LoRA adapter of this rank; null: every parameter"),
        valueHead: z.boolean().default(false).describe("attach a value head (PPO)"),
        seed: z
          .number()
          .int()
          .min(0)
          .max(2 ** 31 - 1)
          .default(0),
        leaseSeconds: z
          .number()
          .int()
          .min(2)
          .max(MAX_LEASE_SECONDS)
          .default(DEFAULT_LEASE_SECONDS)
          .describe("a session without a call for this long is saved and ended, and its place freed"),
        name: z.string().trim().min(1).max(120).optional(),
        idempotencyKey: idempotencyKeyField,
      }),
    )
    .mutation(({ ctx, input }) =>
      idempotently(ctx, "sessions.create", input, async (ctx) => {
        const { projectId } = await ctx.access.require("editor", { kind: "project", id: input.projectId ?? (await ctx.access.defaultProject()) });
        const shape = await baseShapeFor(ctx, input.base, "base");
        // The client renders conversations itself: it needs the tokenizer the worker's model reads them with. Read
        // before the session is opened, so that a base whose tokenizer cannot be read leaves no session queued.
        const tokenizer = await tokenizerSpecOfBase(ctx.db, input.base).catch((error: unknown) => {
          throw new TRPCError({ code: "BAD_REQUEST", message: `base: cannot read its tokenizer: ${(error as Error).message}` });
        });
        try {
          const { sessionId } = await openSession(ctx.db, { ...input, projectId, userId: ctx.user.id, shape });
          return { sessionId, contextLength: shape.contextLength, vocabSize: shape.vocabSize, tokenizer };
        } catch (error) {
          if (error instanceof JobRejectedError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
          throw error;
        }
      }),
    ),

  /**
   * A call of a primitive on the session, by the caller's own id: answered when the worker has run it (within
   * `waitMs`), else `state: "queued" | "running"`, and the same call again (same id) waits on. Sent twice, a call
   * runs once.
   */
  invoke: projectProcedure("editor", "run", "sessionId")
    .input(
      z.object({
        sessionId: z.string().min(1).max(200),
        callId,
        method,
        args: z.record(z.string(), z.unknown()).default({}),
        waitMs: z.number().int().min(0).max(60_000).default(20_000),
      }),
    )
    .mutation(async ({ ctx, input, signal }) => {
      const args = input.method === "loadState" ? JSON.parse(await checkpointFolderOf(ctx, input.sessionId, JSON.stringify(input.args))) : input.args;
      return sessionRefusal(() => callSession(ctx.db, { ...input, args }, signal));
    }),

  /**
   * Several calls in one request, run in the order given after every call sent before: answered together when
   * the last has run (within `waitMs`), else each as it stands (`queued`, `running`, or answered), and the same
   * calls again (same ids) wait on. What the client (lib/client) sends for calls made together (a step's
   * forward-backward chunks and its optimizer step), so they cost one request and the worker takes them together.
   * With `after` (a call id of the session, sent in an earlier request that may still be on its way), the calls
   * are submitted only once that call has been, so a client may send its next request without waiting for the
   * last to return; until it has, they are answered `queued` and the same request again waits on. Arguments and
   * results travel as JSON text (`argsJson`, `resultJson`), as the server stores them.
   */
  invokeMany: projectProcedure("editor", "run", "sessionId")
    .input(
      z.object({
        sessionId: z.string().min(1).max(200),
        calls: z
          .array(z.object({ callId, method, argsJson }))
          .min(1, "send at least one call")
          .max(MAX_CALLS_PER_REQUEST, `send at most ${MAX_CALLS_PER_REQUEST} calls in one request; send the rest in the next`),
        after: callId.optional().describe("the call these follow: they are submitted once it has been"),
        waitMs: z.number().int().min(0).max(60_000).default(20_000),
      }),
    )
    .mutation(async ({ ctx, input, signal }) => {
      const calls = await Promise.all(
        input.calls.map(async (call) =>
          call.method === "loadState" ? { ...call, argsJson: await checkpointFolderOf(ctx, input.sessionId, call.argsJson) } : call,
        ),
      );
      return { answers: await sessionRefusal(() => callSessionMany(ctx.db, { ...input, calls }, signal)) };
    }),
});

/**
 * A `loadState` call's arguments as its worker gets them: the client names a checkpoint (`{ checkpointId }`), and
 * the server adds its folder, so that no client names a path on a worker's machine. The caller must see the
 * checkpoint, it must resolve as a base does (`resolveBase`: a state or sampler weights, not set aside), and an
 * adapter must have been trained on the session's own base. Its shape, mode and rank are checked by the worker as
 * it loads.
 */
async function checkpointFolderOf(ctx: Context, sessionId: string, argsJson: string): Promise<string> {
  const parsed = sessionCallSchemas.loadState.safeParse(JSON.parse(argsJson));
  const checkpointId = parsed.success ? parsed.data.checkpointId : null;
  if (checkpointId === null || !isCheckpointBase(checkpointId)) {
    throw new TRPCError({
      code: "BAD_REQUEST",
      message: "loadState: give { checkpointId: 'ckpt_…' }, a checkpoint of a run you can see (its page lists them)",
    });
  }
  await ctx.access.require("viewer", { kind: "checkpoint", id: checkpointId });
  let source: BaseSource;
  try {
    source = await resolveBase(ctx.db, checkpointId);
  } catch (error) {
    throw new TRPCError({ code: "BAD_REQUEST", message: `loadState: ${(error as Error).message}` });
  }
  if (source.kind !== "checkpoint") throw new TRPCError({ code: "BAD_REQUEST", message: `loadState: '${checkpointId}' is no checkpoint` });
  if (source.mode === "lora") {
    const trainedOn = source.parent.kind === "builtin" ? source.parent.name : source.parent.id;
    const base = await sessionBase(ctx.db, sessionId);
    if (trainedOn !== base) {
      throw new TRPCError({
        code: "BAD_REQUEST",
        message: `loadState: checkpoint '${checkpointId}' holds a LoRA adapter trained on base '${trainedOn}'; this session's base is '${base}'`,
      });
    }
  }
  return JSON.stringify({ checkpointId, path: source.path } satisfies SessionCallArgs["loadState"]);
}

/** A refusal of a session's call (it has ended, an id reused) as the caller should hear it. */
async function sessionRefusal<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof RunStateError) throw new TRPCError({ code: error.code, message: error.message });
    throw error;
  }
}
