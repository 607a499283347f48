import { afterEach, describe, expect, it } from "vitest";
import { add, columnSumAccumulate, geluBackward, geluForward, layerNormBackward, layerNormForward, setSimdMode } from "@/lib/model/kernels";
import { Rng } from "@/lib/model/rng";
import { simdGemm } from "@/lib/model/simd-gemm";

// Each SIMD operation against the plain loop it replaces (setSimdMode("never")), on arrays in the kernel's
// memory, with the SIMD path checked to have run (the op returns true).
describe.skipIf(!simdGemm?.sharing)("the WebAssembly SIMD elementwise operations", () => {
  const { ops, arena } = simdGemm!;
  const rng = new Rng(3);
  const inArena = (n: number, scale = 1) => {
    const a = arena.alloc(n);
    for (let i = 0; i < n; i++) a[i] = rng.normal() * scale;
    return a;
  };
  const copy = (a: Float32Array) => Float32Array.from(a);
  const expectClose = (actual: Float32Array, expected: Float32Array, tolerance: number, what: string) => {
    expect(actual.length).toBe(expected.length);
    for (let i = 0; i < actual.length; i++) {
      expect(Math.abs(actual[i] - expected[i]), `${what}[${i}]: ${actual[i]} vs ${expected[i]}`).toBeLessThan(tolerance * (1 + Math.abs(expected[i])));
    }
  };
  const plain = <T>(fn: () => T): T => {
    setSimdMode("never");
    try {
      return fn();
    } finally {
      setSimdMode("auto");
    }
  };
  let mark = 0;
  afterEach(() => arena.release(mark));

  it("gelu and its gradient match the plain loops, far into both tails", () => {
    mark = arena.mark();
    const n = 4096;
    const x = inArena(n, 4); // |x| up to ~15: both the rational part and the clamp of tanh are exercised
    const out = arena.alloc(n),
      tanh = arena.alloc(n);
    expect(ops.gelu(out, x, n, tanh)).toBe(true);
    const refOut = new Float32Array(n),
      refTanh = new Float32Array(n);
    plain(() => geluForward(refOut, copy(x), n, refTanh));
    expectClose(out, refOut, 1e-6, "gelu");
    expectClose(tanh, refTanh, 1e-6, "tanh");
    for (let i = 0; i < n; i++) expect(Math.abs(tanh[i] - Math.tanh(Math.sqrt(2 / Math.PI) * (x[i] + 0.044715 * x[i] ** 3)))).toBeLessThan(1e-6);
    const dy = inArena(n),
      dx = arena.alloc(n);
    expect(ops.geluBackward(dx, dy, x, tanh, n)).toBe(true);
    const refDx = new Float32Array(n);
    plain(() => geluBackward(refDx, copy(dy), copy(x), copy(tanh), n));
    expectClose(dx, refDx, 1e-6, "dx");
  });

  it("column sums and sums match the plain loops, into arrays outside the kernel's memory too", () => {
    mark = arena.mark();
    const M = 37,
      N = 48;
    const dy = inArena(M * N);
    const out = Float32Array.from({ length: N }, () => rng.normal()); // a JS array, like a bias gradient
    const ref = copy(out);
    expect(ops.columnSum(out, dy, M, N)).toBe(true);
    plain(() => columnSumAccumulate(ref, copy(dy), M, N));
    expectClose(out, ref, 1e-6, "column sum");
    const a = inArena(100),
      b = inArena(100),
      sum = arena.alloc(100);
    expect(ops.add(sum, a, b, 100)).toBe(true);
    expectClose(
      sum,
      Float32Array.from(a, (v, i) => v + b[i]),
      1e-7,
      "sum",
    );
    // widths the kernels do not take are refused, and the caller's plain loop runs instead
    expect(ops.columnSum(out, dy, M * 2, N / 2)).toBe(false);
    expect(ops.add(sum, a, b, 99)).toBe(false);
    add(sum, a, b, 99);
    expect(sum[98]).toBe(Math.fround(a[98] + b[98]));
  });

  it("the causal softmax and its gradient match float64, with scores far apart and masked lanes", () => {
    mark = arena.mark();
    const blocks = 3,
      T = 12; // rows end inside a vector of four: lanes past the diagonal must be masked
    const n = blocks * T * T;
    const scores = inArena(n, 20); // differences of ±60 and more: exp's range reduction and clamp are exercised
    const att = arena.alloc(n);
    att.set(scores);
    expect(ops.causalSoftmax(att, blocks, T)).toBe(true);
    const expected = new Float64Array(n);
    for (let r = 0; r < blocks * T; r++) {
      const i = r % T,
        row = r * T;
      const max = Math.max(...scores.subarray(row, row + i + 1));
      let sum = 0;
      for (let j = 0; j <= i; j++) sum += Math.exp(scores[row + j] - max);
      for (let j = 0; j <= i; j++) expected[row + j] = Math.exp(scores[row + j] - max) / sum;
    }
    for (let k = 0; k < n; k++) expect(Math.abs(att[k] - expected[k]), `att[${k}]`).toBeLessThan(1e-6);
    for (let r = 0; r < blocks * T; r++) for (let j = (r % T) + 1; j < T; j++) expect(att[r * T + j]).toBe(0);

    const dAtt = inArena(n),
      scale = 0.25;
    const refD = Float64Array.from(dAtt);
    expect(ops.softmaxBackward(dAtt, att, blocks * T, T, scale)).toBe(true);
    for (let r = 0; r < blocks * T; r++) {
      const row = r * T;
      let dot = 0;
      for (let j = 0; j < T; j++) dot += att[row + j] * refD[row + j];
      for (let j = 0; j < T; j++) refD[row + j] = att[row + j] * (refD[row + j] - dot) * scale;
    }
    for (let k = 0; k < n; k++) expect(Math.abs(dAtt[k] - refD[k]), `dAtt[${k}]`).toBeLessThan(1e-5);
    expect(ops.causalSoftmax(att, 1, 6)).toBe(false); // rows not a multiple of 4 wide: the caller's loop runs
  });

  it("LayerNorm and its gradient match the plain loops", () => {
    mark = arena.mark();
    const M = 19,
      C = 24;
    const x = inArena(M * C, 3);
    for (let i = 0; i < M * C; i++) x[i] += 2; // a mean away from zero
    for (let c = 0; c < C; c++) x[c] = 2 + 1e-3 * rng.normal(); // a row whose variance is below eps
    const gain = Float32Array.from({ length: C }, () => 1 + 0.3 * rng.normal());
    const bias = Float32Array.from({ length: C }, () => rng.normal());
    const out = arena.alloc(M * C),
      mean = arena.alloc(M),
      rstd = arena.alloc(M);
    expect(ops.layerNorm(out, mean, rstd, x, gain, bias, M, C)).toBe(true);
    const ref = { out: new Float32Array(M * C), mean: new Float32Array(M), rstd: new Float32Array(M) };
    plain(() => layerNormForward(ref.out, ref.mean, ref.rstd, copy(x), gain, bias, M, C));
    // float32 sums against the plain loop's float64 ones: the low-variance row loses a few more digits
    expectClose(out, ref.out, 1e-4, "out");
    expectClose(mean, ref.mean, 1e-6, "mean");
    expectClose(rstd, ref.rstd, 1e-5, "rstd");

    const dy = inArena(M * C),
      dx = inArena(M * C);
    const dGain = Float32Array.from({ length: C }, () => rng.normal()),
      dBias = Float32Array.from({ length: C }, () => rng.normal());
    const dx0 = copy(dx);
    const refD = { dx: copy(dx), dGain: copy(dGain), dBias: copy(dBias) };
    expect(ops.layerNormBackward(dx, dGain, dBias, dy, x, mean, rstd, gain, M, C)).toBe(true);
    plain(() => layerNormBackward(refD.dx, refD.dGain, refD.dBias, copy(dy), copy(x), copy(mean), copy(rstd), gain, M, C));
    expectClose(dx, refD.dx, 1e-4, "dx");
    expectClose(dGain, refD.dGain, 1e-4, "dGain");
    expectClose(dBias, refD.dBias, 1e-4, "dBias");
    // without parameter gradients (a frozen LayerNorm), dx alone
    const dx2 = arena.alloc(M * C);
    expect(ops.layerNormBackward(dx2, null, null, dy, x, mean, rstd, gain, M, C)).toBe(true);
    expectClose(
      dx2,
      Float32Array.from(refD.dx, (v, i) => v - dx0[i]),
      1e-4,
      "dx alone",
    );
  });
});
