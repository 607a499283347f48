import { describe, expect, it } from "vitest";
import { dominantShare, offeredLoad } from "@/server/scheduler/load";
import { createFifoBaselinePolicy, createPackingPolicy } from "@/server/scheduler/policy";
import { simulate } from "@/server/scheduler/simulator";
import { parseTrace, type TraceInput } from "@/server/scheduler/trace";
import { generateTrace, generateTraceFrom, tracePresets, traceShapes } from "@/server/scheduler/trace-generator";

type Job = TraceInput["jobs"][number];
const models = { tiny: { parameters: 125e6, dModel: 768, nLayers: 12 }, "llama-8b": { parameters: 8.03e9, dModel: 4096, nLayers: 32 } };
const job = (id: string, extra: Partial<Job>): Job => ({
  id,
  arrival: 0,
  user: "alice",
  kind: "sft",
  mode: "full",
  model: "tiny",
  batchSize: 1,
  contextLength: 128,
  weightDtype: "bf16",
  computeSlots: 1,
  durationSeconds: 1000,
  ...extra,
});

describe("offered load", () => {
  it("counts each job by its dominant share of the cluster's slots or memory, over the span of arrivals", () => {
    // 12 slots and 106,496 MiB in all.
    const devices = [
      { name: "h100", memoryMb: 81_920, computeSlots: 8 },
      { name: "l4", memoryMb: 24_576, computeSlots: 4 },
    ];
    const trace = parseTrace({
      name: "load",
      models,
      devices,
      jobs: [
        // 6 of 12 slots for 1,000 s: 500 s of the whole cluster.
        job("a", { computeSlots: 6, durationSeconds: 1000 }),
        // 3 of 12 slots for 2,000 s: 500 s.
        job("b", { arrival: 1000, computeSlots: 3, durationSeconds: 2000 }),
        // Serving an 8B model in bf16: 15,317 MiB of weights and a 64 MiB cache (1 x 128 tokens x 32 layers x 2 x 4,096
        // x 2 B) hold 14.4% of the memory, more than its one slot (8.3%): memory is its dominant share.
        job("c", { arrival: 500, kind: "inference", model: "llama-8b", computeSlots: 1, durationSeconds: 1000 }),
      ],
    });
    const totals = { slots: 12, memoryMb: 106_496 };
    expect(dominantShare(trace.jobs[0], trace, totals)).toBe(0.5);
    expect(dominantShare(trace.jobs[2], trace, totals)).toBeCloseTo((15_317 + 64) / 106_496, 9);
    const { load, wholeDeviceLoad, spanSeconds } = offeredLoad(trace);
    expect(spanSeconds).toBe(1000);
    expect(load).toBeCloseTo((500 + 500 + (1000 * 15_381) / 106_496) / 1000, 9);
    // One job per device: 4,000 s of work over two devices for 1,000 s.
    expect(wholeDeviceLoad).toBe(2);
  });

  it("sizes every preset to about the cluster's capacity", () => {
    for (const preset of tracePresets) {
      const trace = generateTrace(preset, 1, preset === "scale-1000" ? { jobs: 2000 } : {});
      const { load, wholeDeviceLoad } = offeredLoad(trace);
      expect(load, preset).toBeGreaterThanOrEqual(0.9);
      expect(load, preset).toBeLessThanOrEqual(1.1);
      // Jobs hold a fraction of a device: one job per device would be far past what the cluster serves.
      expect(wholeDeviceLoad, preset).toBeGreaterThan(1.5);
    }
    expect(offeredLoad(generateTrace("mixed-8", 1, { offeredLoad: 0.5 })).load).toBeCloseTo(0.5, 2);
  });
});

describe("generated traces", () => {
  it("hold every kind of job the runtime runs, each as server/jobs submits it", () => {
    const trace = generateTrace("mixed-8", 1);
    const kinds = new Set(trace.jobs.map((j) => j.kind));
    expect([...kinds].sort()).toEqual(["eval", "export", "inference", "rl", "session", "sft"]);
    for (const j of trace.jobs) {
      // An evaluation or export's base is a checkpoint: it holds its own copy of the weights.
      if (j.kind === "eval" || j.kind === "export") expect(j.mode).toBe("full");
      // A session or a serving job lasts until it is closed: nobody can estimate it.
      if (j.kind === "session" || j.kind === "inference") expect(j.estimatedSeconds).toBeNull();
      // Serving keeps an adapter's base resident, for hours.
      if (j.kind === "inference") expect(j.mode).toBe("lora");
    }
    const serving = trace.jobs.filter((j) => j.kind === "inference").map((j) => j.durationSeconds);
    expect(serving.reduce((a, b) => a + b, 0) / serving.length).toBeGreaterThan(2 * 3600);
  });

  it("hold no job that no device could run, and refuse a shape that would make one", () => {
    for (const preset of ["mixed-8", "lora-heavy"] as const) {
      expect(simulate(generateTrace(preset, 1), createPackingPolicy()).rejected, preset).toEqual([]);
    }
    const l4Only = { ...traceShapes["mixed-8"], devices: [{ group: traceShapes["mixed-8"].devices[1].group, count: 4 }] };
    // Full-parameter SFT of a 3B model needs more than an L4's 24,576 MiB.
    expect(() => generateTraceFrom(l4Only, 1)).toThrow(
      /generated trace 'mixed-8': job j\d+ \(.+\) can never run: it needs [\d,]+ MiB .*the largest device has 24,576 MiB/,
    );
  });

  it("keep the devices busy while jobs arrive, under the packing policy", () => {
    for (const preset of ["mixed-8", "lora-heavy"] as const) {
      const result = simulate(generateTrace(preset, 1), createPackingPolicy());
      expect(result.arrivalUtilization, preset).toBeGreaterThan(0.8);
      expect(result.meanWait, preset).toBeGreaterThan(0);
    }
  });

  it("the packing policy's mean JCT is at least 2x lower than strict FIFO's", () => {
    for (const [preset, seed, jobs] of [
      ["mixed-8", 1, 400],
      ["lora-heavy", 1, 600],
      ["mixed-8", 2, 150],
      ["lora-heavy", 3, 150],
    ] as const) {
      const trace = generateTrace(preset, seed, { jobs });
      const packed = simulate(trace, createPackingPolicy());
      const baseline = simulate(trace, createFifoBaselinePolicy());
      expect(packed.completed).toBe(jobs);
      expect(baseline.meanJct / packed.meanJct, `${preset}, seed ${seed}, ${jobs} jobs`).toBeGreaterThanOrEqual(2);
    }
  });

  it("never preempts evaluations, exports, sessions or serving jobs", () => {
    const trace = generateTrace("lora-heavy", 2);
    const result = simulate(trace, createPackingPolicy());
    const kindOf = new Map(trace.jobs.map((j) => [j.id, j.kind]));
    const preempted = result.outcomes.filter((o) => o.preemptions > 0).map((o) => kindOf.get(o.id));
    // Training jobs are preempted here (background sweeps for normal-priority work, training for serving) ...
    expect(preempted).toContain("rl");
    // ... and nothing else, as server/jobs marks only RL and SFT preemptible.
    for (const kind of preempted) expect(["rl", "sft"]).toContain(kind);
  });
});
