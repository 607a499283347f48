/**
 * Batched sampling over a key/value cache: every prompt is prefilled once, forked into n rows, and all rows
 * then advance one token per step together.
 *
 * The logprob reported for a token is log softmax(logits / temperature) of that token: the policy's sampling
 * distribution at the given temperature, before any top-k or top-p truncation. Under legal actions
 * (`constraints`, one per prompt) each row may only write a legal action and then end its turn: the logits of every
 * other token are -Infinity, so the logprob is that of the constrained distribution, and the allowed ids at each
 * token come back with the sample (`allowedTokens`) for `forward` to use. `forward` and `forwardBackward`
 * given the same temperature compute exactly this quantity, so sampled logprobs can serve as the "old" logprobs
 * of importance sampling, PPO and CISPO. At temperature 0 (greedy) the logprobs are those of temperature 1.
 */
import { z } from "zod";
import { DECODER_CACHE_BYTES, turnClock } from "@/lib/model/budgets";
import type { Decoder } from "@/lib/model/engine";
import type { Rng } from "@/lib/model/rng";
import { automatonFor } from "@/lib/sdk/action-space";
import { type TokenAutomaton, tokenAutomaton } from "@/lib/model/token-automaton";
import type { Tokenizer } from "@/lib/model/tokenizer";
import { drawToken } from "@/lib/model/sampling";
import { logprobOf } from "./batch";

export const sampleParamsSchema = z.object({
  maxTokens: z.number().int().min(1).default(64).describe("most new tokens per sample"),
  temperature: z.number().min(0).default(1).describe("softmax temperature; 0 picks the most likely token"),
  topP: z.number().gt(0).max(1).default(1).describe("sample from the smallest set of tokens whose probability reaches topP"),
  topK: z.number().int().min(0).default(0).describe("sample from the K most likely tokens (0 = all)"),
  stop: z
    .array(z.union([z.string().min(1), z.number().int().min(0)]))
    .optional()
    .describe("token ids or strings that end a sample (kept in tokens, cut from text); default: the tokenizer's end of turn"),
  seed: z.number().int().optional().describe("seed for this call alone; without it the client's generator is used"),
  constraints: z
    .array(z.union([z.object({ actions: z.array(z.string()) }), z.object({ pattern: z.string() }), z.null()]))
    .optional()
    .describe("per prompt: the legal actions ({ actions } or { pattern }) its samples are held to, or null; the byte tokenizer or a byte-level BPE"),
});
export type SampleParams = z.infer<typeof sampleParamsSchema>;
export type SampleParamsInput = z.input<typeof sampleParamsSchema>;

export interface SampledSequence {
  /** the new tokens (the prompt is not repeated) */
  tokens: number[];
  /** the new tokens as text, special tokens left out, cut before a stop string */
  text: string;
  /** per new token: log softmax(logits / temperature) of the token, untruncated */
  logprobs: number[];
  finishReason: "stop" | "length";
  /** under a constraint: the token ids that were allowed at each new token */
  allowedTokens?: number[][];
}

export interface SampleResult {
  /** [prompts][n] */
  samples: SampledSequence[][];
}

export function parseSampleParams(input: SampleParamsInput | undefined): SampleParams {
  const parsed = sampleParamsSchema.safeParse(input ?? {});
  if (!parsed.success) throw new Error(`invalid sample params: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

function checkSampleRequest(prompts: readonly (readonly number[])[], n: number, params: SampleParams, contextLength: number): void {
  if (!Number.isInteger(n) || n < 1) throw new Error(`n must be a whole number ≥ 1, got ${n}`);
  prompts.forEach((prompt, i) => {
    if (prompt.length === 0) throw new Error(`prompts[${i}] is empty; start it with at least one token (e.g. bos)`);
    if (prompt.length > contextLength) {
      throw new Error(`prompts[${i}] has ${prompt.length} tokens, over the model's contextLength=${contextLength}`);
    }
  });
  if (params.constraints && params.constraints.length !== prompts.length) {
    throw new Error(`constraints has ${params.constraints.length} entries; give one (or null) per prompt, ${prompts.length} in all`);
  }
}

/**
 * Samples `n` completions of each prompt with decoders of no more capacity than the rows need (the longest prompt
 * and `maxTokens`, at most the context) and no more cache than DECODER_CACHE_BYTES (lib/model/budgets.ts) each: in
 * one decoder when the whole sample fits, else in turns of whole prompts' groups (or parts of one). 256 rows of a
 * 135M model (30 layers of 576) asked for 8.4 GiB of cache at a context of 256, over what a WebAssembly memory holds. `cacheBytesPerPosition`: what one row's position costs the cache.
 * Decoded in turns, a seeded sample draws in another order than in one decoder; a greedy one is the same.
 */
export async function sampleInTurns(
  open: (rows: number, capacity: number) => Decoder,
  cacheBytesPerPosition: number,
  request: SampleRequest,
  cacheBudgetBytes = DECODER_CACHE_BYTES,
): Promise<SampleResult> {
  const { prompts, n, params, contextLength } = request;
  checkSampleRequest(prompts, n, params, contextLength);
  const longest = prompts.reduce((most, prompt) => Math.max(most, prompt.length), 1);
  const capacity = Math.min(contextLength, longest + params.maxTokens);
  const rowsAtOnce = Math.max(1, Math.floor(cacheBudgetBytes / (cacheBytesPerPosition * capacity)));
  const samples: SampledSequence[][] = prompts.map(() => []);
  const run = async (indices: number[], k: number) => {
    const decoder = open(indices.length * k, capacity);
    try {
      const constraints = params.constraints && indices.map((i) => params.constraints![i]!);
      const part = await sampleWithDecoder(decoder, { ...request, prompts: indices.map((i) => prompts[i]!), n: k, params: { ...params, constraints } });
      indices.forEach((i, j) => samples[i]!.push(...part.samples[j]!));
    } finally {
      decoder.dispose();
    }
  };
  const all = prompts.map((_, i) => i);
  if (rowsAtOnce >= n) {
    const promptsAtOnce = Math.floor(rowsAtOnce / n);
    for (let start = 0; start < all.length; start += promptsAtOnce) await run(all.slice(start, start + promptsAtOnce), n);
  } else {
    for (const i of all) for (let done = 0; done < n; done += rowsAtOnce) await run([i], Math.min(rowsAtOnce, n - done));
  }
  return { samples };
}

/** What a sample is of: `n` completions of each prompt, drawn with `rng`, of a model of `V` ids and `contextLength`. */
export type SampleRequest = {
  prompts: readonly (readonly number[])[];
  n: number;
  params: SampleParams;
  rng: Rng;
  V: number;
  contextLength: number;
  tokenizer: Tokenizer;
  /** The most prompt tokens one prefill runs at once (a stretch of work: lib/model/budgets.ts); default all. */
  prefillTokens?: number;
};

/**
 * Samples on `decoder`. Work longer than a second gives the event loop a turn between decoding steps and between
 * parts of the prefill (`turnClock`), so a worker's heartbeat goes on while a large model samples.
 */
async function sampleWithDecoder(decoder: Decoder, request: SampleRequest): Promise<SampleResult> {
  const { prompts, n, params, rng, V, contextLength, tokenizer } = request;
  const clock = turnClock(); // the request was checked by sampleInTurns
  const stop = params.stop ?? tokenizer.stopTokens;
  // Under a constraint, a reply ends where the tokenizer's turn ends.
  const endOfTurn = tokenizer.stopTokens[0]!;
  const rows = prompts.length * n;
  // Per row: its prompt's automaton and where in it the row's action is.
  const rowAutomaton: (TokenAutomaton | null)[] = Array.from({ length: rows }, (_, r) => {
    const constraint = params.constraints?.[Math.floor(r / n)] ?? null;
    return constraint ? tokenAutomaton(automatonFor(constraint), tokenizer) : null;
  });
  const rowState = new Int32Array(rows);
  const masked = new Float32Array(V);
  const stopIds = new Set(stop.filter((s): s is number => typeof s === "number"));
  const stopStrings = stop.filter((s): s is string => typeof s === "string");
  const out: SampledSequence[] = Array.from({ length: rows }, () => ({
    tokens: [],
    text: "",
    logprobs: [],
    finishReason: "length" as const,
  }));
  const rowLogits = new Float32Array(rows * V); // [rows, V] logits for each row's next token

  // Prefill: prompts of one length go through the model together, then each fills its n rows.
  const byLength = new Map<number, number[]>();
  prompts.forEach((p, i) => byLength.set(p.length, [...(byLength.get(p.length) ?? []), i]));
  for (const [length, all] of byLength) {
    const atOnce = Math.max(1, Math.floor((request.prefillTokens ?? Number.POSITIVE_INFINITY) / length));
    for (let start = 0; start < all.length; start += atOnce) {
      if (clock.due()) await clock.turn();
      const group = all.slice(start, start + atOnce);
      const logits = decoder.extend(
        group.map((i) => i * n),
        group.map((i) => prompts[i]),
      );
      group.forEach((i, g) => {
        for (let s = 0; s < n; s++) {
          if (s > 0) decoder.copyRow(i * n, i * n + s);
          rowLogits.set(logits.subarray(g * V, (g + 1) * V), (i * n + s) * V);
        }
      });
    }
  }

  let active = Array.from({ length: rows }, (_, r) => r);
  const probs = new Float64Array(V);
  const logprobTemperature = params.temperature === 0 ? 1 : params.temperature;
  /** One decoding step's draws (a plain function: the hot loop stays out of the async one). Returns the rows going on. */
  const draw = (active: number[]): number[] => {
    const next: number[] = [];
    for (const row of active) {
      const seq = out[row];
      const automaton = rowAutomaton[row];
      let source = rowLogits;
      let offset = row * V;
      if (automaton) {
        // A copy: the list goes out with the sample, and the automaton keeps its own for the next row.
        const allowed = [...automaton.tokens(rowState[row]!)];
        if (automaton.accepting(rowState[row]!)) allowed.push(endOfTurn);
        masked.fill(-Infinity);
        for (const t of allowed) masked[t] = rowLogits[offset + t]!;
        (seq.allowedTokens ??= []).push(allowed);
        source = masked;
        offset = 0;
      }
      const token = drawToken(source, offset, V, params, rng, probs);
      seq.tokens.push(token);
      seq.logprobs.push(logprobOf(source, offset, V, logprobTemperature, token).logprob);
      let done = false;
      if (automaton) {
        if (token === endOfTurn) {
          seq.finishReason = "stop";
          done = true;
        } else rowState[row] = automaton.next(rowState[row]!, token);
      } else if (stopIds.has(token)) {
        seq.finishReason = "stop";
        done = true;
      } else if (stopStrings.length > 0) {
        const text = tokenizer.decode(seq.tokens, { skipSpecial: true });
        if (stopStrings.some((s) => text.includes(s))) {
          seq.finishReason = "stop";
          done = true;
        }
      }
      if (!done && (seq.tokens.length >= params.maxTokens || decoder.length(row) >= contextLength)) done = true;
      if (!done) next.push(row);
    }
    return next;
  };
  while (active.length > 0) {
    if (clock.due()) await clock.turn();
    const next = draw(active);
    if (next.length === 0) break;
    const logits = decoder.extend(
      next,
      next.map((row) => [out[row].tokens[out[row].tokens.length - 1]]),
    );
    next.forEach((row, i) => rowLogits.set(logits.subarray(i * V, (i + 1) * V), row * V));
    active = next;
  }

  for (const seq of out) {
    let text = tokenizer.decode(seq.tokens, { skipSpecial: true });
    for (const s of stopStrings) {
      const at = text.indexOf(s);
      if (at >= 0) text = text.slice(0, at);
    }
    seq.text = text;
  }
  return { samples: prompts.map((_, i) => out.slice(i * n, (i + 1) * n)) };
}
