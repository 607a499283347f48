import { describe, expect, it } from "vitest";
import { modelShape, parseGPTConfig } from "@/lib/model/config";
import { ropeAndExpand, ropeAndExpandBackward, ropeTable, rmsNormBackward, rmsNormForward, swigluBackward, swigluForward } from "@/lib/model/llama-ops";
import { disableNativeOps } from "@/lib/model/native-ops";
import { loadNativeKernel } from "@/native/kernel";

// The native kernel's elementwise and per-row operations against the engine's own loops, on every instruction
// set this CPU runs, at sizes that are not a multiple of any vector width (so the partial vectors are covered).
const native = await loadNativeKernel();

function random(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return out;
}

function expectClose(actual: Float32Array, expected: Float32Array, relative: number) {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < actual.length; i++) {
    const err = Math.abs(actual[i] - expected[i]) / (Math.abs(expected[i]) + 1e-3);
    if (!(err <= worst)) worst = err;
  }
  expect(worst).toBeLessThan(relative);
}

/** The loops' result: the same function with the native operations switched off. */
function loops<T>(fn: () => T): T {
  disableNativeOps(true);
  try {
    return fn();
  } finally {
    disableNativeOps(false);
  }
}

if (!native.kernel) {
  describe("the native operations", () => it.skip(`skipped: ${native.reason}`, () => {}));
} else {
  const kernel = native.kernel;
  const { simdGemm } = await import("@/lib/model/simd-gemm");
  for (const isa of kernel.supported()) {
    describe(`the native operations on ${isa}`, () => {
      const use = () => {
        simdGemm!.setNative(kernel);
        kernel.setIsa(isa);
      };
      it("SwiGLU forward and backward match the loops, far into both tails of the gate", () => {
        use();
        const N = 5,
          F = 37;
        const fc = random(N * 2 * F, 1, 30);
        const dAct = random(N * F, 2);
        const run = () => {
          const act = new Float32Array(N * F);
          const dFc = new Float32Array(N * 2 * F);
          swigluForward(act, fc, N, F);
          swigluBackward(dFc, dAct, fc, N, F);
          return { act, dFc };
        };
        const got = run();
        const want = loops(run);
        expectClose(got.act, want.act, 1e-5);
        expectClose(got.dFc, want.dFc, 1e-5);
      });
      it("RMSNorm forward and backward match the loops, with and without a gain gradient", () => {
        use();
        const M = 7,
          C = 45;
        const x = random(M * C, 3, 2);
        const gain = random(C, 4);
        const dy = random(M * C, 5);
        const run = (withGain: boolean) => {
          const out = new Float32Array(M * C);
          const rstd = new Float32Array(M);
          rmsNormForward(out, rstd, x, gain, M, C, 1e-5);
          const dx = random(M * C, 6); // accumulated into
          const dGain = withGain ? random(C, 7) : null;
          rmsNormBackward(dx, dGain, dy, x, rstd, gain, M, C);
          return { out, rstd, dx, dGain: dGain ?? new Float32Array(0) };
        };
        for (const withGain of [true, false]) {
          const got = run(withGain);
          const want = loops(() => run(withGain));
          for (const k of ["out", "rstd", "dx", "dGain"] as const) expectClose(got[k], want[k], 1e-5);
        }
      });
      it("AdamW matches float64 arithmetic and zeroes the gradient; the sum of squares matches float64", () => {
        use();
        const n = 1001;
        const w = random(n, 8),
          g = random(n, 9, 0.1),
          m = random(n, 10, 0.01),
          v = random(n, 11, 0.01).map(Math.abs);
        const [b1, b2, lr, eps, decay, clip, bc1, bc2] = [0.9, 0.999, 1e-3, 1e-8, 0.99, 0.5, 0.19, 0.002];
        const want = { w: new Float32Array(w), m: new Float32Array(m), v: new Float32Array(v) };
        const g0 = new Float32Array(g);
        for (let i = 0; i < n; i++) {
          const gi = g0[i] * clip;
          want.m[i] = b1 * m[i] + (1 - b1) * gi;
          want.v[i] = b2 * v[i] + (1 - b2) * gi * gi;
          want.w[i] = w[i] * decay - ((lr / bc1) * want.m[i]) / (Math.sqrt(want.v[i] / bc2) + eps);
        }
        kernel.adamw(w, g, m, v, clip, b1, b2, lr / bc1, 1 / bc2, eps, decay);
        expectClose(w, want.w, 1e-5);
        expectClose(m, want.m, 1e-5);
        expectClose(v, want.v, 1e-5);
        expect(g.every((x) => x === 0)).toBe(true); // zeroed for the next accumulation
        const h = random(n, 16);
        let sq = 0;
        for (const x of h) sq += x * x;
        expect(Math.abs(kernel.sumOfSquares(h) - sq) / sq).toBeLessThan(1e-6);
      });
      it("a softmax row gives the log-sum-exp, entropy and probabilities of float64 arithmetic, at any temperature", () => {
        use();
        const n = 8195;
        const z = random(n + 3, 12, 20);
        for (const tau of [1, 0.3, 2]) {
          const probs = new Float32Array(n);
          const stats = new Float64Array(2);
          kernel.softmaxRow(z, 3, n, 1 / tau, probs, stats);
          let max = -Infinity;
          for (let j = 0; j < n; j++) max = Math.max(max, z[3 + j] / tau);
          let sum = 0;
          for (let j = 0; j < n; j++) sum += Math.exp(z[3 + j] / tau - max);
          const lse = max + Math.log(sum);
          let entropy = 0;
          const want = new Float32Array(n);
          for (let j = 0; j < n; j++) {
            want[j] = Math.exp(z[3 + j] / tau - lse);
            entropy -= want[j] * (z[3 + j] / tau - lse);
          }
          expect(stats[0]).toBeCloseTo(lse, 4);
          expect(stats[1]).toBeCloseTo(entropy, 4);
          expectClose(probs, want, 1e-5);
          // the gradient row: -scale p + ent p (z/τ - lse + H), then +scale at the target
          // the batched rows: the same statistics, and the gradient row -scale p + ent p (z/τ - lse + H), +scale at the target
          const rowsZ = new Float32Array(2 * n);
          rowsZ.set(z.subarray(3, 3 + n), n); // row 1 of two
          const rowStats = new Float64Array(2);
          kernel.softmaxStatsRows(rowsZ, n, 1 / tau, Int32Array.of(1), rowStats);
          expect(rowStats[0]).toBeCloseTo(lse, 4);
          expect(rowStats[1]).toBeCloseTo(entropy, 4);
          const d = new Float32Array(2 * n);
          kernel.lossGradientRows(d, rowsZ, n, 1 / tau, Int32Array.of(1), Int32Array.of(17), Float32Array.of(0.5), Float32Array.of(0.01), rowStats);
          const wantD = new Float32Array(2 * n);
          for (let j = 0; j < n; j++) wantD[n + j] = -0.5 * want[j] + 0.01 * want[j] * (z[3 + j] / tau - lse + entropy);
          wantD[n + 17] += 0.5;
          expectClose(d, wantD, 1e-4);
        }
      });
      it("rotary positions and shared key/value heads match the loops, forward and backward", () => {
        use();
        const config = parseGPTConfig({ architecture: "llama", vocabSize: 16, contextLength: 40, dModel: 48, nLayers: 1, nHeads: 6, nKvHeads: 2, dFF: 32 });
        const shape = modelShape(config);
        const table = ropeTable(config, shape);
        const N = 9,
          C = 48,
          H = 6;
        const rawWidth = C + 2 * shape.kvDim;
        const raw = random(N * rawWidth, 13);
        const dQkv = random(N * 3 * C, 14);
        const position = (n: number) => (n * 7) % 40;
        const run = () => {
          const qkv = new Float32Array(N * 3 * C);
          ropeAndExpand(qkv, raw, N, position, C, H, shape, table);
          const dRaw = random(N * rawWidth, 15); // accumulated into
          ropeAndExpandBackward(dRaw, dQkv, N, position, C, H, shape, table);
          return { qkv, dRaw };
        };
        const got = run();
        const want = loops(run);
        expectClose(got.qkv, want.qkv, 1e-6);
        expectClose(got.dRaw, want.dRaw, 1e-5);
        expect(() => kernel.ropeAndExpand(new Float32Array(3 * C), new Float32Array(rawWidth), Int32Array.of(40), 1, H, 2, 8, table.cos, table.sin)).toThrow(
          /cos or sin holds 160 floats, fewer than the 164 needed/,
        );
      });
      it("gives a logit masked to -inf probability 0 and no NaN in the entropy or the gradient", () => {
        use();
        const z = Float32Array.from([1, -Infinity, 0.5, -Infinity, 2, -100, 3]);
        const probs = new Float32Array(7);
        const stats = new Float64Array(2);
        kernel.softmaxRow(z, 0, 7, 1, probs, stats);
        expect(probs[1]).toBe(0);
        expect(probs[3]).toBe(0);
        expect(Number.isFinite(stats[0]) && Number.isFinite(stats[1])).toBe(true);
        const d = new Float32Array(7);
        kernel.lossGradientRows(d, z, 7, 1, Int32Array.of(0), Int32Array.of(4), Float32Array.of(0.5), Float32Array.of(0.01), stats);
        expect(d.every(Number.isFinite)).toBe(true);
        expect(d[1]).toBe(0);
        expect(() => kernel.lossGradientRows(d, z, 7, 1, Int32Array.of(1), Int32Array.of(4), Float32Array.of(0.5), Float32Array.of(0), stats)).toThrow(
          /row 1 is outside 0..0/,
        );
      });
      it("the causal softmax and its gradient match the WebAssembly versions", () => {
        use();
        const T = 36, // the WebAssembly versions take widths a multiple of 4; the native ones any
          blocks = 3;
        const scores = simdGemm!.arena.alloc(blocks * T * T);
        scores.set(random(blocks * T * T, 18, 6));
        const dAtt = simdGemm!.arena.alloc(blocks * T * T);
        dAtt.set(random(blocks * T * T, 19));
        const wasmAtt = simdGemm!.arena.alloc(scores.length);
        wasmAtt.set(scores);
        const wasmD = simdGemm!.arena.alloc(dAtt.length);
        wasmD.set(dAtt);
        kernel.causalSoftmax(scores, blocks, T);
        expect(simdGemm!.ops.causalSoftmax(wasmAtt, blocks, T)).toBe(true);
        expectClose(scores, wasmAtt, 1e-5);
        kernel.softmaxBackward(dAtt, scores, blocks * T, T, 0.125);
        expect(simdGemm!.ops.softmaxBackward(wasmD, wasmAtt, blocks * T, T, 0.125)).toBe(true);
        expectClose(dAtt, wasmD, 1e-4);
        expect(scores[5]).toBe(0); // row 0 keeps column 0 only
      });
      it("transposes a matrix of any shape", () => {
        use();
        const a = random(37 * 70, 17);
        const out = new Float32Array(37 * 70);
        kernel.transpose(out, a, 37, 70);
        for (let i = 0; i < 37; i++) for (let j = 0; j < 70; j++) expect(out[j * 37 + i]).toBe(a[i * 70 + j]);
        expect(() => kernel.transpose(new Float32Array(10), a, 37, 70)).toThrow(/out holds 10 floats/);
      });
      it("refuses arrays too short for the sizes given, saying which and by how much", () => {
        use();
        expect(() => kernel.swigluForward(new Float32Array(10), new Float32Array(10), 2, 5)).toThrow(/fc holds 10 floats, fewer than the 20 needed/);
        expect(() => kernel.softmaxRow(new Float32Array(4), 2, 4, 1, null, new Float64Array(2))).toThrow(/z holds 4 floats, fewer than the 6/);
        expect(() => kernel.adamw(new Float32Array(4), new Float32Array(3), new Float32Array(4), new Float32Array(4), 1, 0.9, 0.99, 1, 1, 1e-8, 1)).toThrow(
          /grad holds 3 floats/,
        );
        expect(() =>
          kernel.rmsNormForward(new Float32Array(4), new Float32Array(1), new Float32Array(4), [1, 2] as unknown as Float32Array, 1, 4, 1e-5),
        ).toThrow(/argument 3 must be a Float32Array/);
      });
    });
  }
}

describe.skipIf(!native.kernel)("the native operations on two threads", () => {
  it("give results identical to the bit to one thread's, for every operation", () => {
    const kernel = native.kernel!;
    const N = 96,
      F = 1376,
      C = 512,
      H = 8,
      kv = 4,
      hd = 64;
    const fc = random(N * 2 * F, 21, 4);
    const dAct = random(N * F, 22);
    const x = random(N * C, 23);
    const gain = random(C, 24);
    const dy = random(N * C, 25);
    const raw = random(N * (H + 2 * kv) * hd, 26);
    const dQkv = random(N * 3 * H * hd, 27);
    const positions = Int32Array.from({ length: N }, (_, n) => n % 64);
    const cos = random(64 * (hd / 2), 28);
    const sin = random(64 * (hd / 2), 29);
    const run = () => {
      const act = new Float32Array(N * F);
      kernel.swigluForward(act, fc, N, F);
      const dFc = new Float32Array(N * 2 * F);
      kernel.swigluBackward(dFc, dAct, fc, N, F);
      const out = new Float32Array(N * C);
      const rstd = new Float32Array(N);
      kernel.rmsNormForward(out, rstd, x, gain, N, C, 1e-5);
      const dx = random(N * C, 30);
      const dGain = random(C, 31);
      kernel.rmsNormBackward(dx, dGain, dy, x, rstd, gain, N, C);
      const qkv = new Float32Array(N * 3 * H * hd);
      kernel.ropeAndExpand(qkv, raw, positions, N, H, kv, hd, cos, sin);
      const dRaw = random(raw.length, 32);
      kernel.ropeAndExpandBackward(dRaw, dQkv, positions, N, H, kv, hd, cos, sin);
      const w = random(300_001, 33),
        g = random(300_001, 34),
        m = random(300_001, 35),
        v = random(300_001, 36).map(Math.abs);
      const norm = kernel.sumOfSquares(g);
      kernel.adamw(w, g, m, v, 0.5, 0.9, 0.999, 1e-3, 2, 1e-8, 0.99);
      const t = new Float32Array(N * C);
      kernel.transpose(t, x, N, C);
      const att = random(8 * 64 * 64, 37, 4);
      kernel.causalSoftmax(att, 8, 64);
      const dAtt = random(att.length, 38);
      kernel.softmaxBackward(dAtt, att, 8 * 64, 64, 0.125);
      const logits = random(200 * 1000, 39, 5);
      const rowList = Int32Array.from({ length: 150 }, (_, k) => (k * 7) % 200);
      const rowStats = new Float64Array(300);
      kernel.softmaxStatsRows(logits, 1000, 1.25, rowList, rowStats);
      const dLogits = new Float32Array(logits.length);
      const targets = Int32Array.from(rowList, (r) => r % 1000);
      kernel.lossGradientRows(dLogits, logits, 1000, 1.25, rowList, targets, random(150, 40), random(150, 41, 0.01), rowStats);
      return {
        rowStats,
        dLogits,
        att,
        dAtt,
        act,
        dFc,
        out,
        rstd,
        dx,
        dGain,
        qkv,
        dRaw,
        w,
        m,
        v,
        norm: Float64Array.of(norm),
        t,
      };
    };
    kernel.setThreads(1);
    const one = run();
    kernel.setThreads(2);
    try {
      // with a free core the helper takes some ranges; on a busy machine the caller may take them all (and a helper
      // that keeps losing its core is left out for 200 jobs), so several rounds give it the chance
      const before = kernel.helperPieces();
      let two = run();
      for (let i = 0; i < 40 && kernel.helperPieces() === before; i++) two = run();
      expect(kernel.helperPieces()).toBeGreaterThan(before);
      for (const [name, array] of Object.entries(one)) {
        expect(Buffer.from(two[name as keyof typeof two].buffer).equals(Buffer.from(array.buffer)), name).toBe(true);
      }
    } finally {
      kernel.setThreads(1);
    }
  });
});
