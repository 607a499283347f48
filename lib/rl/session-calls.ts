/**
 * A remote training session's calls (lib/client → sessions.invoke/invokeMany → the worker's session job): one
 * schema per method, so the client's argument types, the server's check of what it stores, and the worker's
 * parse (once, before the primitive runs) are the same thing. A call whose arguments do not parse is answered
 * with an error naming the field, and the session goes on.
 */
import { z } from "zod";
import { describeConfigError } from "@/lib/sdk/config-errors";

export const sessionMethods = ["forward", "forwardBackward", "optimStep", "sample", "saveState", "saveWeightsForSampler", "loadState", "close"] as const;
export type SessionMethod = (typeof sessionMethods)[number];

const tokenId = z.number().int("a token id is a whole number").min(0, "a token id is 0 or more");
const perToken = z.array(z.array(z.number()));

const trainingBatch = z.object({
  tokens: z.array(z.array(tokenId)).min(1, "give at least one sequence"),
  weights: perToken.optional(),
  samplingLogprobs: perToken.optional(),
  advantages: perToken.optional(),
  returns: perToken.optional(),
  allowedTokens: z.array(z.array(z.array(tokenId).nullable())).optional(),
});

const lossConfig = z.object({
  temperature: z.number().positive().optional(),
  clipLow: z.number().min(0).optional(),
  clipHigh: z.number().min(0).optional(),
  klCoef: z.number().min(0).optional(),
  valueCoef: z.number().min(0).optional(),
  entropyCoef: z.number().min(0).optional(),
});

const actionConstraint = z.union([z.object({ actions: z.array(z.string()) }), z.object({ pattern: z.string() })]);

const sampleOptions = z.object({
  maxTokens: z.number().int().min(1).optional(),
  temperature: z.number().min(0).optional(),
  topP: z.number().gt(0).max(1).optional(),
  topK: z.number().int().min(0).optional(),
  stop: z.array(z.union([z.string(), tokenId])).optional(),
  seed: z.number().int().optional(),
  constraints: z.array(actionConstraint.nullable()).optional(),
});

const saved = z.object({});

export const sessionCallSchemas = {
  forward: z.object({ batch: trainingBatch, options: z.object({ temperature: z.number().positive().optional() }).default({}) }),
  forwardBackward: z.object({
    batch: trainingBatch,
    loss: z.enum(["cross_entropy", "importance_sampling", "ppo", "cispo"], "must be cross_entropy, importance_sampling, ppo or cispo"),
    config: lossConfig.optional(),
  }),
  optimStep: z.object({
    params: z.object({ lr: z.number().min(0), weightDecay: z.number().min(0).optional(), gradClip: z.number().min(0).optional() }),
  }),
  sample: z.object({
    prompts: z.array(z.array(tokenId)).min(1, "give at least one prompt"),
    n: z.number().int().min(1).max(1024),
    params: sampleOptions.optional(),
  }),
  saveState: saved,
  saveWeightsForSampler: saved,
  close: saved,
  /** The server adds the checkpoint's folder (`path`) once it has checked the caller may read it. */
  loadState: z.object({ checkpointId: z.string().min(1).max(200), path: z.string().optional() }),
} satisfies Record<SessionMethod, z.ZodType>;

/** What a client sends for each method. */
export type SessionCallArgs = { [M in SessionMethod]: z.input<(typeof sessionCallSchemas)[M]> };
/** What the worker runs each method with. */
export type ParsedSessionCall = { [M in SessionMethod]: { method: M; args: z.output<(typeof sessionCallSchemas)[M]> } }[SessionMethod];

/** A call's arguments parsed by its method's schema, or an error naming each wrong field ("forward: batch.tokens.0.2: …"). */
export function parseSessionCall(method: SessionMethod, args: unknown): ParsedSessionCall {
  const parsed = sessionCallSchemas[method].safeParse(args);
  if (!parsed.success) throw new Error(`${method}: ${describeConfigError(parsed.error, args).split("\n").join("; ")}`);
  return { method, args: parsed.data } as ParsedSessionCall;
}
