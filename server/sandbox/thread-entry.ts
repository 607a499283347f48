/**
 * The sandbox's worker thread (started by sandbox-thread.ts, bundled by esbuild at first use): it loads one
 * QuickJS engine and answers batches of ops posted on its port. Before each op it writes the op's index and start
 * time to memory shared with the host thread, whose watchdog terminates this thread when an op outlives its
 * budget even inside one long native call (a huge sort, a big JSON.parse), which QuickJS's interrupt handler
 * cannot reach.
 */
import { type MessagePort, parentPort, workerData } from "node:worker_threads";
import { type BatchOutcome, type EngineLimits, QuickJSEngine } from "./quickjs-engine";
import { ANSWERED, CURRENT_OP, OP_CPU_AT, OP_STARTED_AT } from "./wire";

export type ThreadData = { code: string; fileName: string; limits: EngineLimits; shared: SharedArrayBuffer; port: MessagePort };
/** The ops as one JSON text (wire.ts `encodeRequest`), and each op's CPU budget. */
export type ThreadRequest = { ops: string; budgetsMs: Float64Array };

async function main() {
  const { code, fileName, limits, shared, port } = workerData as ThreadData;
  const control = new Int32Array(shared, 0, 2);
  const clock = new Float64Array(shared, 0, 3);
  const { engine, outcome } = await QuickJSEngine.load(code, fileName, limits, () => parentPort!.postMessage("evaluating"));
  parentPort!.postMessage(outcome);
  if (!engine) return;
  // The first turn of this thread's event loop after loading can stall for a few hundred milliseconds (V8
  // installing optimized WebAssembly code); it is taken here, before the first op, not during one.
  await new Promise((resolve) => setTimeout(resolve, 0));
  const onOp = (index: number, startedAt: number, cpuStartedAt: number) => {
    // Epoch time, which both threads read alike (each has its own performance.timeOrigin); the CPU clock is the process's.
    clock[OP_STARTED_AT] = performance.timeOrigin + startedAt;
    clock[OP_CPU_AT] = cpuStartedAt;
    Atomics.store(control, CURRENT_OP, index);
  };
  port.on("message", ({ ops, budgetsMs }: ThreadRequest) => {
    let answer: BatchOutcome;
    try {
      answer = engine.run(ops, budgetsMs, onOp);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      answer = { ok: false, op: -1, overrunMs: null, error: { name: "InternalError", message, stack: undefined }, ms: [], memoryMb: engine.memoryUsedMb() };
    }
    Atomics.store(control, CURRENT_OP, -1);
    port.postMessage(answer);
    Atomics.store(control, ANSWERED, 1);
    Atomics.notify(control, ANSWERED);
  });
  parentPort!.postMessage("ready");
}

if (parentPort && workerData?.shared) void main();
