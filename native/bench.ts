/**
 * GFLOP/s of the matrix kernels on the products of one `small` training step (bench:train's config: 2048
 * tokens of width 128, MLP width 512, vocabulary 128, heads of 32 over 64 positions), each kernel in turn in
 * the same process, timed by this process's CPU time (best of several rounds), on one thread.
 *
 *   npx tsx native/bench.ts [--rounds 8]
 */
import { Rng } from "@/lib/model/rng";
import { type MatrixView, rowMajor, simdGemm, transposed } from "@/lib/model/simd-gemm";
import { formatTable } from "@/bench/lib/measure";
import { loadNativeKernel } from "./kernel";

const roundsArg = process.argv.indexOf("--rounds");
const rounds = roundsArg >= 0 ? Number(process.argv[roundsArg + 1]) : 8;
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds takes a whole number of at least 1");
if (!simdGemm?.sharing) throw new Error("the WebAssembly kernel with shared memory is needed to compare against");
const gemm = simdGemm;
const native = await loadNativeKernel();
if (!native.kernel) console.error(`native kernel unavailable: ${native.reason}`);

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
const table = products.map((p) => [p.name, ...kernels.map((k) => (k.set(), gflops(p).toFixed(1)))]);
console.log(formatTable(["product (GFLOP/s, CPU time)", ...kernels.map((k) => k.name)], table));
