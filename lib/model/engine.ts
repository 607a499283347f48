import type { GPTConfig } from "./config";
import type { LoraAdapter } from "./lora";
import type { Rng } from "./rng";
import type { GPTWeights, ValueHeadWeights } from "./weights";

/** What one forward pass runs: base weights, optionally one adapter on them and a value head. */
export interface ModelView {
  config: GPTConfig;
  weights: GPTWeights;
  lora: LoraAdapter | null;
  valueHead: ValueHeadWeights | null;
}

/** Where gradients are added (+=). A part left out is frozen: its gradient is not computed. */
export interface GradientTargets {
  weights?: GPTWeights;
  lora?: LoraAdapter;
  valueHead?: ValueHeadWeights;
}

/**
 * Given the logits of rows [rowStart, rowStart + rowCount) of a pass ([rowCount, V]) and the values of all its
 * rows, the loss's gradient with respect to those logits ([rowCount, V]) and to the values ([B*T]: the engine
 * reads it after the last range). Called once with every row, or once per range of `chunkRows` in order.
 */
type LossGradient = (
  logits: Float32Array,
  values: Float32Array | null, // [B*T]
  rowStart: number,
  rowCount: number,
) => { dLogits: Float32Array; dValues: Float32Array | null };

export interface RunRequest {
  model: ModelView;
  tokens: Int32Array; // [B*T], right-padded
  batch: number; // B
  seqLen: number; // T
  /** dropout on adapter inputs, drawn from this generator; absent at inference */
  dropoutRng?: Rng;
  /**
   * chunkRows: the engine may compute the output layer and the loss this many rows at a time, so the whole
   * [B*T, V] logit matrix never exists (the result's logits are then empty); an engine may ignore it.
   */
  backward?: { lossGradient: LossGradient; grads: GradientTargets; chunkRows?: number };
}

export interface RunResult {
  logits: Float32Array; // [B*T, V]: row b*T+t predicts the token after position t (empty after a chunked loss)
  values: Float32Array | null; // [B*T]
}

/** Incremental decoding over a key/value cache of `rows` independent sequences. */
export interface Decoder {
  /**
   * Appends `tokens[i]` (all of one length) to sequence `rows[i]` and returns the logits after each row's last
   * new token: [rows.length, V].
   */
  extend(rows: readonly number[], tokens: readonly (readonly number[])[]): Float32Array;
  /** Makes row `to` a copy of row `from` (to fork n samples from one prompt). */
  copyRow(from: number, to: number): void;
  /** Tokens held for a row. */
  length(row: number): number;
  /** Frees what the decoder holds outside the JS heap, if anything. */
  dispose(): void;
}

/** A way of computing the model: the pure-TypeScript engine or one built on a tfjs backend. */
export interface Engine {
  readonly name: string;
  run(request: RunRequest): RunResult;
  /**
   * A decoder of `rows` rows, each holding up to `capacity` tokens (default, and at most, the model's context
   * length): its key/value cache is allocated for rows × capacity positions, so a sampler that knows how long its
   * rows get (longest prompt + most tokens drawn) asks for no more.
   */
  createDecoder(model: ModelView, rows: number, capacity?: number): Decoder;
}
