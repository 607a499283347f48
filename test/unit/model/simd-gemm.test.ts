import { describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";
import { type MatrixView, rowMajor, simdGemm, transposed } from "@/lib/model/simd-gemm";

/** out (+)= scale * a @ b in float64, the reference the kernel is checked against. */
function reference(out: Float64Array, a: MatrixView, b: MatrixView, accumulate: boolean, scale: number, outOffset: number, outRowStride: number) {
  const at = (v: MatrixView, i: number, j: number) => v.data[v.offset + i * v.rowStride + j * v.colStride];
  for (let i = 0; i < a.rows; i++) {
    for (let j = 0; j < b.cols; j++) {
      let s = 0;
      for (let k = 0; k < a.cols; k++) s += at(a, i, k) * at(b, k, j);
      const o = outOffset + i * outRowStride + j;
      out[o] = (accumulate ? out[o] : 0) + scale * s;
    }
  }
}

describe.skipIf(!simdGemm)("the WebAssembly SIMD matrix kernel", () => {
  const gemm = simdGemm!;
  const rng = new Rng(7);
  const fill = (data: Float32Array) => {
    for (let i = 0; i < data.length; i++) data[i] = rng.normal();
    return data;
  };

  // Every remainder of the 6-row tile, inner sizes on both sides of the 4-step unroll and of the 256-row
  // cache block, widths that are and are not multiples of 8, both layouts of A, operands in and out of the
  // kernel's memory, strided output, accumulation and scale.
  const shapes: [number, number, number][] = [
    [1, 1, 8],
    [2, 3, 8],
    [3, 4, 16],
    [4, 5, 8],
    [5, 7, 24],
    [6, 8, 8],
    [7, 9, 16],
    [11, 13, 5],
    [12, 16, 40],
    [13, 300, 8],
    [64, 32, 64],
    [100, 257, 19],
    [37, 520, 24],
  ];
  it.each(shapes)("matches a float64 product for M=%i K=%i N=%i in every layout", (M, K, N) => {
    const mark = gemm.arena.mark();
    try {
      for (const aLayout of ["rows", "columns"] as const) {
        for (const inArena of [false, true]) {
          for (const accumulate of [false, true]) {
            const alloc = (n: number) => (inArena ? fill(gemm.arena.alloc(n)) : fill(new Float32Array(n)));
            const aOffset = 3,
              bOffset = 5,
              outOffset = 2,
              outRowStride = N + 3;
            const aData = alloc(aOffset + (M + 1) * (K + 1));
            // A stored as [M, K] rows (read as is) or as [K, M] rows (read transposed), row stride padded by one
            const a = aLayout === "rows" ? rowMajor(aData, M, K, aOffset, K + 1) : transposed(aData, K, M, aOffset, M + 1);
            const bData = alloc(bOffset + K * N);
            const b = rowMajor(bData, K, N, bOffset);
            const out = alloc(outOffset + M * outRowStride);
            const expected = Float64Array.from(out);
            const scale = accumulate ? 0.5 : 1;
            reference(expected, a, b, accumulate, scale, outOffset, outRowStride);
            gemm.multiply(out, a, b, accumulate, scale, outOffset, outRowStride);
            for (let i = 0; i < out.length; i++) {
              expect(Math.abs(out[i] - expected[i]), `${aLayout} arena=${inArena} accumulate=${accumulate} at ${i}`).toBeLessThan(1e-4 * (1 + Math.sqrt(K)));
            }
          }
        }
      }
    } finally {
      gemm.arena.release(mark);
    }
  });

  it("reads a pinned array from its copy until unpinned, and a release below the pin drops it", () => {
    const M = 5,
      K = 24,
      N = 16;
    const a = fill(new Float32Array(M * K));
    const b = fill(new Float32Array(K * N));
    const product = () => {
      const out = new Float32Array(M * N);
      gemm.multiply(out, rowMajor(a, M, K), rowMajor(b, K, N), false, 1);
      return out;
    };
    const before = product();
    const outer = gemm.arena.mark();
    try {
      const unpin = gemm.pin([b]);
      expect(product()).toEqual(before); // the copy gives the same product
      b[0]! += 10; // the contract is that pinned arrays do not change; this shows the copy is what is read
      expect(product()).toEqual(before);
      unpin();
      expect(gemm.arena.mark()).toBe(outer); // its memory went back
      const changed = product();
      expect(changed[0]).not.toBe(before[0]);
      b[0]! -= 10;
      // A mark taken before the pin and released while it holds drops it: the array is read again, not stale memory.
      gemm.pin([b]);
      gemm.arena.release(outer);
      b[0]! += 10;
      expect(product()).toEqual(changed);
      b[0]! -= 10;
    } finally {
      gemm.arena.release(outer);
    }
  });

  it("refuses a left operand with neither stride 1, naming the strides", () => {
    const data = new Float32Array(64);
    const a: MatrixView = { data, offset: 0, rows: 4, cols: 4, rowStride: 8, colStride: 2 };
    expect(() => gemm.multiply(new Float32Array(32), a, rowMajor(data, 4, 8), false, 1)).toThrow(/row or column stride of 1 \(got 8 and 2\)/);
  });
});
