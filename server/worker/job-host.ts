/**
 * The job host: the child process in which a worker's jobs compute. Training, sampling and a sandbox's synchronous
 * calls block the thread they run on for seconds at a time (the matrix kernel waits on its threads with
 * `Atomics.wait`; an evaluation plays thousands of episodes between two awaits). In the worker's own process they
 * held up its heartbeats, and on a busy machine the worker lost its lease while its job was still computing. Here
 * they block only this process: the worker's main thread (./worker-process.ts) keeps the lease, claims jobs, and
 * carries this process's reports and checkpoints to the server through its channel.
 *
 * A child process rather than a worker thread: native backends (tfjs-node, onnxruntime-node) need not support
 * threads, a crash here (out of memory, a fault in native code) leaves the worker alive to say what happened, and
 * V8's flags for a process that plays rollouts (./gc.ts) apply to this process alone.
 *
 * A worker starts one host per base its LoRA jobs share (their weights loaded once, ./base-models.ts), and one for
 * each other job (./worker-process.ts, `hostKey`). Jobs in one host take turns between their awaits.
 */
import { initBackend } from "../runtime";
import { crossedError, hostChannel, type HostMessage, type WorkerMessage } from "./host-protocol";
import { runJob, type StopReason } from "./run-job";

if (!process.send) throw new Error("the job host runs as a worker's child process (server/worker/worker-process.ts)");
const send = (message: HostMessage) => process.send!(message);
// The worker is gone (its IPC channel closed): nothing here can reach the server any more.
process.on("disconnect", () => process.exit(0));

const stops = new Map<string, StopReason | null>();
const channel = hostChannel(send);

process.on("message", (message: WorkerMessage) => {
  switch (message.type) {
    case "result":
      channel.settle(message);
      break;
    case "stop":
      if (stops.has(message.jobId) && !stops.get(message.jobId)) stops.set(message.jobId, message.why);
      break;
    case "start":
      void start(message);
      break;
    case "init":
      void initBackend({ prefer: message.backend }).then(({ capabilities }) => send({ type: "ready", backend: capabilities.backend, gpu: capabilities.gpu }));
      break;
  }
});

async function start({ jobId, workerId, spec, artifactsDir }: Extract<WorkerMessage, { type: "start" }>) {
  stops.set(jobId, null);
  try {
    const outcome = await runJob({
      channel,
      workerId,
      spec,
      artifactsDir,
      stopRequested: () => stops.get(jobId) ?? null,
      onStep: (step) => send({ type: "step", jobId, step }),
    });
    send({ type: "done", jobId, outcome });
  } catch (error) {
    send({ type: "done", jobId, error: crossedError(error) });
  } finally {
    stops.delete(jobId);
  }
}
