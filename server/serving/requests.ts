/**
 * The OpenAI request bodies the endpoints take (`POST /v1/chat/completions`, `POST /v1/completions`), checked and
 * turned into what a serving job runs (`ServeRequest`). A field OpenAI defines that this server does not do
 * (tools, penalties, echo, best_of > 1) is refused by name rather than ignored; fields it does not know are ignored,
 * as OpenAI's clients add their own.
 */
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { ConstraintError, requestConstraint } from "./constraints";
import { MAX_CHOICES, type ServePrompt, type ServeRequest } from "./protocol";

/** A request refused for its body: 400 with OpenAI's error object, `param` naming the field. */
export class BadRequestError extends Error {
  constructor(
    message: string,
    readonly param: string | null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

/** Most new tokens a request may ask for (a model's context is the tighter limit, checked where it is known). */
export const MAX_NEW_TOKENS = 32_768;

const nullish = <T extends z.ZodType>(schema: T) => schema.nullish();
const text = z.union([z.string(), z.array(z.object({ type: z.literal("text"), text: z.string() })).min(1)]);

const sampling = {
  model: z.string({ message: "model is required: a base, a checkpoint id or run_…:latest" }).min(1, "model is required"),
  max_tokens: nullish(z.number().int().min(1).max(MAX_NEW_TOKENS)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().gt(0).max(1)),
  n: nullish(z.number().int().min(1, `n must be from 1 to ${MAX_CHOICES}`).max(MAX_CHOICES, `n must be from 1 to ${MAX_CHOICES}`)),
  stop: nullish(z.union([z.string().min(1), z.array(z.string().min(1)).max(4)])),
  seed: nullish(z.number().int()),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.object({ include_usage: nullish(z.boolean()) })),
  response_format: z.unknown().optional(),
  guided_regex: z.unknown().optional(),
  guided_choice: z.unknown().optional(),
  ignore_eos: nullish(z.boolean()),
  frequency_penalty: nullish(z.literal(0, "frequency_penalty is not supported; leave it out or 0")),
  presence_penalty: nullish(z.literal(0, "presence_penalty is not supported; leave it out or 0")),
  user: z.unknown().optional(),
};

const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant"], "role must be system, developer, user or assistant (tools are not supported)"),
  content: text,
  name: z.string().optional(),
});

export const chatBodySchema = z.object({
  ...sampling,
  messages: z.array(message).min(1, "messages must hold at least one message"),
  max_completion_tokens: nullish(z.number().int().min(1).max(MAX_NEW_TOKENS)),
  logprobs: nullish(z.boolean()),
  top_logprobs: nullish(z.number().int().min(0).max(20)),
  tools: z.undefined("tools are not supported by this server").optional(),
  tool_choice: z.undefined("tool_choice is not supported by this server").optional(),
});

export const completionBodySchema = z.object({
  ...sampling,
  prompt: z.union([z.string(), z.array(z.string()).min(1), z.array(z.number().int().min(0)).min(1)], {
    message: "prompt must be a string, a list of strings, or a list of token ids",
  }),
  logprobs: nullish(z.number().int().min(0).max(5)),
  echo: nullish(z.literal(false, "echo is not supported")),
  best_of: nullish(z.literal(1, "best_of is not supported beyond 1")),
  suffix: nullish(z.undefined("suffix is not supported")),
});

export type ChatBody = z.infer<typeof chatBodySchema>;
export type CompletionBody = z.infer<typeof completionBodySchema>;

/** The body parsed by `schema`, or the first problem as a BadRequestError naming the field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new BadRequestError("the request body must be a JSON object", null);
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = issue.path.map((part, i) => (typeof part === "number" ? `[${part}]` : `${i > 0 ? "." : ""}${String(part)}`)).join("");
  throw new BadRequestError(`${param ? `${param}: ` : ""}${issue.message}`, param || null);
}

const contentText = (content: z.infer<typeof text>) => (typeof content === "string" ? content : content.map((part) => part.text).join(""));

function common(body: ChatBody | CompletionBody, prompts: ServePrompt[], logprobs: number | null): ServeRequest {
  let constraint: ServeRequest["constraint"];
  try {
    constraint = requestConstraint(body);
  } catch (failure) {
    if (failure instanceof ConstraintError) throw new BadRequestError(failure.message, failure.param);
    throw failure;
  }
  const maxTokens = ("max_completion_tokens" in body ? body.max_completion_tokens : null) ?? body.max_tokens ?? null;
  return {
    id: randomUUID(),
    prompts,
    n: body.n ?? 1,
    maxTokens,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    stop: body.stop === null || body.stop === undefined ? [] : typeof body.stop === "string" ? [body.stop] : body.stop,
    seed: body.seed ?? null,
    ignoreEos: body.ignore_eos === true,
    logprobs,
    constraint,
    adapter: null,
  };
}

export function chatRequest(body: ChatBody): ServeRequest {
  const messages = body.messages.map((m) => ({ role: m.role === "developer" ? ("system" as const) : m.role, content: contentText(m.content) }));
  if (body.top_logprobs !== null && body.top_logprobs !== undefined && !body.logprobs) {
    throw new BadRequestError("top_logprobs needs logprobs: true", "top_logprobs");
  }
  return common(body, [{ kind: "chat", messages }], body.logprobs ? (body.top_logprobs ?? 0) : null);
}

export function completionRequest(body: CompletionBody): ServeRequest {
  const prompt = body.prompt;
  const prompts: ServePrompt[] =
    typeof prompt === "string"
      ? [{ kind: "text", text: prompt }]
      : typeof prompt[0] === "number"
        ? [{ kind: "tokens", tokens: prompt as number[] }]
        : (prompt as string[]).map((one) => ({ kind: "text" as const, text: one }));
  if (prompts.length * (body.n ?? 1) > MAX_CHOICES) {
    throw new BadRequestError(`prompts × n is ${prompts.length * (body.n ?? 1)}, over the ${MAX_CHOICES} choices one request may ask for`, "n");
  }
  return common(body, prompts, body.logprobs ?? null);
}
