/**
 * The sandbox's worker thread (started by quickjs-host.ts, bundled by esbuild at first use): it loads one
 * QuickJS engine and answers batches of ops. A batch arrives in the mailbox of the memory it shares with the host
 * thread (mailbox.ts) and the thread waits for one in `Atomics.wait`, which the host's `Atomics.notify` ends at once;
 * a batch too long for the mailbox, or a failed answer, goes as a message on its port instead. Before each op it
 * writes the op's index and start time to the shared memory, whose watchdog (host side) terminates this thread
 * when an op outlives its budget even inside one long native call (a huge sort, a big JSON.parse), which
 * QuickJS's interrupt handler cannot reach.
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import { type BatchOutcome, type EngineLimits, QuickJSEngine } from "./quickjs-engine";
import { ANSWERED, BATCH_RAN_AT, BATCH_STARTED_AT, CURRENT_OP, Mailbox, type MailboxRequest, OP_CPU_AT, OP_STARTED_AT, REQUESTED } from "./mailbox";

export type ThreadData = {
  code: string;
  fileName: string;
  limits: EngineLimits;
  shared: SharedArrayBuffer;
  port: MessagePort;
  /** QuickJS's WebAssembly, compiled once in the process (quickjs-host.ts); null: the thread compiles its own. */
  wasmModule: WebAssembly.Module | null;
};

/** How long the thread waits for a batch before it lets its event loop run once (V8's own tasks), then waits again. */
const idleTurnMs = 50;

async function main() {
  const { code, fileName, limits, shared, port, wasmModule } = workerData as ThreadData;
  const mailbox = new Mailbox(shared);
  const { control, clock } = mailbox;
  const { engine, outcome } = await QuickJSEngine.load(code, fileName, limits, () => parentPort!.postMessage("evaluating"), {
    wasmModule: wasmModule ?? undefined,
  });
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
  const answerBatch = (): void => {
    let answer: BatchOutcome;
    clock[BATCH_STARTED_AT] = performance.timeOrigin + performance.now();
    try {
      const request = mailbox.receive() ?? (receiveMessageOnPort(port)?.message as MailboxRequest | undefined);
      if (!request) throw new Error("the batch posted on the port is missing");
      answer = engine.run(request.ops, request.budgetsMs, onOp);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      answer = { ok: false, op: -1, overrunMs: null, error: { name: "InternalError", message, stack: undefined }, ms: [], memoryMb: engine.memoryUsedMb() };
    }
    Atomics.store(control, CURRENT_OP, -1);
    clock[BATCH_RAN_AT] = performance.timeOrigin + performance.now();
    if (!mailbox.answer(answer.ok ? answer : null)) port.postMessage(answer);
    Atomics.store(control, ANSWERED, 1);
    Atomics.notify(control, ANSWERED);
  };
  // Read before "ready": the host posts the first batch as soon as it hears it.
  let seen = Atomics.load(control, REQUESTED);
  parentPort!.postMessage("ready");
  for (;;) {
    if (Atomics.wait(control, REQUESTED, seen, idleTurnMs) === "timed-out") {
      await new Promise((resolve) => setImmediate(resolve));
      continue;
    }
    const requested = Atomics.load(control, REQUESTED);
    if (requested === seen) continue;
    seen = requested;
    answerBatch();
  }
}

if (parentPort && workerData?.shared) void main();
