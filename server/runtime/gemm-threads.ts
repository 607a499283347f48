/**
 * A helper thread for the SIMD matrix multiply: it instantiates the same kernel on the same shared
 * WebAssembly memory and shares the work of each job with the calling thread. A job is a list of kernel calls
 * (the row pieces of one large product, or the per-head products of attention); both threads take calls from
 * it in turn through one atomic counter until none is left. So when the helper is slow to wake or loses its
 * core to another process, the calling thread simply does more of the calls itself and waits at most for the
 * one call the helper is running, instead of for half the job.
 *
 * When the helper keeps losing its core all the same (waiting for it takes over 15% of the jobs' time), the
 * calling thread runs the next 200 jobs alone, then tries sharing again.
 *
 * Calls stay synchronous (the caller blocks until the job is done), so the engine's interface does not change,
 * and each call runs whole on one thread exactly as it would alone, so results are bit-identical with and
 * without the helper.
 *
 * When the native kernel runs the products (simdGemm.native), the helper is a native thread of the addon
 * instead, sharing pieces of each product the same way (native/src/addon.cc).
 */
import { Worker } from "node:worker_threads";
import { type GemmArgs, type NativeGemm, kBlock, simdGemm } from "@/lib/model/simd-gemm";

// Control block, in int32 slots: JOB (job number, bumped to wake the helper), NEXT (job number << 16 | index
// of the next call to take), COUNT (calls in the job), DONE (calls finished), STOP, HELPED (calls the helper
// has run, ever); then the calls, 13 slots each (GemmArgs): 12 integer arguments and the scale as float32.
const [JOB, NEXT, COUNT, DONE, STOP, HELPED] = [0, 1, 2, 3, 4, 5];
const callsAt = 8;
const slotsPerCall = 13;
/** calls per job; longer lists are run as several jobs */
const maxCalls = 4096;
/**
 * When waiting for the helper takes more than this share of the jobs' time (the helper keeps losing its core
 * to other processes), the next `aloneJobs` jobs run on the calling thread alone, then sharing is tried again.
 */
const starvedShare = 0.15;
const aloneJobs = 200;

// The helper is plain JavaScript (no TypeScript loader needed in the worker).
const helperSource = `
const { workerData } = require("node:worker_threads");
const { module, memory, control, kBlock, slots } = workerData;
const gemm = new WebAssembly.Instance(module, { env: { memory } }).exports.gemm;
const ints = new Int32Array(control);
const floats = new Float32Array(control);
let last = 0;
for (;;) {
  Atomics.wait(ints, ${JOB}, last);
  if (Atomics.load(ints, ${STOP})) break;
  const job = Atomics.load(ints, ${JOB});
  last = job;
  const count = Atomics.load(ints, ${COUNT});
  for (;;) {
    const word = Atomics.load(ints, ${NEXT});
    // a job that is over (or a newer one, whose count was not read) is left alone
    if (word >>> 16 !== job || (word & 0xffff) >= count) break;
    if (Atomics.compareExchange(ints, ${NEXT}, word, word + 1) !== word) continue;
    const at = ${callsAt} + (word & 0xffff) * slots;
    // B's column stride (slot 9) is 1 for the WebAssembly kernel
    const [a, b, c, M, K, N, ars, acs, brs, , crs, acc] = ints.subarray(at, at + 12);
    // the same blocking of the inner dimension as the calling thread (simd-gemm.ts, runBlocked)
    for (let k0 = 0; k0 < K; k0 += kBlock) {
      gemm(a + k0 * acs * 4, b + k0 * brs * 4, c, M, Math.min(kBlock, K - k0), N, ars, acs, brs, crs, k0 > 0 ? 1 : acc, floats[at + 12]);
    }
    Atomics.add(ints, ${HELPED}, 1);
    Atomics.add(ints, ${DONE}, 1);
    Atomics.notify(ints, ${DONE});
  }
}
`;

let running: { worker: Worker; ints: Int32Array } | { native: NativeGemm } | null = null;

/**
 * Starts the helper thread (once): a native one when the native kernel is in use, else a worker running the
 * WebAssembly kernel. False when the kernel has no shared memory to work on.
 */
export function startGemmHelper(): boolean {
  if (running) return true;
  const native = simdGemm?.native;
  if (native) {
    native.setThreads(2);
    running = { native };
    return true;
  }
  const sharing = simdGemm?.sharing;
  if (!simdGemm || !sharing) return false;
  const control = new SharedArrayBuffer((callsAt + maxCalls * slotsPerCall) * 4);
  const ints = new Int32Array(control);
  const floats = new Float32Array(control);
  const worker = new Worker(helperSource, {
    eval: true,
    workerData: { module: sharing.module, memory: sharing.memory, control, kBlock, slots: slotsPerCall },
  });
  worker.unref(); // an idle helper must not keep the process alive
  running = { worker, ints };
  let job = 0;
  // How much of recent jobs' time this thread spent waiting for the helper (a moving average), and how many
  // more jobs to run alone after that share grew too large (the helper is then starved of a core).
  let waitShare = 0;
  let alone = 0;

  function runJob(calls: GemmArgs[], runHere: (args: GemmArgs) => void) {
    if (alone > 0) {
      alone--;
      for (const args of calls) runHere(args);
      return;
    }
    const start = performance.now();
    calls.forEach((args, i) => {
      const at = callsAt + i * slotsPerCall;
      for (let s = 0; s < 12; s++) ints[at + s] = args[s] as number;
      floats[at + 12] = args[12];
    });
    job = (job + 1) & 0x7fff;
    Atomics.store(ints, DONE, 0);
    Atomics.store(ints, COUNT, calls.length);
    Atomics.store(ints, NEXT, job << 16);
    Atomics.store(ints, JOB, job);
    Atomics.notify(ints, JOB);
    for (;;) {
      const word = Atomics.load(ints, NEXT);
      const i = word & 0xffff;
      if (i >= calls.length) break;
      if (Atomics.compareExchange(ints, NEXT, word, word + 1) !== word) continue;
      runHere(calls[i]);
      Atomics.add(ints, DONE, 1);
    }
    // Only calls the helper has taken remain; it is running them. A short spin first: waking from wait costs more.
    const waitFrom = performance.now();
    for (let spin = 0; spin < 2000 && Atomics.load(ints, DONE) < calls.length; spin++);
    for (let done = Atomics.load(ints, DONE); done < calls.length; done = Atomics.load(ints, DONE)) Atomics.wait(ints, DONE, done);
    const end = performance.now();
    waitShare = 0.9 * waitShare + 0.1 * ((end - waitFrom) / Math.max(end - start, 1e-3));
    if (waitShare > starvedShare) {
      alone = aloneJobs;
      waitShare = 0;
    }
  }

  simdGemm.setHelper({
    runAll(calls, runHere) {
      for (let i = 0; i < calls.length; i += maxCalls) runJob(calls.slice(i, i + maxCalls), runHere);
    },
  });
  return true;
}

export async function stopGemmHelper(): Promise<void> {
  if (!running) return;
  if ("native" in running) {
    running.native.setThreads(1);
    running = null;
    return;
  }
  const { worker, ints } = running;
  running = null;
  simdGemm?.setHelper(null);
  Atomics.store(ints, STOP, 1);
  Atomics.add(ints, JOB, 1);
  Atomics.notify(ints, JOB);
  await worker.terminate();
}

export function gemmHelperRunning(): boolean {
  return running !== null;
}

/** Kernel calls (native: pieces of products) the running helper has taken so far (0 without one). */
export function gemmHelperCalls(): number {
  if (!running) return 0;
  return "native" in running ? running.native.helperPieces() : Atomics.load(running.ints, HELPED);
}
