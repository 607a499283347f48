/**
 * A helper thread for the SIMD matrix multiply: it instantiates the same kernel on the same shared
 * WebAssembly memory and computes the lower half of the rows of each large product while the calling thread
 * computes the upper half. Calls stay synchronous (the caller blocks in Atomics.wait for the helper), so the
 * engine's interface does not change, and each element is computed by one thread exactly as before, so results
 * are bit-identical with and without the helper.
 */
import { Worker } from "node:worker_threads";
import { type GemmArgs, kBlock, simdGemm } from "@/lib/model/simd-gemm";

// The helper is plain JavaScript (no TypeScript loader needed in the worker). Control block, in int32 slots:
// [0] state (0 idle, 1 job posted, 2 stop), [1..11] the kernel's integer arguments, [12] the scale as float32.
const helperSource = `
const { workerData } = require("node:worker_threads");
const { module, memory, control, kBlock } = workerData;
const gemm = new WebAssembly.Instance(module, { env: { memory } }).exports.gemm;
const ints = new Int32Array(control);
const floats = new Float32Array(control);
for (;;) {
  Atomics.wait(ints, 0, 0);
  const state = Atomics.load(ints, 0);
  if (state === 2) break;
  if (state !== 1) continue;
  const [a, b, c, M, K, N, ars, acs, brs, crs, acc] = ints.subarray(1, 12);
  // the same blocking of the inner dimension as the calling thread (simd-gemm.ts, runBlocked)
  for (let k0 = 0; k0 < K; k0 += kBlock) {
    gemm(a + k0 * acs * 4, b + k0 * brs * 4, c, M, Math.min(kBlock, K - k0), N, ars, acs, brs, crs, k0 > 0 ? 1 : acc, floats[12]);
  }
  Atomics.store(ints, 0, 0);
  Atomics.notify(ints, 0);
}
`;

let running: { worker: Worker; ints: Int32Array } | null = null;

/** Starts the helper thread (once); false when the kernel has no shared memory to work on. */
export function startGemmHelper(): boolean {
  if (running) return true;
  const sharing = simdGemm?.sharing;
  if (!simdGemm || !sharing) return false;
  const control = new SharedArrayBuffer(16 * 4);
  const ints = new Int32Array(control);
  const floats = new Float32Array(control);
  const worker = new Worker(helperSource, { eval: true, workerData: { module: sharing.module, memory: sharing.memory, control, kBlock } });
  worker.unref(); // an idle helper must not keep the process alive
  running = { worker, ints };
  simdGemm.setHelper({
    start(args: GemmArgs) {
      for (let i = 0; i < 11; i++) ints[i + 1] = args[i];
      floats[12] = args[11];
      Atomics.store(ints, 0, 1);
      Atomics.notify(ints, 0);
    },
    finish() {
      // A short spin first: most halves finish within microseconds of ours, and waking from wait costs more.
      for (let spin = 0; spin < 2000 && Atomics.load(ints, 0) === 1; spin++);
      while (Atomics.load(ints, 0) === 1) Atomics.wait(ints, 0, 1);
    },
  });
  return true;
}

export async function stopGemmHelper(): Promise<void> {
  if (!running) return;
  const { worker, ints } = running;
  running = null;
  simdGemm?.setHelper(null);
  Atomics.store(ints, 0, 2);
  Atomics.notify(ints, 0);
  await worker.terminate();
}

export function gemmHelperRunning(): boolean {
  return running !== null;
}
