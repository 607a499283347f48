/**
 * The parts of Llama's block that GPT-2's does not have, forward and backward, over Float32Arrays:
 *
 *   RMSNorm   y = x / sqrt(mean(x²) + eps) * gain
 *   rotary    each head's pair (x[i], x[i + hd/2]) turned by the angle position * invFreq[i] (HF's rotate_half)
 *   GQA       each key/value head serves nHeads / nKvHeads query heads
 *   SwiGLU    y = silu(gate) * up, with gate and up side by side in one product's output
 *
 * Rotary positions and shared key/value heads are applied by writing queries, keys and values out in the
 * [N, 3C] layout of GPT-2's attention (every query head with its own copy of its key and value), so the same
 * attention code, SIMD kernels and key/value cache serve both architectures.
 */
import type { GPTConfig, ModelShape, RopeScaling } from "./config";
import { nativeOps } from "./native-ops";

/** out = x * rstd * gain per row of x[M, C], keeping rstd for the backward pass. */
export function rmsNormForward(out: Float32Array, rstd: Float32Array, x: Float32Array, gain: Float32Array, M: number, C: number, eps: number): void {
  const native = nativeOps();
  if (native) return native.rmsNormForward(out, rstd, x, gain, M, C, eps);
  for (let i = 0; i < M; i++) {
    const r = i * C;
    let ss = 0;
    for (let c = 0; c < C; c++) ss += x[r + c] * x[r + c];
    const s = 1 / Math.sqrt(ss / C + eps);
    rstd[i] = s;
    for (let c = 0; c < C; c++) out[r + c] = x[r + c] * s * gain[c];
  }
}

/** dx += RMSNorm's input gradient; dGain (when given) accumulates the gain's. */
export function rmsNormBackward(
  dx: Float32Array,
  dGain: Float32Array | null,
  dy: Float32Array,
  x: Float32Array,
  rstd: Float32Array,
  gain: Float32Array,
  M: number,
  C: number,
): void {
  const native = nativeOps();
  if (native) return native.rmsNormBackward(dx, dGain, dy, x, rstd, gain, M, C);
  for (let i = 0; i < M; i++) {
    const r = i * C;
    const s = rstd[i];
    let dot = 0;
    for (let c = 0; c < C; c++) dot += dy[r + c] * gain[c] * x[r + c] * s;
    dot /= C;
    for (let c = 0; c < C; c++) {
      const xhat = x[r + c] * s;
      if (dGain) dGain[c] += dy[r + c] * xhat;
      dx[r + c] += (dy[r + c] * gain[c] - xhat * dot) * s;
    }
  }
}

/**
 * The rotary frequencies, as Hugging Face computes them in float32: invFreq[i] = 1 / theta^(2i / hd), then
 * stretched by the config's scaling.
 */
function ropeInverseFrequencies(headDim: number, theta: number, scaling: RopeScaling | undefined): Float32Array {
  const half = headDim / 2;
  const inv = new Float32Array(half);
  for (let i = 0; i < half; i++) inv[i] = Math.fround(1 / Math.fround(theta ** Math.fround((2 * i) / headDim)));
  if (scaling?.type === "linear") {
    for (let i = 0; i < half; i++) inv[i] = Math.fround(inv[i] / scaling.factor);
  } else if (scaling?.type === "llama3") {
    const { factor, lowFreqFactor, highFreqFactor, originalContextLength } = scaling;
    const lowFreqWavelen = originalContextLength / lowFreqFactor;
    const highFreqWavelen = originalContextLength / highFreqFactor;
    for (let i = 0; i < half; i++) {
      const wavelen = (2 * Math.PI) / inv[i];
      if (wavelen > lowFreqWavelen) inv[i] = Math.fround(inv[i] / factor);
      else if (wavelen >= highFreqWavelen) {
        const smooth = (originalContextLength / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        inv[i] = Math.fround(((1 - smooth) * inv[i]) / factor + smooth * inv[i]);
      }
    }
  }
  return inv;
}

interface RopeTable {
  cos: Float32Array; // [contextLength, hd/2]
  sin: Float32Array;
}

const tables = new Map<string, RopeTable>();

/** cos and sin of every position's angles, computed once per shape (angles in float32, like the reference). */
export function ropeTable(config: GPTConfig, shape: ModelShape): RopeTable {
  const key = JSON.stringify([config.contextLength, shape.headDim, shape.ropeTheta, config.ropeScaling ?? null]);
  let table = tables.get(key);
  if (!table) {
    const half = shape.headDim / 2;
    const inv = ropeInverseFrequencies(shape.headDim, shape.ropeTheta, config.ropeScaling);
    const cos = new Float32Array(config.contextLength * half);
    const sin = new Float32Array(config.contextLength * half);
    for (let t = 0; t < config.contextLength; t++) {
      for (let i = 0; i < half; i++) {
        const angle = Math.fround(t * inv[i]);
        cos[t * half + i] = Math.cos(angle);
        sin[t * half + i] = Math.sin(angle);
      }
    }
    table = { cos, sin };
    tables.set(key, table);
  }
  return table;
}

/** Writes the head at src[from..from+hd) turned to `position` into dst[to..to+hd). */
function rotate(dst: Float32Array, to: number, src: Float32Array, from: number, half: number, table: RopeTable, position: number): void {
  const at = position * half;
  for (let i = 0; i < half; i++) {
    const a = src[from + i];
    const b = src[from + i + half];
    const c = table.cos[at + i];
    const s = table.sin[at + i];
    dst[to + i] = a * c - b * s;
    dst[to + i + half] = b * c + a * s;
  }
}

/** dst[to..] += the head's gradient src[from..] turned back from `position` (the rotation's transpose). */
function rotateBackAdd(dst: Float32Array, to: number, src: Float32Array, from: number, half: number, table: RopeTable, position: number): void {
  const at = position * half;
  for (let i = 0; i < half; i++) {
    const da = src[from + i];
    const db = src[from + i + half];
    const c = table.cos[at + i];
    const s = table.sin[at + i];
    dst[to + i] += da * c + db * s;
    dst[to + i + half] += db * c - da * s;
  }
}

function positionsOf(N: number, position: (n: number) => number): Int32Array {
  const out = new Int32Array(N);
  for (let n = 0; n < N; n++) out[n] = position(n);
  return out;
}

/**
 * From the projection's output raw[N, C + 2 * kvDim] (q, k, v) to qkv[N, 3C]: queries and keys turned to their
 * positions, and each key/value head copied to every query head it serves.
 */
export function ropeAndExpand(
  qkv: Float32Array,
  raw: Float32Array,
  N: number,
  position: (n: number) => number,
  C: number,
  H: number,
  shape: ModelShape,
  table: RopeTable,
): void {
  const hd = shape.headDim;
  const native = nativeOps();
  if (native) return native.ropeAndExpand(qkv, raw, positionsOf(N, position), N, H, shape.nKvHeads, hd, table.cos, table.sin);
  const half = hd / 2;
  const group = H / shape.nKvHeads;
  const rawWidth = C + 2 * shape.kvDim;
  for (let n = 0; n < N; n++) {
    const r = n * rawWidth;
    const o = n * 3 * C;
    const pos = position(n);
    for (let h = 0; h < H; h++) rotate(qkv, o + h * hd, raw, r + h * hd, half, table, pos);
    for (let g = 0; g < shape.nKvHeads; g++) {
      const k = r + C + g * hd;
      const v = r + C + shape.kvDim + g * hd;
      const first = o + C + g * group * hd;
      rotate(qkv, first, raw, k, half, table, pos);
      for (let j = 1; j < group; j++) qkv.copyWithin(first + j * hd, first, first + hd);
      for (let j = 0; j < group; j++) qkv.set(raw.subarray(v, v + hd), o + 2 * C + (g * group + j) * hd);
    }
  }
}

/** The transpose of ropeAndExpand: dRaw[N, C + 2 * kvDim] (zero on entry) from dQkv[N, 3C]. */
export function ropeAndExpandBackward(
  dRaw: Float32Array,
  dQkv: Float32Array,
  N: number,
  position: (n: number) => number,
  C: number,
  H: number,
  shape: ModelShape,
  table: RopeTable,
): void {
  const hd = shape.headDim;
  const native = nativeOps();
  if (native) return native.ropeAndExpandBackward(dRaw, dQkv, positionsOf(N, position), N, H, shape.nKvHeads, hd, table.cos, table.sin);
  const half = hd / 2;
  const group = H / shape.nKvHeads;
  const rawWidth = C + 2 * shape.kvDim;
  for (let n = 0; n < N; n++) {
    const r = n * rawWidth;
    const o = n * 3 * C;
    const pos = position(n);
    for (let h = 0; h < H; h++) rotateBackAdd(dRaw, r + h * hd, dQkv, o + h * hd, half, table, pos);
    for (let g = 0; g < shape.nKvHeads; g++) {
      const k = r + C + g * hd;
      const v = r + C + shape.kvDim + g * hd;
      for (let j = 0; j < group; j++) {
        const h = g * group + j;
        rotateBackAdd(dRaw, k, dQkv, o + C + h * hd, half, table, pos);
        for (let d = 0; d < hd; d++) dRaw[v + d] += dQkv[o + 2 * C + h * hd + d];
      }
    }
  }
}

/** act[N, F] = silu(gate) * up, where fc[N, 2F] holds gate then up on each row. */
export function swigluForward(act: Float32Array, fc: Float32Array, N: number, F: number): void {
  const native = nativeOps();
  if (native) return native.swigluForward(act, fc, N, F);
  for (let n = 0; n < N; n++) {
    const r = n * 2 * F;
    const o = n * F;
    for (let i = 0; i < F; i++) {
      const g = fc[r + i];
      act[o + i] = (g / (1 + Math.exp(-g))) * fc[r + F + i];
    }
  }
}

/** dFc[N, 2F] (overwritten) from dAct[N, F]. */
export function swigluBackward(dFc: Float32Array, dAct: Float32Array, fc: Float32Array, N: number, F: number): void {
  const native = nativeOps();
  if (native) return native.swigluBackward(dFc, dAct, fc, N, F);
  for (let n = 0; n < N; n++) {
    const r = n * 2 * F;
    const o = n * F;
    for (let i = 0; i < F; i++) {
      const g = fc[r + i];
      const up = fc[r + F + i];
      const sig = 1 / (1 + Math.exp(-g));
      const d = dAct[o + i];
      dFc[r + i] = d * up * sig * (1 + g * (1 - sig));
      dFc[r + F + i] = d * g * sig;
    }
  }
}
