import { describe, expect, it } from "vitest";
import {
  createFifoBaselinePolicy,
  createPackingPolicy,
  describeDevice,
  slotsInUseByUser,
  type ClusterState,
  type QueuedJob,
  type RunningJob,
} from "@/server/scheduler/policy";
import type { DeviceCapacity, Footprint } from "@/server/scheduler/resources";

const big: DeviceCapacity = { id: "big", kind: "gpu", memoryMb: 80_000, computeSlots: 8 };
const small: DeviceCapacity = { id: "small", kind: "gpu", memoryMb: 24_000, computeSlots: 4 };

function lora(base: string, ownMemoryMb = 5_000, computeSlots = 2): Footprint {
  return { sharedBase: base, baseMemoryMb: 15_000, ownMemoryMb, computeSlots, breakdown: {} };
}
function full(ownMemoryMb: number, computeSlots: number): Footprint {
  return { sharedBase: null, baseMemoryMb: 0, ownMemoryMb, computeSlots, breakdown: {} };
}
function queued(id: string, footprint: Footprint, extra: Partial<QueuedJob> = {}): QueuedJob {
  return {
    id,
    userId: "alice",
    priority: 0,
    submittedAt: 0,
    kind: "rl",
    mode: footprint.sharedBase ? "lora" : "full",
    footprint,
    estimatedSeconds: null,
    ...extra,
  };
}
function running(id: string, footprint: Footprint, extra: Partial<RunningJob> = {}): RunningJob {
  return { id, userId: "alice", priority: 0, footprint, preemptible: true, estimatedEndAt: null, secondsSinceCheckpoint: 0, ...extra };
}
function cluster(devices: [DeviceCapacity, RunningJob[]][], queue: QueuedJob[], now = 0): ClusterState {
  const states = devices.map(([capacity, jobs]) => describeDevice(capacity, jobs));
  return { now, devices: states, queue, slotsInUseByUser: slotsInUseByUser(states) };
}

describe("packing policy", () => {
  it("puts a LoRA job on the busy device that already holds its base, where the baseline waits", () => {
    const state = cluster(
      [
        [{ ...big, id: "d0" }, [running("r0", lora("llama-8b"))]],
        [{ ...big, id: "d1" }, [running("r1", full(30_000, 4))]],
      ],
      [queued("q0", lora("llama-8b"))],
    );
    expect(createPackingPolicy().decide(state)).toEqual([{ type: "place", jobId: "q0", deviceId: "d0", sharesBase: "llama-8b", backfilled: false }]);
    expect(createFifoBaselinePolicy().decide(state)).toEqual([]);
  });

  it("starts a job that asks for more slots than a device has on an idle one of them, slower, rather than wait", () => {
    const state = cluster(
      [
        [{ ...big, id: "busy" }, [running("r", full(20_000, 6))]],
        [{ ...small, id: "idle" }, []],
      ],
      [queued("whole", full(10_000, 8))],
    );
    expect(createPackingPolicy().decide(state)).toEqual([{ type: "place", jobId: "whole", deviceId: "idle", sharesBase: null, backfilled: false }]);
  });

  it("orders a priority class by each user's slots in use (fair share)", () => {
    const state = cluster(
      [[{ ...big, id: "d0" }, [running("a1", full(10_000, 2)), running("a2", full(10_000, 2)), running("a3", full(10_000, 2))]]],
      [queued("a4", full(10_000, 2), { submittedAt: 1 }), queued("b1", full(10_000, 2), { userId: "bob", submittedAt: 2 })],
    );
    const decisions = createPackingPolicy().decide(state);
    expect(decisions.filter((d) => d.type === "place").map((d) => d.jobId)).toEqual(["b1"]);
    // With equal usage the older job goes first.
    const even = cluster([[big, []]], [queued("a", full(70_000, 8), { submittedAt: 1 }), queued("b", full(70_000, 8), { userId: "bob", submittedAt: 2 })]);
    expect(
      createPackingPolicy()
        .decide(even)
        .map((d) => d.jobId),
    ).toEqual(["a"]);
  });

  it("preempts the cheapest lower-priority job through its checkpoint for a higher-priority one", () => {
    const state = cluster(
      [
        [{ ...big, id: "d0" }, [running("low-a", full(60_000, 8), { priority: -1, secondsSinceCheckpoint: 500 })]],
        [{ ...big, id: "d1" }, [running("low-b", full(60_000, 8), { priority: -1, secondsSinceCheckpoint: 20 })]],
        [{ ...big, id: "d2" }, [running("same", full(60_000, 8), { priority: 1 })]],
      ],
      [queued("urgent", full(60_000, 8), { priority: 1 })],
    );
    expect(createPackingPolicy().decide(state)).toEqual([
      { type: "preempt", jobId: "low-b", deviceId: "d1", forJobId: "urgent" },
      { type: "place", jobId: "urgent", deviceId: "d1", sharesBase: null, backfilled: false },
    ]);
    // Equal priority never preempts.
    const equal = cluster([[big, [running("r", full(60_000, 8))]]], [queued("q", full(60_000, 8))]);
    expect(createPackingPolicy().decide(equal)).toEqual([]);
  });

  it("backfills a short job onto the reserved device only if it ends before the blocked head can start", () => {
    const state = cluster(
      [
        [{ ...big, id: "d0" }, [running("r", full(20_000, 6), { estimatedEndAt: 1_000 })]],
        [{ ...small, id: "d1" }, []],
      ],
      [
        queued("head", full(60_000, 8), { submittedAt: 1 }),
        queued("short", full(30_000, 2), { submittedAt: 2, estimatedSeconds: 500 }),
        queued("long", full(30_000, 2), { submittedAt: 3, estimatedSeconds: 5_000 }),
        queued("fits-elsewhere", full(10_000, 2), { submittedAt: 4, estimatedSeconds: 5_000 }),
      ],
    );
    expect(createPackingPolicy().decide(state)).toEqual([
      { type: "place", jobId: "short", deviceId: "d0", sharesBase: null, backfilled: true },
      { type: "place", jobId: "fits-elsewhere", deviceId: "d1", sharesBase: null, backfilled: true },
    ]);
    // The baseline blocks behind the head.
    expect(createFifoBaselinePolicy().decide(state)).toEqual([]);
  });
});
