import { nativeOps } from "@/lib/model/native-ops";

/**
 * The batch format of the primitives. Every per-token array is aligned with `tokens`: entry i is about token i,
 * predicted from tokens[0..i-1]. Entry 0 has no prefix, so it is ignored on input and reported as 0 on output.
 */
export interface Batch {
  /** [B][L_b] token ids of each sequence (prompt and completion together) */
  tokens: number[][];
  /** [B][L_b] per-token loss weights, e.g. the chat template's loss mask; default 1 everywhere */
  weights?: number[][];
  /** [B][L_b] logprobs the sampler reported (importance_sampling, ppo, cispo) */
  samplingLogprobs?: number[][];
  /** [B][L_b] per-token advantages (importance_sampling, ppo, cispo) */
  advantages?: number[][];
  /** [B][L_b] value targets for the value head's MSE loss */
  returns?: number[][];
  /** [B][L_b] reference-policy logprobs for the KL penalty; computed from the reference when absent */
  referenceLogprobs?: number[][];
  /**
   * [B][L_b] the token ids the policy was allowed at each token (legal actions), or null where it was not held:
   * the logprob of such a token is taken over the allowed ids only, as the constrained sampler took it.
   */
  allowedTokens?: (number[] | null)[][];
}

/** A batch right-padded into one [B, T] block, the layout the engines take. */
export interface PackedBatch {
  B: number;
  T: number;
  tokens: Int32Array; // [B*T]
  lengths: number[]; // [B]
}

export function packBatch(batch: Batch, vocabSize: number, contextLength: number): PackedBatch {
  const rows = batch.tokens;
  if (!Array.isArray(rows) || rows.length === 0) throw new Error("batch.tokens must hold at least one sequence");
  const lengths = rows.map((r) => r.length);
  // The block is padded to a multiple of 4 positions where the context allows: the SIMD attention softmax works
  // on whole vectors of four. Padding costs at most three positions and changes no result (causal attention).
  const longest = Math.max(...lengths);
  const T = Math.ceil(longest / 4) * 4 <= contextLength ? Math.ceil(longest / 4) * 4 : longest;
  rows.forEach((r, b) => {
    if (r.length === 0) throw new Error(`batch.tokens[${b}] is empty; every sequence needs at least one token`);
    if (r.length > contextLength) {
      throw new Error(`batch.tokens[${b}] has ${r.length} tokens, over the model's contextLength=${contextLength}`);
    }
    for (const t of r) {
      if (!Number.isInteger(t) || t < 0 || t >= vocabSize) {
        throw new Error(`batch.tokens[${b}] holds token id ${t}, outside the model's vocabulary 0..${vocabSize - 1}`);
      }
    }
  });
  for (const key of ["weights", "samplingLogprobs", "advantages", "returns", "referenceLogprobs"] as const) {
    const field = batch[key];
    if (field === undefined) continue;
    if (field.length !== rows.length) {
      throw new Error(`batch.${key} has ${field.length} rows, batch.tokens has ${rows.length}`);
    }
    field.forEach((r, b) => {
      if (r.length !== rows[b].length) {
        throw new Error(`batch.${key}[${b}] has ${r.length} entries, batch.tokens[${b}] has ${rows[b].length}`);
      }
    });
  }
  batch.allowedTokens?.forEach((r, b) => {
    if (r.length !== rows[b].length) throw new Error(`batch.allowedTokens[${b}] has ${r.length} entries, batch.tokens[${b}] has ${rows[b].length}`);
    r.forEach((allowed, i) => {
      if (allowed !== null && i > 0 && !allowed.includes(rows[b][i]!)) {
        throw new Error(`batch.tokens[${b}][${i}] is token ${rows[b][i]}, which batch.allowedTokens[${b}][${i}] does not allow`);
      }
    });
  });
  if (batch.allowedTokens && batch.allowedTokens.length !== rows.length) {
    throw new Error(`batch.allowedTokens has ${batch.allowedTokens.length} rows, batch.tokens has ${rows.length}`);
  }
  const tokens = new Int32Array(rows.length * T); // padding is token 0; causal attention never looks right
  rows.forEach((r, b) => tokens.set(r, b * T));
  return { B: rows.length, T, tokens, lengths };
}

/**
 * log softmax(logits / temperature) at `target` for one row of logits, plus the log-sum-exp it used. The one
 * definition shared by `forward`, the losses and `sample`, so their logprobs agree. With `probs`, the row's
 * probabilities are written there too (the losses need them; this saves computing each exp twice).
 */
/** The native softmax's log-sum-exp and entropy of the last row. */
const rowStats = new Float64Array(2);

export function logprobOf(
  logits: Float32Array,
  offset: number,
  V: number,
  temperature: number,
  target: number,
  probs?: Float64Array,
): { logprob: number; logSumExp: number } {
  const native = nativeOps();
  if (native && !probs) {
    const inv = 1 / temperature;
    native.softmaxRow(logits, offset, V, inv, null, rowStats);
    return { logprob: logits[offset + target] * inv - rowStats[0], logSumExp: rowStats[0] };
  }
  const inv = 1 / temperature;
  let max = -Infinity;
  for (let j = 0; j < V; j++) {
    const z = logits[offset + j] * inv;
    if (z > max) max = z;
  }
  let sum = 0;
  if (probs) {
    for (let j = 0; j < V; j++) {
      probs[j] = Math.exp(logits[offset + j] * inv - max);
      sum += probs[j];
    }
    for (let j = 0; j < V; j++) probs[j] /= sum;
  } else {
    for (let j = 0; j < V; j++) sum += Math.exp(logits[offset + j] * inv - max);
  }
  const logSumExp = max + Math.log(sum);
  return { logprob: logits[offset + target] * inv - logSumExp, logSumExp };
}

/**
 * Sets to -Infinity, in place, every logit a constrained token was not allowed (batch.allowedTokens), so that the
 * softmax of those rows is over the allowed ids only: the distribution the constrained sampler drew from. `rows`
 * maps the packed batch's rows to the batch's (a slice of a larger batch).
 */
export function maskDisallowed(
  logits: Float32Array,
  allowedTokens: (number[] | null)[][] | undefined,
  packed: PackedBatch,
  V: number,
  rows?: number[],
  /** when `logits` holds only the pass's rows [rowStart, rowStart + rowCount) */
  range?: { rowStart: number; rowCount: number },
): void {
  if (!allowedTokens) return;
  const { T, lengths } = packed;
  const first = range?.rowStart ?? 0,
    end = range ? range.rowStart + range.rowCount : Number.POSITIVE_INFINITY;
  for (let b = 0; b < lengths.length; b++) {
    const allowedRow = allowedTokens[rows ? rows[b]! : b]!;
    for (let i = 1; i < lengths[b]!; i++) {
      const allowed = allowedRow[i];
      const n = b * T + i - 1;
      if (!allowed || n < first || n >= end) continue;
      const offset = (n - first) * V;
      const kept = allowed.map((t) => logits[offset + t]!);
      logits.fill(-Infinity, offset, offset + V);
      allowed.forEach((t, k) => (logits[offset + t] = kept[k]!));
    }
  }
}

/** Per-token logprobs aligned with tokens (entry 0 is 0) from the logits of a packed batch. */
export function tokenLogprobs(logits: Float32Array, packed: PackedBatch, V: number, temperature: number): number[][] {
  const { T, tokens, lengths } = packed;
  return lengths.map((len, b) => {
    const out = new Array<number>(len).fill(0);
    for (let i = 1; i < len; i++) {
      out[i] = logprobOf(logits, (b * T + i - 1) * V, V, temperature, tokens[b * T + i]).logprob;
    }
    return out;
  });
}
