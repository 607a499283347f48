/**
 * This machine's fused multiply-add peak, and the GFLOP/s of the matrix kernels on the products of one `small`
 * training step (bench:train's config: 2048 tokens of width 128, MLP width 512, vocabulary 128, heads of 32 over 64
 * positions) with each one's share of that peak.
 *
 *   npx tsx native/bench.ts [--rounds 8]
 *
 * The peak (bench/lib/fma-peak.ts) of each instruction set the native kernel runs here, on one thread (timed by
 * the thread's CPU time) and on every core at once (wall clock, and per CPU-second); best of --rounds runs of
 * 200 ms. The kernels: each in turn in this process, timed by its CPU time (best of --rounds), on
 * one thread; each one's share is of the one-thread peak of the widest vectors this CPU runs, the most one core can
 * do. The header names the CPU, its cores and the load average before and after; the last line is JSON.
 */
import os from "node:os";
import { fmaPeak } from "@/bench/lib/fma-peak";
import { formatTable } from "@/bench/lib/measure";
import { Rng } from "@/lib/model/rng";
import { type MatrixView, rowMajor, simdGemm, transposed } from "@/lib/model/simd-gemm";
import { loadNativeKernel, type NativeIsa } from "./kernel";

const roundsArg = process.argv.indexOf("--rounds");
const rounds = roundsArg >= 0 ? Number(process.argv[roundsArg + 1]) : 8;
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds takes a whole number of at least 1");
if (!simdGemm?.sharing) throw new Error("the WebAssembly kernel with shared memory is needed to compare against");
const gemm = simdGemm;
const native = await loadNativeKernel();
if (!native.kernel) console.error(`native kernel unavailable: ${native.reason}`);
const cores = os.availableParallelism();
const loadBefore = os.loadavg()[0]!;

// ---- the FMA peak ----

const peaks: { isa: NativeIsa; oneThread: number; allThreads: { cpu: number; wall: number } }[] = [];
if (native.kernel) {
  for (const isa of native.kernel.supported()) {
    try {
      peaks.push({ isa, oneThread: fmaPeak(isa, 1, rounds).cpu, allThreads: fmaPeak(isa, cores, rounds) });
    } catch (error) {
      console.error(`the FMA peak of ${isa} was not measured: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
    }
  }
}
/** What one core can do at most: the one-thread peak of the widest vectors (supported() lists them widest first). */
const machinePeak = peaks[0] ?? null;

// ---- the kernels on one training step's products ----

const tokens = 2048,
  C = 128,
  V = 128,
  T = 64,
  hd = 32;
type Product = { name: string; a: MatrixView; b: MatrixView; accumulate: boolean };
const rng = new Rng(3);
const matrix = (rows: number, cols: number) => {
  const data = gemm.arena.alloc(rows * cols);
  for (let i = 0; i < data.length; i++) data[i] = rng.normal();
  return data;
};
const x = (cols: number) => matrix(tokens, cols);
// weights stay ordinary arrays, as the engine keeps them (copied into the memory per product)
const weight = (rows: number, cols: number) => Float32Array.from(matrix(rows, cols));
const products: Product[] = [];
for (const [nIn, nOut, what] of [
  [C, 3 * C, "qkv"],
  [C, 4 * C, "mlp fc"],
  [4 * C, C, "mlp proj"],
  [C, V, "lm head"],
] as const) {
  products.push({
    name: `X·W ${what} [${tokens}x${nIn}]·[${nIn}x${nOut}]`,
    a: rowMajor(x(nIn), tokens, nIn),
    b: rowMajor(weight(nIn, nOut), nIn, nOut),
    accumulate: false,
  });
  products.push({ name: `dY·Wᵀ ${what}`, a: rowMajor(x(nOut), tokens, nOut), b: transposed(weight(nIn, nOut), nIn, nOut), accumulate: false });
  products.push({ name: `Xᵀ·dY ${what}`, a: transposed(x(nIn), tokens, nIn), b: rowMajor(x(nOut), tokens, nOut), accumulate: true });
}
products.push({ name: `attention Q·Kᵀ [${T}x${hd}]·[${hd}x${T}]`, a: rowMajor(matrix(T, hd), T, hd), b: transposed(matrix(T, hd), T, hd), accumulate: false });
products.push({ name: `attention P·V [${T}x${T}]·[${T}x${hd}]`, a: rowMajor(matrix(T, T), T, T), b: rowMajor(matrix(T, hd), T, hd), accumulate: false });

function gflops(p: Product): number {
  const out = gemm.arena.alloc(p.a.rows * p.b.cols);
  const flops = 2 * p.a.rows * p.a.cols * p.b.cols;
  const repeats = Math.max(1, Math.round(2e8 / flops));
  for (let i = 0; i < repeats; i++) gemm.multiply(out, p.a, p.b, p.accumulate, 1);
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < repeats; i++) gemm.multiply(out, p.a, p.b, p.accumulate, 1);
    const { user, system } = process.cpuUsage(start);
    best = Math.min(best, (user + system) / 1e6 / repeats);
  }
  return flops / best / 1e9;
}

const kernels: { name: string; set: () => void }[] = [{ name: "wasm-simd", set: () => gemm.setNative(null) }];
if (native.kernel) {
  const kernel = native.kernel;
  for (const isa of kernel.supported()) kernels.push({ name: `native-${isa}`, set: () => (gemm.setNative(kernel), kernel.setIsa(isa)) });
}
const measured = products.map((p) => ({ name: p.name, gflops: kernels.map((k) => (k.set(), gflops(p))) }));
const loadAfter = os.loadavg()[0]!;

const share = (x: number) => (machinePeak ? ` (${((100 * x) / machinePeak.oneThread).toFixed(0)}%)` : "");
console.log(`${os.cpus()[0]?.model ?? "unknown CPU"}, ${cores} cores; load average (1 min) ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after`);
if (peaks.length > 0) {
  console.log(
    formatTable(
      ["FMA peak (GFLOP/s)", "1 thread, CPU time", `${cores} threads, wall clock`, `${cores} threads, per CPU-second`],
      peaks.map((p) => [
        `${p.isa} (${p.isa === "avx512" ? 512 : 256}-bit vectors)`,
        p.oneThread.toFixed(1),
        p.allThreads.wall.toFixed(1),
        p.allThreads.cpu.toFixed(1),
      ]),
    ),
  );
}
const shareNote = machinePeak ? `, share of the ${machinePeak.isa} 1-thread peak` : "";
console.log(
  formatTable(
    [`product (GFLOP/s, CPU time, 1 thread${shareNote})`, ...kernels.map((k) => k.name)],
    measured.map((m) => [m.name, ...m.gflops.map((g) => `${g.toFixed(1)}${share(g)}`)]),
  ),
);
const round1 = (x: number) => Number(x.toFixed(1));
console.log(
  JSON.stringify({
    cpu: os.cpus()[0]?.model ?? null,
    cores,
    load_avg_1m: [round1(loadBefore), round1(loadAfter)],
    fma_peak_gflops: Object.fromEntries(
      peaks.map((p) => [
        p.isa,
        { one_thread: round1(p.oneThread), all_threads_wall: round1(p.allThreads.wall), all_threads_per_cpu_s: round1(p.allThreads.cpu) },
      ]),
    ),
    kernels: Object.fromEntries(
      kernels.map((k, i) => {
        const all = measured.map((m) => m.gflops[i]!);
        const best = Math.max(...all);
        return [
          k.name,
          { gflops_min: round1(Math.min(...all)), gflops_max: round1(best), peak_share_max: machinePeak ? round1(best / machinePeak.oneThread) : null },
        ];
      }),
    ),
  }),
);
