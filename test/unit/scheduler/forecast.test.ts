import { describe, expect, it } from "vitest";
import { forecastStarts } from "@/server/scheduler/forecast";
import { createPackingPolicy, describeDevice, slotsInUseByUser, type ClusterState, type QueuedJob, type RunningJob } from "@/server/scheduler/policy";
import type { DeviceCapacity, Footprint } from "@/server/scheduler/resources";

const oneSlot: DeviceCapacity = { id: "cpu-a", kind: "cpu", memoryMb: 8_000, computeSlots: 1 };
const footprint: Footprint = { sharedBase: null, baseMemoryMb: 0, ownMemoryMb: 1_000, computeSlots: 1, breakdown: {} };
const running = (id: string, extra: Partial<RunningJob> = {}): RunningJob => ({
  id,
  userId: "u",
  priority: 0,
  footprint,
  preemptible: true,
  estimatedEndAt: null,
  secondsSinceCheckpoint: 0,
  ...extra,
});
const queued = (id: string, submittedAt: number, extra: Partial<QueuedJob> = {}): QueuedJob => ({
  id,
  userId: "u",
  priority: 0,
  submittedAt,
  kind: "rl",
  mode: "full",
  footprint,
  estimatedSeconds: null,
  ...extra,
});

function cluster(devices: [DeviceCapacity, RunningJob[]][], queue: QueuedJob[], now: number): ClusterState {
  const states = devices.map(([capacity, jobs]) => describeDevice(capacity, jobs));
  return { now, devices: states, queue, slotsInUseByUser: slotsInUseByUser(states) };
}

describe("forecast of queued jobs' starts", () => {
  const now = 1_000_000;

  it("runs the policy forward: each job starts when the one ahead ends, none behind a job of unknown length", () => {
    const state = cluster(
      [[oneSlot, [running("a", { estimatedEndAt: now + 600 })]]],
      [queued("b", now - 30), queued("c", now - 20), queued("d", now - 10)],
      now,
    );
    const left = new Map([
      ["a", 600],
      ["b", 300],
      ["c", null],
      ["d", 100],
    ]);
    const starts = forecastStarts(state, createPackingPolicy(), left);
    // b when a ends; c when b ends (5 s of start-up, then 300 s of work); d waits behind c, which nobody can time.
    expect(starts.get("b")).toBeCloseTo(now + 600, 6);
    expect(starts.get("c")).toBeCloseTo(now + 905, 6);
    expect(starts.get("d")).toBeNull();
  });

  it("spreads the queue over devices and honours priority: an urgent job preempts and starts now", () => {
    const other = { ...oneSlot, id: "cpu-b" };
    const state = cluster(
      [
        [oneSlot, [running("a")]],
        [other, [running("x", { priority: 5, preemptible: false })]],
      ],
      [queued("late", now - 50), queued("urgent", now - 5, { priority: 3 })],
      now,
    );
    const starts = forecastStarts(
      state,
      createPackingPolicy(),
      new Map([
        ["a", 1_000],
        ["x", 200],
        ["late", 100],
        ["urgent", 50],
      ]),
    );
    expect(starts.get("urgent")).toBe(now);
    // "late" (submitted before the preempted a was requeued) takes the device the urgent job frees: 5 s of
    // start-up and 50 s of work later, before x ends at 200 s.
    expect(starts.get("late")).toBeCloseTo(now + 55, 6);
  });
});
