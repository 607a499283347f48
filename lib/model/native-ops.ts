/**
 * The native kernel's vectorised elementwise and per-row operations (native/src/ops-kernel.h), over any
 * Float32Arrays. The engine, the optimizer and the losses call them when the native kernel is in place (set
 * with the products, by `simdGemm.setNative`) and keep their own loops otherwise: in browsers, without g++,
 * and when plain loops are forced.
 */
export interface NativeOps {
  /** act[rows, F] = silu(gate) * up, where fc[rows, 2F] holds gate then up on each row */
  swigluForward(act: Float32Array, fc: Float32Array, rows: number, F: number): void;
  /** dFc[rows, 2F] (overwritten) from dAct[rows, F] */
  swigluBackward(dFc: Float32Array, dAct: Float32Array, fc: Float32Array, rows: number, F: number): void;
  /** out = x * rstd * gain per row, keeping rstd */
  rmsNormForward(out: Float32Array, rstd: Float32Array, x: Float32Array, gain: Float32Array, rows: number, C: number, eps: number): void;
  /** dx += the input gradient; dGain (when given) += the gain's */
  rmsNormBackward(
    dx: Float32Array,
    dGain: Float32Array | null,
    dy: Float32Array,
    x: Float32Array,
    rstd: Float32Array,
    gain: Float32Array,
    rows: number,
    C: number,
  ): void;
  /** AdamW in place over w.length floats (see server/runtime/optimizer.ts); g is zeroed */
  adamw(
    w: Float32Array,
    g: Float32Array,
    m: Float32Array,
    v: Float32Array,
    clip: number,
    b1: number,
    b2: number,
    stepSize: number,
    invBc2: number,
    eps: number,
    decay: number,
  ): void;
  sumOfSquares(g: Float32Array): number;
  /**
   * softmax(z[offset .. offset + n) * invTau) into probs (when given); stats[0] = its log-sum-exp, stats[1] = its
   * entropy.
   */
  softmaxRow(z: Float32Array, offset: number, n: number, invTau: number, probs: Float32Array | null, stats: Float64Array): void;
  /**
   * For the rows `rows` of z ([*, n]): stats[2k] = row rows[k]'s log-sum-exp at temperature 1/invTau, stats[2k + 1]
   * its entropy.
   */
  softmaxStatsRows(z: Float32Array, n: number, invTau: number, rows: Int32Array, stats: Float64Array): void;
  /**
   * For the rows `rows` of z and d ([*, n]): d = -scales[k]·p + ents[k]·p·(z·invTau − lse + H), then
   * d[targets[k]] += scales[k], p recomputed from the log-sum-exp in stats (as softmaxStatsRows writes it).
   */
  lossGradientRows(
    d: Float32Array,
    z: Float32Array,
    n: number,
    invTau: number,
    rows: Int32Array,
    targets: Int32Array,
    scales: Float32Array,
    ents: Float32Array,
    stats: Float64Array,
  ): void;
  /** each [T, T] block of att: row i softmaxed over columns 0..i in place, the rest 0 */
  causalSoftmax(att: Float32Array, blocks: number, T: number): void;
  /** per row r of [rows, T] (i = r % T): dAtt = att · (dAtt − Σ att·dAtt) · scale over columns 0..i, 0 after */
  softmaxBackward(dAtt: Float32Array, att: Float32Array, rows: number, T: number, scale: number): void;
  /** out[cols, rows] = the transpose of the row-major a[rows, cols] */
  transpose(out: Float32Array, a: Float32Array, rows: number, cols: number): void;
  /** llama-ops.ts's ropeAndExpand, with each token's position in `positions` */
  ropeAndExpand(
    qkv: Float32Array,
    raw: Float32Array,
    positions: Int32Array,
    N: number,
    H: number,
    kvHeads: number,
    hd: number,
    cos: Float32Array,
    sin: Float32Array,
  ): void;
  /** llama-ops.ts's ropeAndExpandBackward (dRaw accumulated into) */
  ropeAndExpandBackward(
    dRaw: Float32Array,
    dQkv: Float32Array,
    positions: Int32Array,
    N: number,
    H: number,
    kvHeads: number,
    hd: number,
    cos: Float32Array,
    sin: Float32Array,
  ): void;
}

let current: NativeOps | null = null;
let disabled = false;

/** The native operations in use, or null. */
export function nativeOps(): NativeOps | null {
  return disabled ? null : current;
}

export function setNativeOps(ops: NativeOps | null): void {
  current = ops;
}

/** Forces the engine's own loops (as `setSimdMode("never")` does) or allows the native operations again. */
export function disableNativeOps(off: boolean): void {
  disabled = off;
}
