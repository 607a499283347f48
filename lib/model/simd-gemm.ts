/**
 * A WebAssembly SIMD matrix multiply, generated here as bytes (no toolchain needed), for the engine's big
 * matmuls: V8 runs it several times faster than the best plain-TypeScript loop because each instruction does
 * four float32 multiply-adds.
 *
 * The kernel computes C[M, N] = A[M, K] @ B[K, N] for M a multiple of 4 and N a multiple of 8, with A packed
 * as [M/4][K][4] (the four rows of a block side by side per k) so one pointer walks it. Each step keeps a 4×8
 * tile of C in eight v128 registers. The TypeScript side packs, pads, transposes and scales the operands
 * while copying them in, which costs O(MK + KN) against the kernel's O(MKN).
 */

// ---- a tiny WebAssembly encoder: just what the kernel needs ----

const op = {
  block: 0x02, loop: 0x03, br: 0x0c, brIf: 0x0d, end: 0x0b,
  localGet: 0x20, localSet: 0x21, localTee: 0x22,
  f32Load: 0x2a, i32Const: 0x41, i32Eqz: 0x45, i32GeU: 0x4f, i32Add: 0x6a, i32Sub: 0x6b, i32Mul: 0x6c, i32Shl: 0x74,
};
const simd = { load: [0xfd, 0x00], store: [0xfd, 0x0b], splat: [0xfd, 0x13], add: [0xfd, 0xe4, 0x01], mul: [0xfd, 0xe6, 0x01], const: [0xfd, 0x0c] };
const voidBlock = 0x40;
const i32 = 0x7f, v128 = 0x7b;

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) return [...out, byte];
    out.push(byte | 0x80);
  }
}

const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];
const name = (s: string) => [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
const vector = (items: number[][]) => [...uleb(items.length), ...items.flat()];

function gemmModule(): Uint8Array<ArrayBuffer> {
  // params: 0 a, 1 b, 2 c, 3 M, 4 K, 5 N ; i32 locals: 6 i, 7 j, 8 k, 9 pa, 10 pb, 11 N4, 12 pc ; v128 locals: 13..20 acc, 21 b0, 22 b1, 23 av
  const [A, B, Cp, M, K, N, I, J, Kc, PA, PB, N4, PC] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const ACC = 13, B0 = 21, B1 = 22, AV = 23;
  const get = (l: number) => [op.localGet, l];
  const set = (l: number) => [op.localSet, l];
  const c32 = (v: number) => [op.i32Const, ...sleb(v)];
  const memarg = (align: number, offset: number) => [align, ...uleb(offset)];
  const body: number[] = [
    ...get(N), ...c32(2), op.i32Shl, ...set(N4),
    ...c32(0), ...set(I),
    op.block, voidBlock, op.loop, voidBlock,
    ...get(I), ...get(M), op.i32GeU, op.brIf, 1,
    ...c32(0), ...set(J),
    op.block, voidBlock, op.loop, voidBlock,
    ...get(J), ...get(N), op.i32GeU, op.brIf, 1,
    // zero the 4×8 accumulator tile
    ...Array.from({ length: 8 }, (_, t) => [...simd.const, ...new Array(16).fill(0), ...set(ACC + t)]).flat(),
    // pa = a + i*K*4 (block i/4 of the packed A holds K*4 floats); pb = b + j*4
    ...get(A), ...get(I), ...get(K), op.i32Mul, ...c32(2), op.i32Shl, op.i32Add, ...set(PA),
    ...get(B), ...get(J), ...c32(2), op.i32Shl, op.i32Add, ...set(PB),
    ...get(K), ...set(Kc),
    op.block, voidBlock, op.loop, voidBlock,
    ...get(Kc), op.i32Eqz, op.brIf, 1,
    ...get(PB), ...simd.load, ...memarg(4, 0), ...set(B0),
    ...get(PB), ...simd.load, ...memarg(4, 16), ...set(B1),
    ...[0, 1, 2, 3].flatMap((r) => [
      ...get(PA), op.f32Load, ...memarg(2, 4 * r), ...simd.splat, ...set(AV),
      ...get(ACC + 2 * r), ...get(AV), ...get(B0), ...simd.mul, ...simd.add, ...set(ACC + 2 * r),
      ...get(ACC + 2 * r + 1), ...get(AV), ...get(B1), ...simd.mul, ...simd.add, ...set(ACC + 2 * r + 1),
    ]),
    ...get(PA), ...c32(16), op.i32Add, ...set(PA),
    ...get(PB), ...get(N4), op.i32Add, ...set(PB),
    ...get(Kc), ...c32(1), op.i32Sub, ...set(Kc),
    op.br, 0,
    op.end, op.end,
    // store the tile at c + (i*N + j)*4, one row of C per N4 bytes
    ...get(Cp), ...get(I), ...get(N), op.i32Mul, ...get(J), op.i32Add, ...c32(2), op.i32Shl, op.i32Add, ...set(PC),
    ...[0, 1, 2, 3].flatMap((r) => [
      ...get(PC), ...get(ACC + 2 * r), ...simd.store, ...memarg(4, 0),
      ...get(PC), ...get(ACC + 2 * r + 1), ...simd.store, ...memarg(4, 16),
      ...get(PC), ...get(N4), op.i32Add, ...set(PC),
    ]),
    ...get(J), ...c32(8), op.i32Add, ...set(J),
    op.br, 0,
    op.end, op.end,
    ...get(I), ...c32(4), op.i32Add, ...set(I),
    op.br, 0,
    op.end, op.end,
    op.end,
  ];
  const locals = vector([[...uleb(7), i32], [...uleb(11), v128]]);
  const code = [...locals, ...body];
  return Uint8Array.from([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vector([[0x60, ...vector([[i32], [i32], [i32], [i32], [i32], [i32]]), 0x00]])),
    ...section(2, vector([[...name("env"), ...name("memory"), 0x02, 0x00, 0x01]])),
    ...section(3, vector([[0x00]])),
    ...section(7, vector([[...name("gemm"), 0x00, 0x00]])),
    ...section(10, vector([[...uleb(code.length), ...code]])),
  ]);
}

// ---- the TypeScript side ----

/**
 * A matrix operand read through an offset and strides, so a transpose is swapped strides and one head of a
 * [T, 3C] qkv block is an offset and a row stride.
 */
export interface MatrixView {
  data: Float32Array;
  offset: number;
  rows: number;
  cols: number;
  rowStride: number;
  colStride: number;
}

/** data[offset + i*rowStride + j] as an [rows, cols] matrix. */
export const rowMajor = (data: Float32Array, rows: number, cols: number, offset = 0, rowStride = cols): MatrixView => ({
  data,
  offset,
  rows,
  cols,
  rowStride,
  colStride: 1,
});

/** The transpose [cols, rows] of the row-major [rows, cols] matrix at data[offset], rows rowStride apart. */
export const transposed = (data: Float32Array, rows: number, cols: number, offset = 0, rowStride = cols): MatrixView => ({
  data,
  offset,
  rows: cols,
  cols: rows,
  rowStride: 1,
  colStride: rowStride,
});

export interface SimdGemm {
  /**
   * out[M, N] (+)= scale * a[M, K] @ b[K, N], with a and b read through their views and row i of the result at
   * out[outOffset + i * outRowStride] (default: packed rows).
   */
  multiply(out: Float32Array, a: MatrixView, b: MatrixView, accumulate: boolean, scale: number, outOffset?: number, outRowStride?: number): void;
}

function createSimdGemm(): SimdGemm | null {
  const bytes = gemmModule();
  if (typeof WebAssembly === "undefined" || !WebAssembly.validate(bytes)) return null;
  const memory = new WebAssembly.Memory({ initial: 16 });
  const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { memory } });
  const gemm = instance.exports.gemm as (a: number, b: number, c: number, M: number, K: number, N: number) => void;
  let heap = new Float32Array(memory.buffer);

  return {
    multiply(out, a, b, accumulate, scale, outOffset = 0, outRowStride = b.cols) {
      const M = a.rows, K = a.cols, N = b.cols;
      if (b.rows !== K) throw new Error(`matmul of [${M}, ${K}] by [${b.rows}, ${N}]: inner sizes differ`);
      const M4 = (M + 3) & ~3, N8 = (N + 7) & ~7;
      const aOff = 0, bOff = M4 * K, cOff = bOff + K * N8; // float offsets, all multiples of 4 (16 bytes)
      const need = (cOff + M4 * N8) * 4;
      if (need > memory.buffer.byteLength) {
        memory.grow(Math.ceil((need - memory.buffer.byteLength) / 65536));
        heap = new Float32Array(memory.buffer);
      }
      // A packed as [M4/4][K][4], scaled; padding rows are zero.
      const ad = a.data, ars = a.rowStride, acs = a.colStride, ao = a.offset;
      for (let i4 = 0; i4 < M4; i4 += 4) {
        const base = aOff + i4 * K;
        for (let r = 0; r < 4; r++) {
          const row = i4 + r;
          if (row < M) {
            const src = ao + row * ars;
            for (let k = 0; k < K; k++) heap[base + k * 4 + r] = ad[src + k * acs] * scale;
          } else {
            for (let k = 0; k < K; k++) heap[base + k * 4 + r] = 0;
          }
        }
      }
      // B as [K][N8], padding columns zero.
      const bd = b.data, brs = b.rowStride, bcs = b.colStride, bo = b.offset;
      for (let k = 0; k < K; k++) {
        const dst = bOff + k * N8, src = bo + k * brs;
        if (bcs === 1) heap.set(bd.subarray(src, src + N), dst);
        else for (let j = 0; j < N; j++) heap[dst + j] = bd[src + j * bcs];
        for (let j = N; j < N8; j++) heap[dst + j] = 0;
      }
      gemm(aOff * 4, bOff * 4, cOff * 4, M4, K, N8);
      for (let i = 0; i < M; i++) {
        const src = cOff + i * N8, dst = outOffset + i * outRowStride;
        if (accumulate) for (let j = 0; j < N; j++) out[dst + j] += heap[src + j];
        else out.set(heap.subarray(src, src + N), dst);
      }
    },
  };
}

/** The SIMD kernel, or null where WebAssembly SIMD is unavailable (the plain loops are used then). */
export const simdGemm: SimdGemm | null = createSimdGemm();
