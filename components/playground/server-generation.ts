/**
 * The playground's "Server (/v1)" backend: the prompt goes to this workbench's OpenAI-compatible
 * `POST /v1/chat/completions` (docs/SERVING.md), streamed, with each token's logprob and its alternatives, and is
 * drawn as the same chips as a generation in the browser. Same-origin, so the request carries the page's session as
 * every other API call does: nothing on a local server, the sign-in cookie on a team server.
 *
 * While no worker serves the model the endpoint answers 503 with Retry-After and starts an inference job; the
 * generation waits that long and asks again, saying so, until it is answered or stopped. Stop aborts the request,
 * and the server frees its rows at the job's next step.
 */
import type { ChatMessage } from "@/lib/model/chat";
import { CHIP_ALTERNATIVES, type GeneratedToken, type GenerationSummary, type SamplingSettings } from "./protocol";
import { ServedTokenLabels } from "./token-label";

export const CHAT_COMPLETIONS_PATH = "/v1/chat/completions";

/** What a generation on the server is asked: the model as the picker names it, the messages, and the form's sampling. */
export interface ServerChatRequest {
  model: string;
  messages: ChatMessage[];
  settings: Omit<SamplingSettings, "stop">;
}

/** The request body: OpenAI's chat completion, streamed, with logprobs and as many alternatives as a chip shows. */
export function chatCompletionBody(request: ServerChatRequest): Record<string, unknown> {
  const { settings } = request;
  if (settings.topK > 0) {
    throw new Error(
      `top-k ${settings.topK} cannot be sent to the server: OpenAI's API has no top-k, so /v1 samples with temperature and top-p only. Set top-k to 0, or pick a browser backend.`,
    );
  }
  return {
    model: request.model,
    messages: request.messages,
    max_tokens: settings.maxTokens,
    temperature: settings.temperature,
    top_p: settings.topP,
    ...(settings.seed === undefined ? {} : { seed: settings.seed }),
    stream: true,
    stream_options: { include_usage: true },
    logprobs: true,
    top_logprobs: CHIP_ALTERNATIVES,
  };
}

/** Why the generation waits: the endpoint's 503 (a worker loading the model, or a failed job tried again later). */
export interface ServerWait {
  /** OpenAI's error code: `model_loading` while a worker loads it, `model_failed` after its job failed */
  code: string | null;
  message: string;
  retryInS: number;
}

export interface ServerGenerationSummary extends GenerationSummary {
  /** the reply's text as the endpoint wrote it (special tokens and stop strings left out) */
  text: string;
  /** the prompt's tokens in the model's chat template, as the server counted them (its `usage`) */
  promptTokens: number | null;
}

export interface ServerGeneration {
  done: Promise<ServerGenerationSummary>;
  stop(): void;
  /** the chips' labels: the tokens this generation received, named as the endpoint names them */
  labels: ServedTokenLabels;
  /** the text streamed so far */
  text(): string;
}

/** The longest wait between two tries, whatever Retry-After says. */
const MAX_RETRY_S = 60;

type ChatLogprob = { token: string; logprob: number; bytes: number[] | null; top_logprobs?: { token: string; logprob: number; bytes: number[] | null }[] };
type ChatChunk = {
  choices?: { delta?: { content?: string | null }; logprobs?: { content?: ChatLogprob[] | null } | null; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number } | null;
  error?: { message?: string };
};

/** The message of an OpenAI error object, or what the status says when the body is not one. */
async function errorMessage(response: Response): Promise<string> {
  const body = await response.text();
  try {
    const message = (JSON.parse(body) as ChatChunk).error?.message;
    if (message) return message;
  } catch {
    // Not JSON (a proxy's page): the status says what happened.
  }
  return `the server answered ${response.status} ${response.statusText}`.trim();
}

/** Waits `ms`, or until `signal` aborts. */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/** The `data:` payloads of a server-sent event stream, as they arrive. */
export async function* eventData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5));
      if (data.length > 0) yield data.join("\n");
      end = buffer.indexOf("\n\n");
    }
  }
}

/**
 * Generates on the server: `onToken` for each token with its alternatives, `onWait` while the endpoint answers 503
 * (null once it answers). Resolves with the summary when the reply ends or is stopped; rejects with the endpoint's
 * message when it refuses the request.
 */
export function generateOnServer(
  request: ServerChatRequest,
  handlers: { onToken(token: GeneratedToken): void; onWait(wait: ServerWait | null): void },
): ServerGeneration {
  const abort = new AbortController();
  const labels = new ServedTokenLabels();
  const tokens: number[] = [];
  let text = "";
  let promptTokens: number | null = null;
  let finishReason: GenerationSummary["finishReason"] = "stopped";
  /** when the request that was answered was sent: first-token time and tokens/s count from it, not from the waits */
  let sentAt = 0;
  let firstTokenAt: number | null = null;

  const choice = (served: { token: string; bytes: number[] | null; logprob: number }) => ({
    token: labels.id({ text: served.token, bytes: served.bytes ?? [] }),
    probability: Math.exp(served.logprob),
  });

  /** The endpoint's answer once it serves the model: 503s with Retry-After are waited out and asked again. */
  const answer = async (body: string): Promise<Response> => {
    for (;;) {
      sentAt = performance.now();
      const response = await fetch(CHAT_COMPLETIONS_PATH, { method: "POST", headers: { "content-type": "application/json" }, body, signal: abort.signal });
      const retryAfter = Number(response.headers.get("retry-after") ?? Number.NaN);
      if (response.ok) return response;
      if (response.status !== 503 || !Number.isFinite(retryAfter)) throw new Error(await errorMessage(response));
      const refusal = (await response.json().catch(() => ({}))) as ChatChunk & { error?: { code?: string | null } };
      const retryInS = Math.min(MAX_RETRY_S, Math.max(0.5, retryAfter));
      handlers.onWait({ code: refusal.error?.code ?? null, message: refusal.error?.message ?? "the server is busy", retryInS });
      await sleep(retryInS * 1000, abort.signal);
      abort.signal.throwIfAborted();
    }
  };

  const take = (chunk: ChatChunk) => {
    if (chunk.error) throw new Error(chunk.error.message ?? "the server ended the reply with an error");
    if (chunk.usage) promptTokens = chunk.usage.prompt_tokens;
    const first = chunk.choices?.[0];
    if (!first) return;
    text += first.delta?.content ?? "";
    for (const served of first.logprobs?.content ?? []) {
      firstTokenAt ??= performance.now();
      const drawn = choice(served);
      tokens.push(drawn.token);
      handlers.onToken({ ...drawn, alternatives: (served.top_logprobs ?? []).map(choice) });
    }
    if (first.finish_reason === "stop" || first.finish_reason === "length") finishReason = first.finish_reason;
  };

  const run = async (): Promise<ServerGenerationSummary> => {
    const body = JSON.stringify(chatCompletionBody(request));
    try {
      const response = await answer(body);
      handlers.onWait(null);
      if (!response.body) throw new Error("the server's answer has no body to stream");
      for await (const data of eventData(response.body)) {
        if (data === "[DONE]") break;
        take(JSON.parse(data) as ChatChunk);
      }
    } catch (error) {
      if (!abort.signal.aborted) throw error;
      finishReason = "stopped";
    } finally {
      handlers.onWait(null);
    }
    const elapsedS = (performance.now() - sentAt) / 1000;
    return {
      tokens,
      finishReason,
      firstTokenMs: firstTokenAt !== null ? firstTokenAt - sentAt : 0,
      tokensPerSecond: elapsedS > 0 ? tokens.length / elapsedS : 0,
      text,
      promptTokens,
    };
  };

  return { done: run(), stop: () => abort.abort(), labels, text: () => text };
}
