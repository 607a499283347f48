import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";
import { type MatrixView, rowMajor, simdGemm, transposed } from "@/lib/model/simd-gemm";
import { loadNativeKernel } from "@/native/kernel";

// Built here on first use (a few seconds); on a machine that cannot build it (no g++, no Node headers, not
// x86-64) these tests are skipped, and the reason is in the suite's name.
const native = await loadNativeKernel();
const skipReason = native.kernel ? "" : ` (skipped: ${native.reason})`;

afterAll(() => simdGemm?.setNative(null));

describe.skipIf(!native.kernel || !simdGemm?.sharing)(`the native matrix kernel${skipReason}`, () => {
  const kernel = native.kernel!;
  const gemm = simdGemm!;
  const rng = new Rng(11);
  const fill = (data: Float32Array) => {
    for (let i = 0; i < data.length; i++) data[i] = rng.normal();
    return data;
  };
  const at = (v: MatrixView, i: number, j: number) => v.data[v.offset + i * v.rowStride + j * v.colStride];

  // Heights around the 8- and 6-row tiles, widths around the 32- and 16-column tiles and the 256-column block,
  // inner sizes past the 256-row block (K > block: several blocks accumulated), widths not a multiple of 8.
  const shapes: [number, number, number][] = [
    [1, 1, 8],
    [3, 5, 16],
    [7, 9, 40],
    [9, 300, 24],
    [13, 513, 264],
    [33, 257, 19],
    [21, 700, 72],
    [70, 40, 520],
  ];
  it.each(shapes)("agrees with the WebAssembly kernel and float64 for M=%i K=%i N=%i on every instruction set", (M, K, N) => {
    const mark = gemm.arena.mark();
    try {
      for (const isa of kernel.supported()) {
        kernel.setIsa(isa);
        for (const [aLayout, bLayout] of [
          ["rows", "rows"],
          ["columns", "rows"],
          ["rows", "columns"],
        ] as const) {
          for (const inArena of [false, true]) {
            for (const accumulate of [false, true]) {
              const alloc = (n: number) => (inArena ? fill(gemm.arena.alloc(n)) : fill(new Float32Array(n)));
              const aOffset = 3,
                outOffset = 2,
                outRowStride = N + 5;
              const aData = alloc(aOffset + (M + 1) * (K + 1));
              const a = aLayout === "rows" ? rowMajor(aData, M, K, aOffset, K + 1) : transposed(aData, K, M, aOffset, M + 1);
              const b = bLayout === "rows" ? rowMajor(alloc(K * N), K, N) : transposed(alloc(N * (K + 2)), N, K, 0, K + 2);
              const start = alloc(outOffset + M * outRowStride);
              const scale = accumulate ? 0.5 : 1.25;
              const run = (kernelInUse: typeof kernel | null) => {
                gemm.setNative(kernelInUse);
                const out = Float32Array.from(start);
                const target = inArena ? gemm.arena.alloc(out.length) : out;
                target.set(out);
                gemm.multiply(target, a, b, accumulate, scale, outOffset, outRowStride);
                return Float32Array.from(target);
              };
              const wasm = run(null);
              const got = run(kernel);
              // Checked in plain loops with one expect per case: an expect per element costs more than the products.
              const wrong: string[] = [];
              for (let i = 0; i < M; i++) {
                for (let j = 0; j < N; j++) {
                  let exact = 0,
                    magnitude = 0;
                  for (let k = 0; k < K; k++) {
                    exact += at(a, i, k) * at(b, k, j);
                    magnitude += Math.abs(at(a, i, k) * at(b, k, j));
                  }
                  const o = outOffset + i * outRowStride + j;
                  const expected = (accumulate ? start[o] : 0) + scale * exact;
                  // float32 sums err by about K·eps relative to the sum of magnitudes; both kernels alike
                  const tolerance = 1e-6 * (K + 4) * (Math.abs(scale) * magnitude + Math.abs(start[o]));
                  if (!(Math.abs(got[o] - expected) <= tolerance && Math.abs(got[o] - wasm[o]) <= 2 * tolerance)) {
                    wrong.push(`[${i}, ${j}]: ${got[o]}, float64 ${expected}, WebAssembly ${wasm[o]}, tolerance ${tolerance}`);
                  }
                }
              }
              // the padding between rows of the output is left alone
              for (let i = 0; i < M; i++) {
                for (let j = N; j < outRowStride && outOffset + i * outRowStride + j < got.length; j++) {
                  const o = outOffset + i * outRowStride + j;
                  if (!Object.is(got[o], start[o])) wrong.push(`padding [${i}, ${j}]: ${got[o]}, was ${start[o]}`);
                }
              }
              const where = `${isa} A ${aLayout} B ${bLayout} arena=${inArena} accumulate=${accumulate}: ${wrong.length} wrong`;
              expect(wrong.slice(0, 5), where).toEqual([]);
            }
          }
        }
      }
    } finally {
      kernel.setIsa(native.kernel ? native.isa : "avx2");
      gemm.setNative(null);
      gemm.arena.release(mark);
    }
  });

  it("gives the same bits on every instruction set, with one thread or two", () => {
    const mark = gemm.arena.mark();
    try {
      gemm.setNative(kernel);
      // big enough to be cut into pieces between the threads: [512, 300] @ [300, 200]
      const a = rowMajor(fill(gemm.arena.alloc(512 * 300)), 512, 300);
      const b = rowMajor(fill(gemm.arena.alloc(300 * 200)), 300, 200);
      const product = (threads: 1 | 2) => {
        kernel.setThreads(threads);
        const out = gemm.arena.alloc(512 * 200);
        gemm.multiply(out, a, b, false, 1);
        return Buffer.from(Float32Array.from(out).buffer);
      };
      const results = kernel.supported().flatMap((isa) => {
        kernel.setIsa(isa);
        return [product(1), product(2)];
      });
      for (const r of results) expect(r.equals(results[0])).toBe(true);
    } finally {
      kernel.setThreads(1);
      kernel.setIsa(native.kernel ? native.isa : "avx2");
      gemm.setNative(null);
      gemm.arena.release(mark);
    }
  });

  it("refuses calls that reach outside the memory, or that it cannot read", () => {
    // (the engine binds its own memory again whenever it takes the kernel: setNative)
    const heap = new Float32Array(new SharedArrayBuffer(4096));
    const calls = new Int32Array(16);
    kernel.bind(heap, calls);
    // C = A[8, 8] @ B[8, 8] with C (64 floats) starting 50 floats before the end of a 1024-float memory
    calls.set([0, 256, (1024 - 50) * 4, 8, 8, 8, 8, 1, 8, 1, 8, 0]);
    expect(() => kernel.run(1)).toThrow(/call 0: C reaches float 1\d\d\d, past its array of 1024/);
    // An address past 2 GiB (a WebAssembly memory grows to 4 GiB) arrives with the sign bit set: it is read as
    // unsigned, so it is judged by the memory's size, not called negative.
    calls.set([0, 256, 0x80000000 | 0, 8, 8, 8, 8, 1, 8, 1, 8, 0]);
    expect(() => kernel.run(1)).toThrow(/C reaches float 536870\d\d\d, past its array of 1024/);
    calls.set([0, 256, 512, -8, 8, 8, 8, 1, 8, 1, 8, 0]);
    expect(() => kernel.run(1)).toThrow(/argument 3 is negative \(-8\)/);
    calls.set([0, 256, 512, 8, 8, 8, 8, 8, 8, 1, 8, 0]);
    expect(() => kernel.run(1)).toThrow(/A needs a row or column stride of 1/);
    calls.set([0, 256, 512, 8, 8, 8, 8, 1, 8, 8, 8, 0]);
    expect(() => kernel.run(1)).toThrow(/B needs a row or column stride of 1/);
    expect(() => kernel.run(2)).toThrow(/2 calls do not fit the bound call slots/);
    // operands in arrays passed with the calls: each is judged by its own array, and must name one that was passed
    const outside = new Float32Array(40);
    calls.set([0, 256, 0, 8, 8, 8, 8, 1, 8, 1, 8, 0, 0, 0, 0, 1]);
    expect(() => kernel.run(1, [outside])).toThrow(/C reaches float 63, past its array of 40/);
    calls.set([0, 256, 0, 8, 8, 8, 8, 1, 8, 1, 8, 0, 0, 0, 0, 2]);
    expect(() => kernel.run(1, [outside])).toThrow(/operand 2 names array 2; 1 were passed/);
    expect(() => kernel.run(1, [new Float64Array(4) as unknown as Float32Array])).toThrow(/arrays\[0\] is not a Float32Array/);
    expect(() => kernel.setThreads(3 as 1)).toThrow(/expected 1 or 2/);
  });
});

describe("building the native kernel", () => {
  it("reports why it cannot be built instead of failing", async () => {
    const result = await loadNativeKernel({ cacheDir: join(tmpdir(), "tinkerlab-native-no-compiler"), compiler: "no-such-compiler-g++" });
    expect(result.kernel).toBeNull();
    if (!result.kernel) expect(result.reason).toMatch(process.arch === "x64" ? /no C\+\+ compiler: no-such-compiler-g\+\+ is not on PATH|headers/ : /x86-64/);
  });
});

describe.skipIf(!native.kernel || !simdGemm?.sharing)(`a row of a native product${skipReason}`, () => {
  it("is the same to the bit however many rows are multiplied with it, with B as rows or as a transpose", () => {
    const kernel = native.kernel!;
    const gemm = simdGemm!;
    const rng = new Rng(5);
    const mark = gemm.arena.mark();
    try {
      gemm.setNative(kernel);
      const K = 600,
        N = 75;
      const a = gemm.arena.alloc(40 * K);
      for (let i = 0; i < a.length; i++) a[i] = rng.normal();
      const w = gemm.arena.alloc(K * N);
      for (let i = 0; i < w.length; i++) w[i] = rng.normal();
      for (const isa of kernel.supported()) {
        kernel.setIsa(isa);
        for (const b of [rowMajor(w, K, N), transposed(w, N, K)]) {
          const product = (M: number) => {
            const out = gemm.arena.alloc(M * N);
            gemm.multiply(out, rowMajor(a, M, K), b, false, 0.75);
            return Array.from(out.subarray(0, 3 * N));
          };
          // 3 rows: one tile, B read in place; 40 rows: many tiles, B packed
          expect(product(3)).toEqual(product(40));
        }
      }
    } finally {
      gemm.arena.release(mark);
      gemm.setNative(null);
    }
  });
});
