/**
 * The GPT model in plain TypeScript over Float32Arrays, with a hand-derived backward pass: the default engine.
 *
 *   x = wte[tokens] + wpe[positions]                       // [N, C], N = B*T
 *   for each block:  x = x + attn_proj(causal_attention(attn_qkv(ln1(x))))
 *                    x = x + mlp_proj(gelu(mlp_fc(ln2(x))))
 *   logits = ln_f(x) @ lm_head                             // [N, V]
 *   values = ln_f(x) @ value_head                          // [N]   (when a value head is attached)
 *
 * The llama architecture runs the same steps with RMSNorm for the norms, no wpe, rotary positions and shared
 * key/value heads applied between attn_qkv and the attention (llama-ops.ts), and SwiGLU for GELU. With tied
 * embeddings the output layer is wte itself.
 *
 * Every linear layer may carry a LoRA update y += scale * (dropout(x) @ A) @ B. The forward pass keeps what the
 * backward pass needs; the backward pass adds gradients only into the parts that are being trained.
 */
import { type ModelShape, modelShape } from "./config";
import type { Decoder, Engine, GradientTargets, ModelView, RunRequest, RunResult } from "./engine";
import {
  add,
  columnSumAccumulate,
  geluBackward,
  geluForward,
  layerNormBackward,
  layerNormForward,
  matmul,
  matmulAccumulate,
  matmulTransAAccumulate,
  matmulTransB,
  simdOpsEnabled,
  runsOnSimd,
} from "./kernels";
import { nativeOps } from "./native-ops";
import { rmsNormBackward, rmsNormForward, ropeAndExpand, ropeAndExpandBackward, ropeTable, swigluBackward, swigluForward } from "./llama-ops";
import { rowMajor, simdGemm, transposed } from "./simd-gemm";

/**
 * Activations come from the kernel's WebAssembly memory (a stack released when a pass ends), so the SIMD
 * products use them in place, and the garbage collector never sees them.
 */
const arena = simdGemm?.arena ?? null;
/** For arrays the code writes in full before reading. */
const scratch = (n: number): Float32Array => (arena ? arena.alloc(n, false) : new Float32Array(n));
/** For arrays that are accumulated into, or only partly written. */
const zeros = (n: number): Float32Array => (arena ? arena.alloc(n, true) : new Float32Array(n));
import type { LoraPair } from "./lora";
import type { Rng } from "./rng";
import type { GPTWeights, LayerNormWeights, Linear } from "./weights";

function assert(condition: boolean, message: () => string): asserts condition {
  if (!condition) throw new Error(message());
}

// ---- linear layer with an optional adapter ----

interface LinearSaved {
  input: Float32Array; // [N, nIn]
  dropped: Float32Array | null; // [N, nIn] adapter input after dropout (null without an adapter)
  keep: Uint8Array | null; // [N, nIn] dropout mask (null when no dropout)
  down: Float32Array | null; // [N, r] = dropped @ A
}

function linearForward(
  out: Float32Array, // [N, nOut]
  x: Float32Array, // [N, nIn]
  N: number,
  lin: Linear,
  pair: LoraPair | undefined,
  scale: number,
  dropout: number,
  rng: Rng | undefined,
  /** whether the layer has a bias (the architecture's; without one lin.bias is zero and skipped) */
  bias: boolean,
): LinearSaved {
  const { nIn, nOut } = lin;
  matmul(out, x, lin.weight, N, nIn, nOut, bias ? lin.bias : null);
  if (!pair) return { input: x, dropped: null, keep: null, down: null };
  let dropped = x;
  let keep: Uint8Array | null = null;
  if (dropout > 0 && rng) {
    keep = new Uint8Array(N * nIn);
    dropped = zeros(N * nIn);
    const inv = 1 / (1 - dropout);
    for (let i = 0; i < dropped.length; i++) {
      if (rng.uniform() >= dropout) {
        keep[i] = 1;
        dropped[i] = x[i] * inv;
      }
    }
  }
  const r = pair.A.length / nIn;
  const down = scratch(N * r);
  matmul(down, dropped, pair.A, N, nIn, r, null);
  matmulAccumulate(out, down, pair.B, N, r, nOut, scale);
  return { input: x, dropped, keep, down };
}

function linearBackward(
  dx: Float32Array, // [N, nIn], overwritten
  dy: Float32Array, // [N, nOut]
  N: number,
  lin: Linear,
  saved: LinearSaved,
  pair: LoraPair | undefined,
  scale: number,
  dropout: number,
  grad: Linear | undefined,
  pairGrad: LoraPair | undefined,
  bias: boolean,
): void {
  const { nIn, nOut } = lin;
  matmulTransB(dx, dy, lin.weight, N, nOut, nIn, false, 1);
  if (grad) {
    matmulTransAAccumulate(grad.weight, saved.input, dy, N, nIn, nOut, 1);
    if (bias) columnSumAccumulate(grad.bias, dy, N, nOut);
  }
  if (!pair) return;
  const r = pair.A.length / nIn;
  const dDown = scratch(N * r); // [N, r]
  matmulTransB(dDown, dy, pair.B, N, nOut, r, false, scale);
  if (pairGrad) {
    matmulTransAAccumulate(pairGrad.B, saved.down!, dy, N, r, nOut, scale);
    matmulTransAAccumulate(pairGrad.A, saved.dropped!, dDown, N, nIn, r, 1);
  }
  if (saved.keep) {
    const dDropped = scratch(N * nIn);
    matmulTransB(dDropped, dDown, pair.A, N, r, nIn, false, 1);
    const inv = 1 / (1 - dropout);
    for (let i = 0; i < dDropped.length; i++) if (saved.keep[i]) dx[i] += dDropped[i] * inv;
  } else {
    matmulTransB(dx, dDown, pair.A, N, r, nIn, true, 1);
  }
}

// ---- causal self-attention ----

/** Row-wise causal softmax of scores[T, T] in place: row i keeps columns 0..i, the rest become 0. */
function causalSoftmax(s: Float32Array, offset: number, T: number): void {
  for (let i = 0; i < T; i++) {
    const row = offset + i * T;
    let max = -Infinity;
    for (let j = 0; j <= i; j++) if (s[row + j] > max) max = s[row + j];
    let sum = 0;
    for (let j = 0; j <= i; j++) {
      const e = Math.exp(s[row + j] - max);
      s[row + j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j <= i; j++) s[row + j] *= inv;
    for (let j = i + 1; j < T; j++) s[row + j] = 0;
  }
}

/**
 * Attention as matrix products per (sequence, head), on the SIMD kernel: the causal half of each product is
 * wasted work, but at four lanes per instruction that is still far faster than the triangular scalar loops.
 * The products of all heads are run as one batch (shared with the helper thread when there is one), with the
 * softmax over all heads in between.
 */
/** dAtt = att * (dAtt - rowsum(att * dAtt)) * scale per row of [*, T] (rows i of each [T, T] block keep 0..i). */
function softmaxBackwardLoop(dAtt: Float32Array, att: Float32Array, T: number, scale: number): void {
  for (let r = 0; r < att.length; r += T) {
    const i = (r / T) % T;
    let dot = 0;
    for (let j = 0; j <= i; j++) dot += att[r + j] * dAtt[r + j];
    for (let j = 0; j < T; j++) dAtt[r + j] = j <= i ? att[r + j] * (dAtt[r + j] - dot) * scale : 0;
  }
}

/** q: offset of the head's queries in qkv; a: of its [T, T] block in att; o: of its output columns in y */
type HeadOffsets = (q: number, a: number, o: number) => void;

function forEachHead(B: number, T: number, C: number, H: number, fn: HeadOffsets): void {
  const hd = C / H;
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) fn(b * T * 3 * C + h * hd, (b * H + h) * T * T, b * T * C + h * hd);
}

function attentionForwardSimd(y: Float32Array, att: Float32Array, qkv: Float32Array, B: number, T: number, C: number, H: number): void {
  const hd = C / H;
  const C3 = 3 * C;
  const gemm = simdGemm!;
  const heads = (fn: HeadOffsets) => forEachHead(B, T, C, H, fn);
  // scores[T, T] = q[T, hd] @ k^T / sqrt(hd)
  gemm.batch(() => heads((q, a) => gemm.multiply(att, rowMajor(qkv, T, hd, q, C3), transposed(qkv, T, hd, q + C, C3), false, 1 / Math.sqrt(hd), a, T)));
  const native = nativeOps();
  if (native) native.causalSoftmax(att, B * H, T);
  else if (!gemm.ops.causalSoftmax(att, B * H, T)) for (let a = 0; a < att.length; a += T * T) causalSoftmax(att, a, T);
  // y[T, hd] = att[T, T] @ v[T, hd]
  gemm.batch(() => heads((q, a, o) => gemm.multiply(y, rowMajor(att, T, T, a), rowMajor(qkv, T, hd, q + 2 * C, C3), false, 1, o, C)));
}

function attentionBackwardSimd(dqkv: Float32Array, dy: Float32Array, qkv: Float32Array, att: Float32Array, B: number, T: number, C: number, H: number): void {
  const hd = C / H;
  const C3 = 3 * C;
  const scale = 1 / Math.sqrt(hd);
  const gemm = simdGemm!;
  const heads = (fn: HeadOffsets) => forEachHead(B, T, C, H, fn);
  const dAtt = scratch(att.length);
  // dAtt[T, T] = dy[T, hd] @ v^T
  gemm.batch(() => heads((q, a, o) => gemm.multiply(dAtt, rowMajor(dy, T, hd, o, C), transposed(qkv, T, hd, q + 2 * C, C3), false, 1, a, T)));
  // through the softmax: dScores = att * (dAtt - rowsum(att * dAtt)), times the 1/sqrt(hd) of the scores
  const native = nativeOps();
  if (native) native.softmaxBackward(dAtt, att, att.length / T, T, scale);
  else if (!gemm.ops.softmaxBackward(dAtt, att, att.length / T, T, scale)) softmaxBackwardLoop(dAtt, att, T, scale);
  // dq = dScores @ k ; dk = dScores^T @ q ; dv = att^T @ dy (each head's three write apart from all others)
  gemm.batch(() =>
    heads((q, a, o) => {
      gemm.multiply(dqkv, rowMajor(dAtt, T, T, a), rowMajor(qkv, T, hd, q + C, C3), true, 1, q, C3);
      gemm.multiply(dqkv, transposed(dAtt, T, T, a), rowMajor(qkv, T, hd, q, C3), true, 1, q + C, C3);
      gemm.multiply(dqkv, transposed(att, T, T, a), rowMajor(dy, T, hd, o, C), true, 1, q + 2 * C, C3);
    }),
  );
}

/** y[N,C] from qkv[N,3C]; att[B,H,T,T] keeps the softmax probabilities (zero above the diagonal). */
function attentionForward(y: Float32Array, att: Float32Array, qkv: Float32Array, B: number, T: number, C: number, H: number): void {
  const hd = C / H;
  if (runsOnSimd(T, hd, T)) return attentionForwardSimd(y, att, qkv, B, T, C, H);
  const scale = 1 / Math.sqrt(hd);
  const C3 = 3 * C;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < T; i++) {
        const q = (b * T + i) * C3 + h * hd;
        const row = ((b * H + h) * T + i) * T;
        let max = -Infinity;
        for (let j = 0; j <= i; j++) {
          const k = (b * T + j) * C3 + C + h * hd;
          let s = 0;
          for (let d = 0; d < hd; d++) s += qkv[q + d] * qkv[k + d];
          s *= scale;
          att[row + j] = s;
          if (s > max) max = s;
        }
        let sum = 0;
        for (let j = 0; j <= i; j++) {
          const e = Math.exp(att[row + j] - max);
          att[row + j] = e;
          sum += e;
        }
        const inv = 1 / sum;
        const o = (b * T + i) * C + h * hd;
        for (let d = 0; d < hd; d++) y[o + d] = 0;
        for (let j = 0; j <= i; j++) {
          const p = att[row + j] * inv;
          att[row + j] = p;
          const v = (b * T + j) * C3 + 2 * C + h * hd;
          for (let d = 0; d < hd; d++) y[o + d] += p * qkv[v + d];
        }
      }
    }
  }
}

/** dqkv[N,3C] (zero on entry) from dy[N,C]. */
function attentionBackward(dqkv: Float32Array, dy: Float32Array, qkv: Float32Array, att: Float32Array, B: number, T: number, C: number, H: number): void {
  const hd = C / H;
  if (runsOnSimd(T, hd, T)) return attentionBackwardSimd(dqkv, dy, qkv, att, B, T, C, H);
  const scale = 1 / Math.sqrt(hd);
  const C3 = 3 * C;
  const dAtt = scratch(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < T; i++) {
        const o = (b * T + i) * C + h * hd;
        const row = ((b * H + h) * T + i) * T;
        let dot = 0;
        for (let j = 0; j <= i; j++) {
          const v = (b * T + j) * C3 + 2 * C + h * hd;
          const p = att[row + j];
          let s = 0;
          for (let d = 0; d < hd; d++) {
            s += dy[o + d] * qkv[v + d];
            dqkv[v + d] += p * dy[o + d];
          }
          dAtt[j] = s;
          dot += p * s;
        }
        const q = (b * T + i) * C3 + h * hd;
        for (let j = 0; j <= i; j++) {
          const ds = att[row + j] * (dAtt[j] - dot) * scale;
          const k = (b * T + j) * C3 + C + h * hd;
          for (let d = 0; d < hd; d++) {
            dqkv[q + d] += ds * qkv[k + d];
            dqkv[k + d] += ds * qkv[q + d];
          }
        }
      }
    }
  }
}

// ---- the whole model ----

interface BlockSaved {
  x: Float32Array; // [N, C] block input
  ln1: Float32Array;
  mean1: Float32Array;
  rstd1: Float32Array;
  qkv: Float32Array; // [N, 3C] (llama: after rotary positions, with key/value heads copied per query head)
  qkvSaved: LinearSaved;
  att: Float32Array; // [B, H, T, T]
  projSaved: LinearSaved;
  xMid: Float32Array; // [N, C] after the attention residual
  ln2: Float32Array;
  mean2: Float32Array;
  rstd2: Float32Array;
  fc: Float32Array; // [N, dFF] before GELU (llama: [N, 2 * dFF], gate and up)
  fcTanh: Float32Array | null; // [N, dFF] the tanh inside GELU
  fcSaved: LinearSaved;
  outSaved: LinearSaved;
}

function embed(x: Float32Array, tokens: Int32Array, T: number, positionOffsets: ArrayLike<number> | null, model: ModelView): void {
  const { vocabSize: V, dModel: C } = model.config;
  const { tokenEmbedding: wte, positionEmbedding: wpe } = model.weights;
  const learned = wpe.length > 0;
  for (let n = 0; n < tokens.length; n++) {
    const tok = tokens[n];
    assert(tok >= 0 && tok < V && Number.isInteger(tok), () => `token id ${tok} is outside the vocabulary 0..${V - 1}`);
    const t = positionOffsets ? positionOffsets[n] : n % T;
    const xo = n * C,
      eo = tok * C,
      po = t * C;
    if (learned) for (let c = 0; c < C; c++) x[xo + c] = wte[eo + c] + wpe[po + c];
    else for (let c = 0; c < C; c++) x[xo + c] = wte[eo + c];
  }
}

// ---- the parts where the architectures differ ----

function normForward(
  s: ModelShape,
  out: Float32Array,
  mean: Float32Array,
  rstd: Float32Array,
  x: Float32Array,
  n: LayerNormWeights,
  N: number,
  C: number,
): void {
  if (s.llama) rmsNormForward(out, rstd, x, n.gain, N, C, s.normEps);
  else layerNormForward(out, mean, rstd, x, n.gain, n.bias, N, C);
}

function normBackward(
  s: ModelShape,
  dx: Float32Array,
  grad: LayerNormWeights | undefined,
  dy: Float32Array,
  x: Float32Array,
  mean: Float32Array,
  rstd: Float32Array,
  n: LayerNormWeights,
  N: number,
  C: number,
): void {
  if (s.llama) rmsNormBackward(dx, grad?.gain ?? null, dy, x, rstd, n.gain, N, C);
  else layerNormBackward(dx, grad?.gain ?? null, grad?.bias ?? null, dy, x, mean, rstd, n.gain, N, C);
}

/** The MLP's nonlinearity: act[N, dFF] from fc; returns GELU's saved tanh (llama: nothing to keep). */
function activationForward(s: ModelShape, act: Float32Array, fc: Float32Array, N: number, keep: boolean): Float32Array | null {
  if (s.llama) {
    swigluForward(act, fc, N, s.dFF);
    return null;
  }
  const tanh = keep ? scratch(N * s.dFF) : null;
  geluForward(act, fc, N * s.dFF, tanh);
  return tanh;
}

/** logits[N, V] = h @ lm_head, or h @ wteᵀ when tied. */
function outputLayer(s: ModelShape, logits: Float32Array, h: Float32Array, w: GPTWeights, N: number, C: number, V: number): void {
  if (s.tied) matmulTransB(logits, h, w.tokenEmbedding, N, C, V, false, 1);
  else matmul(logits, h, w.lmHead, N, C, V, null);
}

function runGPT(request: RunRequest): RunResult {
  const mark = arena?.mark() ?? 0;
  try {
    const { logits, values } = runPass(request);
    // The arena is reused by the next pass; what leaves the engine is copied out first.
    return { logits: logits.slice(), values: values ? values.slice() : null };
  } finally {
    arena?.release(mark);
  }
}

function runPass(request: RunRequest): RunResult {
  const { model, tokens, batch: B, seqLen: T, dropoutRng } = request;
  const { config, weights: w, lora, valueHead } = model;
  const { dModel: C, nHeads: H, vocabSize: V } = config;
  const sh = modelShape(config);
  const table = sh.llama ? ropeTable(config, sh) : null;
  const positionOf = (n: number) => n % T;
  const N = B * T;
  assert(T <= config.contextLength, () => `sequence length ${T} exceeds contextLength=${config.contextLength}`);
  assert(tokens.length === N, () => `expected ${B}x${T}=${N} tokens, got ${tokens.length}`);
  const scale = lora?.scale ?? 0;
  const dropout = lora?.config.dropout ?? 0;

  let x = scratch(N * C); // [N, C]
  embed(x, tokens, T, null, model);

  const saved: BlockSaved[] = [];
  for (let l = 0; l < config.nLayers; l++) {
    const blk = w.blocks[l];
    const pairs = lora?.blocks[l] ?? {};
    const ln1 = scratch(N * C),
      mean1 = scratch(N),
      rstd1 = scratch(N);
    normForward(sh, ln1, mean1, rstd1, x, blk.ln1, N, C);
    const qkv = scratch(N * 3 * C);
    const raw = sh.llama ? scratch(N * blk.attn_qkv.nOut) : qkv;
    const qkvSaved = linearForward(raw, ln1, N, blk.attn_qkv, pairs.attn_qkv, scale, dropout, dropoutRng, sh.qkvBias);
    if (table) ropeAndExpand(qkv, raw, N, positionOf, C, H, sh, table);
    const att = zeros(B * H * T * T);
    const attY = scratch(N * C);
    attentionForward(attY, att, qkv, B, T, C, H);
    const xMid = scratch(N * C);
    const projSaved = linearForward(xMid, attY, N, blk.attn_proj, pairs.attn_proj, scale, dropout, dropoutRng, sh.attnOutBias);
    add(xMid, xMid, x, xMid.length);

    const ln2 = scratch(N * C),
      mean2 = scratch(N),
      rstd2 = scratch(N);
    normForward(sh, ln2, mean2, rstd2, xMid, blk.ln2, N, C);
    const fc = scratch(N * blk.mlp_fc.nOut);
    const fcSaved = linearForward(fc, ln2, N, blk.mlp_fc, pairs.mlp_fc, scale, dropout, dropoutRng, sh.mlpBias);
    const g = scratch(N * sh.dFF);
    const fcTanh = activationForward(sh, g, fc, N, true);
    const xOut = scratch(N * C);
    const outSaved = linearForward(xOut, g, N, blk.mlp_proj, pairs.mlp_proj, scale, dropout, dropoutRng, sh.mlpBias);
    add(xOut, xOut, xMid, xOut.length);

    saved.push({ x, ln1, mean1, rstd1, qkv, qkvSaved, att, projSaved, xMid, ln2, mean2, rstd2, fc, fcTanh, fcSaved, outSaved });
    x = xOut;
  }

  const lnf = scratch(N * C),
    meanF = scratch(N),
    rstdF = scratch(N);
  normForward(sh, lnf, meanF, rstdF, x, w.lnFinal, N, C);
  let values: Float32Array | null = null;
  if (valueHead) {
    values = scratch(N); // [N]
    for (let n = 0; n < N; n++) {
      let s = valueHead.bias[0];
      for (let c = 0; c < C; c++) s += lnf[n * C + c] * valueHead.weight[c];
      values[n] = s;
    }
  }
  if (!request.backward) {
    const logits = scratch(N * V); // [N, V]
    outputLayer(sh, logits, lnf, w, N, C, V);
    return { logits, values };
  }

  // ---- backward ----
  // The output layer, the loss and the output layer's gradients, `chunk` rows at a time: the logits and their
  // gradient of a large vocabulary then exist for one range of rows only.
  const grads: GradientTargets = request.backward.grads;
  const gw = grads.weights;
  const chunk = Math.min(N, request.backward.chunkRows ?? N);
  const dLnf = scratch(N * C);
  let logits: Float32Array = new Float32Array(0);
  let dValues: Float32Array | null = null;
  for (let r0 = 0; r0 < N; r0 += chunk) {
    const rows = Math.min(chunk, N - r0);
    const chunkMark = chunk < N ? (arena?.mark() ?? 0) : 0;
    const h = lnf.subarray(r0 * C, (r0 + rows) * C);
    const dh = dLnf.subarray(r0 * C, (r0 + rows) * C);
    const chunkLogits = scratch(rows * V);
    outputLayer(sh, chunkLogits, h, w, rows, C, V);
    const gradient = request.backward.lossGradient(chunkLogits, values, r0, rows);
    const dLogits = gradient.dLogits;
    dValues = gradient.dValues;
    if (sh.tied) {
      matmul(dh, dLogits, w.tokenEmbedding, rows, V, C, null);
      if (gw) matmulTransAAccumulate(gw.tokenEmbedding, dLogits, h, rows, V, C, 1);
    } else {
      matmulTransB(dh, dLogits, w.lmHead, rows, V, C, false, 1);
      if (gw) matmulTransAAccumulate(gw.lmHead, h, dLogits, rows, C, V, 1);
    }
    if (chunk < N) arena?.release(chunkMark);
    else logits = chunkLogits;
  }
  if (valueHead && dValues) {
    const gv = grads.valueHead;
    for (let n = 0; n < N; n++) {
      const dv = dValues[n];
      if (dv === 0) continue;
      for (let c = 0; c < C; c++) {
        dLnf[n * C + c] += dv * valueHead.weight[c];
        if (gv) gv.weight[c] += dv * lnf[n * C + c];
      }
      if (gv) gv.bias[0] += dv;
    }
  }
  const dx = zeros(N * C); // gradient of the residual stream
  normBackward(sh, dx, gw?.lnFinal, dLnf, x, meanF, rstdF, w.lnFinal, N, C);

  for (let l = config.nLayers - 1; l >= 0; l--) {
    // This layer's gradient temporaries are dead once dx has passed through it.
    const layerMark = arena?.mark() ?? 0;
    const s = saved[l];
    const blk = w.blocks[l];
    const pairs = lora?.blocks[l] ?? {};
    const gBlk = gw?.blocks[l];
    const gPairs = grads.lora?.blocks[l];
    // MLP branch: x_out = x_mid + mlp_proj(gelu(mlp_fc(ln2(x_mid))))
    const dG = scratch(N * sh.dFF);
    linearBackward(dG, dx, N, blk.mlp_proj, s.outSaved, pairs.mlp_proj, scale, dropout, gBlk?.mlp_proj, gPairs?.mlp_proj, sh.mlpBias);
    const dFc = scratch(N * blk.mlp_fc.nOut);
    if (sh.llama) swigluBackward(dFc, dG, s.fc, N, sh.dFF);
    else geluBackward(dFc, dG, s.fc, s.fcTanh!, dFc.length);
    const dLn2 = scratch(N * C);
    linearBackward(dLn2, dFc, N, blk.mlp_fc, s.fcSaved, pairs.mlp_fc, scale, dropout, gBlk?.mlp_fc, gPairs?.mlp_fc, sh.mlpBias);
    normBackward(sh, dx, gBlk?.ln2, dLn2, s.xMid, s.mean2, s.rstd2, blk.ln2, N, C);
    // attention branch: x_mid = x + attn_proj(attention(attn_qkv(ln1(x))))
    const dAttY = scratch(N * C);
    linearBackward(dAttY, dx, N, blk.attn_proj, s.projSaved, pairs.attn_proj, scale, dropout, gBlk?.attn_proj, gPairs?.attn_proj, sh.attnOutBias);
    const dQkv = zeros(N * 3 * C);
    attentionBackward(dQkv, dAttY, s.qkv, s.att, B, T, C, H);
    let dRaw = dQkv;
    if (table) {
      dRaw = zeros(N * blk.attn_qkv.nOut);
      ropeAndExpandBackward(dRaw, dQkv, N, positionOf, C, H, sh, table);
    }
    const dLn1 = scratch(N * C);
    linearBackward(dLn1, dRaw, N, blk.attn_qkv, s.qkvSaved, pairs.attn_qkv, scale, dropout, gBlk?.attn_qkv, gPairs?.attn_qkv, sh.qkvBias);
    normBackward(sh, dx, gBlk?.ln1, dLn1, s.x, s.mean1, s.rstd1, blk.ln1, N, C);
    arena?.release(layerMark);
  }

  if (gw) {
    for (let n = 0; n < N; n++) {
      const eo = tokens[n] * C,
        po = (n % T) * C,
        xo = n * C;
      for (let c = 0; c < C; c++) gw.tokenEmbedding[eo + c] += dx[xo + c];
      if (sh.learnedPositions) for (let c = 0; c < C; c++) gw.positionEmbedding[po + c] += dx[xo + c];
    }
  }
  return { logits, values };
}

// ---- incremental decoding with a key/value cache ----

type DecoderMemory = NonNullable<ReturnType<NonNullable<typeof simdGemm>["instantiate"]>>;
/**
 * Memories of disposed decoders, kept for the next ones: a shared memory is only freed when the garbage
 * collector gets to it, so a new one per `sample` call let the process grow by hundreds of MB. Stale contents
 * are harmless: a decoder reads only cache positions it has written.
 */
const freeDecoderMemories: DecoderMemory[] = [];
const keptDecoderMemories = 4;

function takeDecoderMemory(floats: number): DecoderMemory | null {
  const i = freeDecoderMemories.findIndex((m) => m.heap.length >= floats);
  if (i >= 0) return freeDecoderMemories.splice(i, 1)[0];
  return simdGemm?.instantiate(floats) ?? null;
}

function giveBackDecoderMemory(memory: DecoderMemory): void {
  freeDecoderMemories.push(memory);
  if (freeDecoderMemories.length > keptDecoderMemories) freeDecoderMemories.shift();
}

/** The arrays a decoding step reads as operands of the SIMD kernels: its output layer `head`, the products' and norms' weights. */
function stepOperands(model: ModelView, head: Float32Array): Float32Array[] {
  const { weights: w, lora } = model;
  const arrays: Float32Array[] = [head, w.lnFinal.gain, w.lnFinal.bias];
  w.blocks.forEach((blk, l) => {
    arrays.push(blk.ln1.gain, blk.ln1.bias, blk.ln2.gain, blk.ln2.bias);
    for (const lin of [blk.attn_qkv, blk.attn_proj, blk.mlp_fc, blk.mlp_proj]) arrays.push(lin.weight);
    for (const pair of Object.values(lora?.blocks[l] ?? {})) if (pair) arrays.push(pair.A, pair.B);
  });
  return arrays;
}

/** The transpose [cols, rows] of a row-major [rows, cols] matrix. */
function transposeMatrix(a: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  const native = nativeOps();
  if (native) {
    native.transpose(out, a, rows, cols);
    return out;
  }
  // blocks of 32 x 32, so reads and writes both stay within a few cache lines
  for (let i0 = 0; i0 < rows; i0 += 32) {
    for (let j0 = 0; j0 < cols; j0 += 32) {
      const iEnd = Math.min(rows, i0 + 32),
        jEnd = Math.min(cols, j0 + 32);
      for (let i = i0; i < iEnd; i++) for (let j = j0; j < jEnd; j++) out[j * rows + i] = a[i * cols + j];
    }
  }
  return out;
}

function createDecoder(model: ModelView, rows: number, capacity?: number): Decoder {
  const { config, weights: w, lora } = model;
  const { dModel: C, nHeads: H, vocabSize: V, nLayers: L } = config;
  assert(
    capacity === undefined || (Number.isInteger(capacity) && capacity >= 1),
    () => `a decoder's capacity is a whole number of tokens ≥ 1; got ${capacity}`,
  );
  /** Positions a row holds: the cache's time stride. */
  const Tmax = Math.min(capacity ?? config.contextLength, config.contextLength);
  const hd = C / H;
  const sh = modelShape(config);
  const table = sh.llama ? ropeTable(config, sh) : null;
  const scale = lora?.scale ?? 0;
  // [rows, KV, Tmax, hd] per layer, one entry per key/value head (Llama's shared heads are stored once, not
  // once per query head). With the SIMD kernels, the caches live in a memory of their own, next to room for the
  // queries, outputs and scores of `rows` tokens at a time, and attention runs there (simd-ops.ts,
  // cachedAttention).
  const KVH = sh.llama ? sh.nKvHeads : H;
  const group = H / KVH;
  const cacheSize = rows * KVH * Tmax * hd;
  const maxTokens = rows;
  const layout = { keys: 0, vals: L * cacheSize, qkv: 2 * L * cacheSize };
  const yAt = layout.qkv + maxTokens * 3 * C,
    scoresAt = yAt + maxTokens * C,
    basesAt = scoresAt + Tmax + 4;
  const own = hd % 4 === 0 && simdOpsEnabled() ? takeDecoderMemory(basesAt + 2 * maxTokens) : null;
  const cache = (at: number) => (own ? new Float32Array(own.heap.buffer, at * 4, cacheSize) : new Float32Array(cacheSize));
  const keys = Array.from({ length: L }, (_, l) => cache(layout.keys + l * cacheSize));
  const vals = Array.from({ length: L }, (_, l) => cache(layout.vals + l * cacheSize));
  const bases = own ? new Int32Array(own.heap.buffer, basesAt * 4, maxTokens) : null;
  const lens = own ? new Int32Array(own.heap.buffer, (basesAt + maxTokens) * 4, maxTokens) : null;
  const lengths = new Int32Array(rows);
  const scores = new Float32Array(Tmax);
  // A tied output layer is wte read as its transpose: each step's product would have to transpose (pack) it
  // again, so the decoder keeps wteᵀ [C, V] for its life. The product reads it as rows and computes each logit
  // by the same operations, so the logits are the same.
  const headT = sh.tied && arena ? transposeMatrix(w.tokenEmbedding, V, C) : null;
  // The weights every step multiplies by, copied into the kernel's memory once for this decoder's life rather
  // than once per product: a decoding step of a small model spent most of its fixed cost copying them.
  const unpin = arena ? simdGemm!.pin(stepOperands(model, headT ?? (sh.tied ? w.tokenEmbedding : w.lmHead))) : null;
  let disposed = false;

  function extend(rowIds: readonly number[], newTokens: readonly (readonly number[])[]): Float32Array {
    const mark = arena?.mark() ?? 0;
    try {
      return extendRows(rowIds, newTokens);
    } finally {
      arena?.release(mark);
    }
  }

  function extendRows(rowIds: readonly number[], newTokens: readonly (readonly number[])[]): Float32Array {
    const R = rowIds.length;
    assert(R === newTokens.length && R > 0, () => `extend needs one token list per row; got ${R} rows and ${newTokens.length} lists`);
    const m = newTokens[0].length;
    const N = R * m;
    const tokens = new Int32Array(N);
    const positions = new Int32Array(N);
    rowIds.forEach((row, r) => {
      assert(row >= 0 && row < rows, () => `row ${row} is outside this decoder's 0..${rows - 1}`);
      assert(newTokens[r].length === m, () => `every row must get ${m} new tokens; row ${row} got ${newTokens[r].length}`);
      assert(
        lengths[row] + m <= Tmax,
        () =>
          `row ${row} would hold ${lengths[row] + m} tokens, over ${Tmax === config.contextLength ? `contextLength=${Tmax}` : `this decoder's capacity of ${Tmax}`}`,
      );
      for (let j = 0; j < m; j++) {
        tokens[r * m + j] = newTokens[r][j];
        positions[r * m + j] = lengths[row] + j;
      }
    });
    let x = scratch(N * C);
    embed(x, tokens, m, positions, model);
    const h = scratch(N * C),
      mean = scratch(N),
      rstd = scratch(N);
    const qkv = scratch(N * 3 * C);
    const raw = table ? scratch(N * (C + 2 * sh.kvDim)) : qkv;
    const positionOf = (n: number) => positions[n];
    const y = scratch(N * C);
    const fc = scratch(N * w.blocks[0].mlp_fc.nOut);
    const act = sh.llama ? scratch(N * sh.dFF) : fc;
    for (let l = 0; l < L; l++) {
      const blk = w.blocks[l];
      const pairs = lora?.blocks[l] ?? {};
      const K = keys[l],
        Vc = vals[l];
      normForward(sh, h, mean, rstd, x, blk.ln1, N, C);
      linearForward(raw, h, N, blk.attn_qkv, pairs.attn_qkv, scale, 0, undefined, sh.qkvBias);
      if (table) ropeAndExpand(qkv, raw, N, positionOf, C, H, sh, table);
      for (let n = 0; n < N; n++) {
        const row = rowIds[Math.floor(n / m)];
        for (let hh = 0; hh < KVH; hh++) {
          const c = ((row * KVH + hh) * Tmax + positions[n]) * hd;
          const src = n * 3 * C + hh * group * hd; // the first query head of the group holds its copy
          for (let d = 0; d < hd; d++) {
            K[c + d] = qkv[src + C + d];
            Vc[c + d] = qkv[src + 2 * C + d];
          }
        }
      }
      const inv = 1 / Math.sqrt(hd);
      // maxTokens at a time (a prefill has more)
      for (let n0 = 0; own && n0 < N; n0 += maxTokens) {
        const count = Math.min(maxTokens, N - n0);
        own.heap.set(qkv.subarray(n0 * 3 * C, (n0 + count) * 3 * C), layout.qkv);
        for (let i = 0; i < count; i++) {
          bases![i] = rowIds[Math.floor((n0 + i) / m)] * KVH * Tmax * hd * 4;
          lens![i] = positions[n0 + i] + 1;
        }
        const kAt = (layout.keys + l * cacheSize) * 4,
          vAt = (layout.vals + l * cacheSize) * 4;
        own.exports.cachedAttention(layout.qkv * 4, kAt, vAt, yAt * 4, scoresAt * 4, bases!.byteOffset, lens!.byteOffset, count, H, hd, C, Tmax, group, inv);
        y.set(own.heap.subarray(yAt, yAt + count * C), n0 * C);
      }
      for (let n = 0; n < (own ? 0 : N); n++) {
        const row = rowIds[Math.floor(n / m)];
        const len = positions[n] + 1;
        for (let hh = 0; hh < H; hh++) {
          const q = n * 3 * C + hh * hd;
          const base = (row * KVH + Math.floor(hh / group)) * Tmax * hd;
          let max = -Infinity;
          for (let t = 0; t < len; t++) {
            let s = 0;
            const k = base + t * hd;
            for (let d = 0; d < hd; d++) s += qkv[q + d] * K[k + d];
            s *= inv;
            scores[t] = s;
            if (s > max) max = s;
          }
          let sum = 0;
          for (let t = 0; t < len; t++) {
            scores[t] = Math.exp(scores[t] - max);
            sum += scores[t];
          }
          const o = n * C + hh * hd;
          for (let d = 0; d < hd; d++) y[o + d] = 0;
          for (let t = 0; t < len; t++) {
            const p = scores[t] / sum;
            const v = base + t * hd;
            for (let d = 0; d < hd; d++) y[o + d] += p * Vc[v + d];
          }
        }
      }
      const xMid = scratch(N * C);
      linearForward(xMid, y, N, blk.attn_proj, pairs.attn_proj, scale, 0, undefined, sh.attnOutBias);
      add(xMid, xMid, x, xMid.length);
      normForward(sh, h, mean, rstd, xMid, blk.ln2, N, C);
      linearForward(fc, h, N, blk.mlp_fc, pairs.mlp_fc, scale, 0, undefined, sh.mlpBias);
      activationForward(sh, act, fc, N, false);
      const xOut = scratch(N * C);
      linearForward(xOut, act, N, blk.mlp_proj, pairs.mlp_proj, scale, 0, undefined, sh.mlpBias);
      add(xOut, xOut, xMid, xOut.length);
      x = xOut;
    }
    for (const row of rowIds) lengths[row] += m;
    // Only each row's last position is needed for the next token.
    const last = scratch(R * C);
    for (let r = 0; r < R; r++) last.set(x.subarray((r * m + m - 1) * C, (r * m + m) * C), r * C);
    const lnf = scratch(R * C);
    normForward(sh, lnf, scratch(R), scratch(R), last, w.lnFinal, R, C);
    const logits = scratch(R * V);
    if (headT) matmul(logits, lnf, headT, R, C, V, null);
    else outputLayer(sh, logits, lnf, w, R, C, V);
    return logits.slice();
  }

  return {
    extend,
    copyRow(from, to) {
      const n = lengths[from];
      for (let l = 0; l < L; l++) {
        for (let hh = 0; hh < KVH; hh++) {
          const src = (from * KVH + hh) * Tmax * hd;
          const dst = (to * KVH + hh) * Tmax * hd;
          keys[l].copyWithin(dst, src, src + n * hd);
          vals[l].copyWithin(dst, src, src + n * hd);
        }
      }
      lengths[to] = n;
    },
    length: (row) => lengths[row],
    dispose() {
      // once only: a memory given back twice would be handed to two decoders
      if (disposed) return;
      disposed = true;
      unpin?.();
      if (own) giveBackDecoderMemory(own);
    },
  };
}

/** The pure-TypeScript engine. */
export const jsEngine: Engine = Object.freeze({ name: "js", run: runGPT, createDecoder });
