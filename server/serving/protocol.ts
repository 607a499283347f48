/**
 * What an inference job on a worker (server/worker/inference-job.ts) and the web server's serving hub (./hub.ts)
 * say to each other, and nothing that loads either side: the worker's job host imports this entry, not the hub.
 *
 * One exchange at a time per job, over HTTP to `SERVING_EXCHANGE_PATH` with the worker token: the worker posts
 * every event its decoding steps made since its last exchange (tokens of each choice, a request's end or error),
 * and the answer hands it the requests that came in meanwhile and the ids of those whose clients went away. A busy
 * job exchanges once per decoding step (no wait); an idle one long-polls, woken at once by a new request.
 */
import type { ChatMessage } from "@/lib/model/chat";
import type { ActionConstraint } from "@/lib/sdk/action-space";

export const SERVING_EXCHANGE_PATH = "/api/serving/exchange";

/** What a request samples from: a conversation in the base's chat template, plain text, or token ids. */
export type ServePrompt = { kind: "chat"; messages: ChatMessage[] } | { kind: "text"; text: string } | { kind: "tokens"; tokens: number[] };

/** One request as the worker runs it: `n` choices of each prompt (choice index = prompt × n + j). */
export type ServeRequest = {
  id: string;
  prompts: ServePrompt[];
  n: number;
  /** Most new tokens per choice; null: until the context is full. */
  maxTokens: number | null;
  temperature: number;
  topP: number;
  /** Strings that end a choice, cut from its text. */
  stop: string[];
  seed: number | null;
  /** Go on past the tokenizer's end of turn until maxTokens (vLLM's `ignore_eos`: benchmarks of a fixed length). */
  ignoreEos: boolean;
  /** null: no logprobs; k ≥ 0: each token's logprob and its k most likely alternatives. */
  logprobs: number | null;
  constraint: ActionConstraint | null;
  /** A LoRA checkpoint on the job's base (its folder in the artifact store); null: the base itself. */
  adapter: { id: string; path: string } | null;
};

/** One new token of a choice, with logprobs when asked for. */
export type ServedToken = {
  id: number;
  text: string;
  bytes: number[];
  logprob: number;
  top?: { id: number; text: string; bytes: number[]; logprob: number }[];
};

/** What a choice did in one decoding step: its new text, tokens, and finish reason when it ended. */
export type ChoiceDelta = {
  index: number;
  text: string;
  /** New tokens this step (all of them count in `usage`). */
  count: number;
  tokens?: ServedToken[];
  finish: "stop" | "length" | null;
};

export type ServeEvent =
  /** The request's prompts were read: their token counts (for `usage`). */
  | { id: string; type: "started"; promptTokens: number[] }
  | { id: string; type: "delta"; choices: ChoiceDelta[] }
  /** A request refused or failed; `status` is the HTTP status its client gets. */
  | { id: string; type: "error"; status: number; message: string; param: string | null; code: string | null };

/** The job a worker serves, said on its first exchange. */
export type ServingHello = {
  runId: string;
  projectId: string;
  /** The base as the run names it: a built-in or imported base, or a full-weights checkpoint. */
  base: string;
  contextLength: number;
  /** Rows one model (the base or one adapter) decodes at once. */
  rowsPerModel: number;
};

export type ExchangeInput = {
  workerId: string;
  jobId: string;
  hello: ServingHello;
  events: ServeEvent[];
  /** How long to wait for a request when none is waiting (0 while decoding). */
  waitMs: number;
  /** The job is ending (idle, stopped): it takes no new request. */
  closing: boolean;
  /**
   * Rows decoding now, requests waiting for rows, the adapters loaded, and how many requests had their rows freed
   * mid-answer because their client left (since the job started): for the status route and tests.
   */
  load: { rows: number; waiting: number; adapters: string[]; cancelled: number };
};

export type ExchangeAnswer = { requests: ServeRequest[]; cancelled: string[] };

/**
 * Most bytes of events one exchange carries (the rest go with the next): under the 256 KiB the web server's gate
 * lets a request body hold (server/api/limits.ts), with room for the rest of the exchange.
 */
export const EXCHANGE_EVENT_BYTES = 192 * 1024;

/** The most choices one request may ask for, and the longest wait of an idle job's exchange. */
export const MAX_CHOICES = 16;
export const MAX_EXCHANGE_WAIT_MS = 1_000;
