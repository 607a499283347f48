/**
 * What the ONNX tests share: onnxruntime-node (an optional dependency that CI installs: if it cannot be loaded, the
 * files that import this fail), and a probe of the thread pool.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeModel } from "@/lib/onnx/proto";

// The API of onnxruntime-node is onnxruntime-common's, as onnxruntime-web's (a dependency) types it.
export const ort = createRequire(import.meta.url)("onnxruntime-node") as typeof import("onnxruntime-web");
export type Session = import("onnxruntime-web").InferenceSession;
export type Tensor = import("onnxruntime-web").Tensor;
export type InferenceSessionOptions = import("onnxruntime-web").InferenceSession.SessionOptions;

/**
 * The kernels of one run that used onnxruntime's thread pool (two threads), from the runtime's profile: a kernel
 * that dispatched work records block sizes on the calling thread, and the pool's thread counts the work it ran.
 */
export async function threadPoolUse(modelBytes: Uint8Array, feeds: Record<string, Tensor>): Promise<string[]> {
  const profileDir = mkdtempSync(join(tmpdir(), "tinkerlab-onnx-profile-"));
  try {
    const options = { intraOpNumThreads: 2, enableProfiling: true, profileFilePrefix: join(profileDir, "run"), logSeverityLevel: 3 };
    const profiled = await ort.InferenceSession.create(modelBytes, options as InferenceSessionOptions);
    await profiled.run(feeds);
    profiled.endProfiling();
    await profiled.release();
    const [file] = readdirSync(profileDir);
    type Stats = { main_thread?: { block_size?: number[] }; sub_threads?: Record<string, { num_run?: number }> };
    type ProfileEvent = { cat: string; name: string; args?: { op_name?: string; thread_scheduling_stats?: Stats | string } };
    const events = JSON.parse(readFileSync(join(profileDir, file!), "utf8")) as ProfileEvent[];
    const used: string[] = [];
    for (const event of events) {
      const stats = event.args?.thread_scheduling_stats;
      if (event.cat !== "Node" || !stats || typeof stats !== "object") continue;
      const dispatched = (stats.main_thread?.block_size?.length ?? 0) > 0;
      const ranOnPool = Object.values(stats.sub_threads ?? {}).some((thread) => (thread.num_run ?? 0) > 0);
      if (dispatched || ranOnPool) used.push(`${event.args!.op_name} (${event.name})`);
    }
    return used;
  } finally {
    rmSync(profileDir, { recursive: true, force: true });
  }
}

/** The kernels onnxruntime runs for a model after its optimizer (all levels, CPU), as the nodes of the optimized graph. */
export async function optimizedKernels(modelBytes: Uint8Array): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), "tinkerlab-onnx-optimized-"));
  try {
    const file = join(dir, "optimized.onnx");
    await ort.InferenceSession.create(modelBytes, { optimizedModelFilePath: file, logSeverityLevel: 3 } as InferenceSessionOptions);
    return decodeModel(new Uint8Array(readFileSync(file))).graph.node.map((n) => n.opType);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
