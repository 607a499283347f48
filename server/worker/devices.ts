/**
 * The device a worker offers the scheduler: its share of this machine's CPU (memory and one compute slot per
 * core), or, where the GPU backend loaded, the GPU it computes on, with the GPU's memory as `nvidia-smi` reports it.
 */
import { execFileSync } from "node:child_process";
import os from "node:os";
import type { DeviceSpec } from "../jobs";
import { cpuDevice } from "../scheduler";

/** Jobs a GPU worker runs at once unless TINKERLAB_WORKER_SLOTS says otherwise: small models leave a GPU idle alone. */
const DEFAULT_GPU_SLOTS = 4;

export function workerDevice(options: { gpu: boolean; share: number; slots?: number; id: string }): DeviceSpec & { id: string } {
  if (options.gpu) {
    const gpu = visibleGpus()[0];
    if (gpu)
      return { id: options.id, kind: "gpu", name: `${options.id} ${gpu.name}`, memoryMb: gpu.memoryMb, computeSlots: options.slots ?? DEFAULT_GPU_SLOTS };
  }
  const slots = options.slots ?? Math.max(1, Math.floor(os.availableParallelism() * options.share));
  const cpu = cpuDevice(options.id, os.totalmem() * options.share, slots);
  return { id: options.id, kind: "cpu", name: options.id, memoryMb: cpu.memoryMb, computeSlots: cpu.computeSlots };
}

/** The GPUs the NVIDIA driver lists, in its order (tfjs-node-gpu computes on the first); none without the driver. */
export function visibleGpus(): { name: string; memoryMb: number }[] {
  try {
    const out = execFileSync("nvidia-smi", ["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"], { encoding: "utf8", timeout: 5000 });
    return parseNvidiaSmi(out);
  } catch {
    return [];
  }
}

/** Lines of `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits`: "NVIDIA H100 80GB HBM3, 81559". */
export function parseNvidiaSmi(output: string): { name: string; memoryMb: number }[] {
  return output
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .flatMap((line) => {
      const cut = line.lastIndexOf(",");
      const memoryMb = Number(line.slice(cut + 1).trim());
      return cut > 0 && Number.isFinite(memoryMb) && memoryMb > 0 ? [{ name: line.slice(0, cut).trim(), memoryMb }] : [];
    });
}
