/**
 * What a worker offers the scheduler: its share of the machine's cores as compute slots (so jobs run side by side
 * on one worker), its share of the memory, or the GPU the backend computes on as the driver lists it.
 */
import os from "node:os";
import { describe, expect, it } from "vitest";
import { parseNvidiaSmi, visibleGpus, workerDevice } from "@/server/worker/devices";

describe("a worker's device", () => {
  it("offers one compute slot per core of its share of the machine, at least one", () => {
    const cores = os.availableParallelism();
    expect(workerDevice({ id: "cpu:a", gpu: false, share: 1 })).toMatchObject({ kind: "cpu", computeSlots: cores });
    expect(workerDevice({ id: "cpu:b", gpu: false, share: 1 / (cores * 4) }).computeSlots).toBe(1);
    expect(workerDevice({ id: "cpu:c", gpu: false, share: 1, slots: 3 }).computeSlots).toBe(3);
    const half = workerDevice({ id: "cpu:d", gpu: false, share: 0.5 });
    expect(half.memoryMb).toBeLessThan(workerDevice({ id: "cpu:e", gpu: false, share: 1 }).memoryMb);
  });

  it("reads the GPUs nvidia-smi lists, names with commas included", () => {
    expect(parseNvidiaSmi("NVIDIA H100 80GB HBM3, 81559\nNVIDIA L4, 23034\n")).toEqual([
      { name: "NVIDIA H100 80GB HBM3", memoryMb: 81559 },
      { name: "NVIDIA L4", memoryMb: 23034 },
    ]);
    expect(parseNvidiaSmi("Tesla, model X, 16384")).toEqual([{ name: "Tesla, model X", memoryMb: 16384 }]);
    expect(parseNvidiaSmi("No devices were found\n")).toEqual([]);
  });

  it("offers the GPU the driver lists first when the GPU backend loaded, else the CPU", () => {
    const gpus = visibleGpus();
    const device = workerDevice({ id: "x", gpu: true, share: 1 });
    if (gpus.length === 0) expect(device.kind).toBe("cpu");
    else expect(device).toMatchObject({ kind: "gpu", memoryMb: gpus[0]!.memoryMb });
  });
});
