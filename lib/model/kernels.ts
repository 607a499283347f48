/**
 * The numeric kernels of the pure-TypeScript engine, over row-major Float32Arrays. Matrix products large enough
 * to repay copying go to the WebAssembly SIMD kernel (simd-gemm.ts, about 20x faster than plain loops here);
 * the rest run as loops whose innermost index walks contiguous memory, which V8 turns into fast code.
 */
import { disableNativeOps } from "./native-ops";
import { rowMajor, simdGemm, transposed } from "./simd-gemm";
import { geluC, geluK, layerNormEps, tanhClamp, tanhDenominator, tanhNumerator } from "./simd-ops";

export { layerNormEps };

export type SimdMode = "auto" | "always" | "never";
let simdMode: SimdMode = "auto";
// Below this many multiply-adds the copies into WebAssembly memory cost more than the kernel saves.
const simdMinWork = 16384;

/**
 * auto: SIMD for large products; always: for every product (tests use it to cover the SIMD path on tiny
 * models); never: plain loops only (benchmarks use it to measure the difference).
 */
export function setSimdMode(mode: SimdMode): void {
  simdMode = mode;
  disableNativeOps(mode === "never");
}

/** Whether products of this size run on the SIMD kernel. */
export function runsOnSimd(M: number, K: number, N: number): boolean {
  if (simdGemm === null || simdMode === "never") return false;
  return simdMode === "always" || M * K * N >= simdMinWork;
}

export function simdAvailable(): boolean {
  return simdGemm !== null;
}

/** The SIMD elementwise operations, unless plain loops are forced (each still falls back for arrays it cannot take). */
const ops = () => (simdGemm !== null && simdMode !== "never" ? simdGemm.ops : null);

/** Whether SIMD kernels other than the matrix products may run (not when plain loops are forced). */
export function simdOpsEnabled(): boolean {
  return ops() !== null;
}

/** out = a + b over n floats (out may be a or b). */
export function add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
  if (ops()?.add(out, a, b, n)) return;
  for (let i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/** out[M,N] = a[M,K] @ b[K,N] (+ bias[N]). */
export function matmul(out: Float32Array, a: Float32Array, b: Float32Array, M: number, K: number, N: number, bias: Float32Array | null): void {
  if (runsOnSimd(M, K, N)) {
    // The bias goes in first (a memcpy per row) and the product accumulates onto it.
    if (bias) for (let i = 0; i < M; i++) out.set(bias, i * N);
    simdGemm!.multiply(out, rowMajor(a, M, K), rowMajor(b, K, N), bias !== null, 1);
    return;
  }
  for (let i = 0; i < M; i++) {
    const o = i * N;
    if (bias) for (let j = 0; j < N; j++) out[o + j] = bias[j];
    else out.fill(0, o, o + N);
  }
  matmulAccumulate(out, a, b, M, K, N, 1);
}

/** out[M,N] += scale * a[M,K] @ b[K,N]. Four rows at a time, so each row of b is loaded once per four rows. */
export function matmulAccumulate(out: Float32Array, a: Float32Array, b: Float32Array, M: number, K: number, N: number, scale: number): void {
  if (runsOnSimd(M, K, N)) return simdGemm!.multiply(out, rowMajor(a, M, K), rowMajor(b, K, N), true, scale);
  let i = 0;
  for (; i + 4 <= M; i += 4) {
    const o0 = i * N,
      o1 = o0 + N,
      o2 = o1 + N,
      o3 = o2 + N;
    const a0 = i * K,
      a1 = a0 + K,
      a2 = a1 + K,
      a3 = a2 + K;
    for (let k = 0; k < K; k++) {
      const x0 = a[a0 + k] * scale,
        x1 = a[a1 + k] * scale,
        x2 = a[a2 + k] * scale,
        x3 = a[a3 + k] * scale;
      const bk = k * N;
      for (let j = 0; j < N; j++) {
        const w = b[bk + j];
        out[o0 + j] += x0 * w;
        out[o1 + j] += x1 * w;
        out[o2 + j] += x2 * w;
        out[o3 + j] += x3 * w;
      }
    }
  }
  for (; i < M; i++) {
    const o = i * N,
      ai = i * K;
    for (let k = 0; k < K; k++) {
      const x = a[ai + k] * scale;
      if (x === 0) continue;
      const bk = k * N;
      for (let j = 0; j < N; j++) out[o + j] += x * b[bk + j];
    }
  }
}

/** out[M,K] (+)= scale * dy[M,N] @ w[K,N]^T — the input gradient of a linear layer. */
export function matmulTransB(out: Float32Array, dy: Float32Array, w: Float32Array, M: number, N: number, K: number, accumulate: boolean, scale: number): void {
  if (runsOnSimd(M, N, K)) return simdGemm!.multiply(out, rowMajor(dy, M, N), transposed(w, K, N), accumulate, scale);
  for (let i = 0; i < M; i++) {
    const d = i * N,
      o = i * K;
    for (let k = 0; k < K; k++) {
      const wk = k * N;
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0;
      let j = 0;
      for (; j + 4 <= N; j += 4) {
        s0 += dy[d + j] * w[wk + j];
        s1 += dy[d + j + 1] * w[wk + j + 1];
        s2 += dy[d + j + 2] * w[wk + j + 2];
        s3 += dy[d + j + 3] * w[wk + j + 3];
      }
      for (; j < N; j++) s0 += dy[d + j] * w[wk + j];
      const s = (s0 + s1 + s2 + s3) * scale;
      out[o + k] = accumulate ? out[o + k] + s : s;
    }
  }
}

/** out[K,N] += scale * a[M,K]^T @ dy[M,N] — the weight gradient of a linear layer. */
export function matmulTransAAccumulate(out: Float32Array, a: Float32Array, dy: Float32Array, M: number, K: number, N: number, scale: number): void {
  if (runsOnSimd(K, M, N)) return simdGemm!.multiply(out, transposed(a, M, K), rowMajor(dy, M, N), true, scale);
  let i = 0;
  for (; i + 4 <= M; i += 4) {
    const a0 = i * K,
      a1 = a0 + K,
      a2 = a1 + K,
      a3 = a2 + K;
    const d0 = i * N,
      d1 = d0 + N,
      d2 = d1 + N,
      d3 = d2 + N;
    for (let k = 0; k < K; k++) {
      const x0 = a[a0 + k] * scale,
        x1 = a[a1 + k] * scale,
        x2 = a[a2 + k] * scale,
        x3 = a[a3 + k] * scale;
      const o = k * N;
      for (let j = 0; j < N; j++) {
        out[o + j] += x0 * dy[d0 + j] + x1 * dy[d1 + j] + x2 * dy[d2 + j] + x3 * dy[d3 + j];
      }
    }
  }
  for (; i < M; i++) {
    const ai = i * K,
      d = i * N;
    for (let k = 0; k < K; k++) {
      const x = a[ai + k] * scale;
      if (x === 0) continue;
      const o = k * N;
      for (let j = 0; j < N; j++) out[o + j] += x * dy[d + j];
    }
  }
}

/** out[N] += column sums of dy[M,N] — the bias gradient. */
export function columnSumAccumulate(out: Float32Array, dy: Float32Array, M: number, N: number): void {
  if (ops()?.columnSum(out, dy, M, N)) return;
  for (let i = 0; i < M; i++) {
    const d = i * N;
    for (let j = 0; j < N; j++) out[j] += dy[d + j];
  }
}

/** out = (x - mean) * rstd * gain + bias per row of x[M,C]; keeps mean and rstd for the backward pass. */
export function layerNormForward(
  out: Float32Array,
  mean: Float32Array,
  rstd: Float32Array,
  x: Float32Array,
  gain: Float32Array,
  bias: Float32Array,
  M: number,
  C: number,
): void {
  if (ops()?.layerNorm(out, mean, rstd, x, gain, bias, M, C)) return;
  for (let i = 0; i < M; i++) {
    const r = i * C;
    let m = 0;
    for (let c = 0; c < C; c++) m += x[r + c];
    m /= C;
    let v = 0;
    for (let c = 0; c < C; c++) {
      const d = x[r + c] - m;
      v += d * d;
    }
    const s = 1 / Math.sqrt(v / C + layerNormEps);
    mean[i] = m;
    rstd[i] = s;
    for (let c = 0; c < C; c++) out[r + c] = (x[r + c] - m) * s * gain[c] + bias[c];
  }
}

/** dx += LayerNorm's input gradient; dGain and dBias (when given) accumulate the parameter gradients. */
export function layerNormBackward(
  dx: Float32Array,
  dGain: Float32Array | null,
  dBias: Float32Array | null,
  dy: Float32Array,
  x: Float32Array,
  mean: Float32Array,
  rstd: Float32Array,
  gain: Float32Array,
  M: number,
  C: number,
): void {
  if (ops()?.layerNormBackward(dx, dGain, dBias, dy, x, mean, rstd, gain, M, C)) return;
  for (let i = 0; i < M; i++) {
    const r = i * C;
    const m = mean[i],
      s = rstd[i];
    let meanDy = 0,
      meanDyXhat = 0;
    for (let c = 0; c < C; c++) {
      const g = dy[r + c] * gain[c];
      meanDy += g;
      meanDyXhat += g * (x[r + c] - m) * s;
    }
    meanDy /= C;
    meanDyXhat /= C;
    for (let c = 0; c < C; c++) {
      const xhat = (x[r + c] - m) * s;
      if (dGain) dGain[c] += dy[r + c] * xhat;
      if (dBias) dBias[c] += dy[r + c];
      dx[r + c] += (dy[r + c] * gain[c] - meanDy - xhat * meanDyXhat) * s;
    }
  }
}

// GELU with the tanh approximation (as in GPT-2); the tfjs engine uses the same formula so both agree.
const [n1, n3, n5, n7, n9, n11, n13] = tanhNumerator;
const [d0, d2, d4, d6] = tanhDenominator;

/** tanh without Math.tanh (slow in V8): the same rational function as the SIMD kernel (simd-ops.ts). */
function fastTanh(u: number): number {
  const c = u > tanhClamp ? tanhClamp : u < -tanhClamp ? -tanhClamp : u;
  const x2 = c * c;
  const p = c * (n1 + x2 * (n3 + x2 * (n5 + x2 * (n7 + x2 * (n9 + x2 * (n11 + x2 * n13))))));
  return p / (d0 + x2 * (d2 + x2 * (d4 + x2 * d6)));
}

/** out = gelu(x); `tanhOut` (when given) keeps the tanh term for the backward pass. */
export function geluForward(out: Float32Array, x: Float32Array, n: number, tanhOut: Float32Array | null = null): void {
  if (ops()?.gelu(out, x, n, tanhOut)) return;
  for (let i = 0; i < n; i++) {
    const v = x[i];
    const t = fastTanh(geluK * (v + geluC * v * v * v));
    if (tanhOut) tanhOut[i] = t;
    out[i] = 0.5 * v * (1 + t);
  }
}

/** dx = dy * gelu'(x), overwriting dx; `tanh` is what geluForward kept. */
export function geluBackward(dx: Float32Array, dy: Float32Array, x: Float32Array, tanh: Float32Array, n: number): void {
  if (ops()?.geluBackward(dx, dy, x, tanh, n)) return;
  for (let i = 0; i < n; i++) {
    const v = x[i];
    const t = tanh[i];
    const du = geluK * (1 + 3 * geluC * v * v);
    dx[i] = dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du);
  }
}
