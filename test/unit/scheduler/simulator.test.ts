import { describe, expect, it } from "vitest";
import { createFifoBaselinePolicy, createPackingPolicy } from "@/server/scheduler/policy";
import { simulate } from "@/server/scheduler/simulator";
import { parseTrace, type TraceInput } from "@/server/scheduler/trace";
import { generateTrace } from "@/server/scheduler/trace-generator";

const models = { "llama-8b": { parameters: 8.03e9, dModel: 4096, nLayers: 32 } };
const h100 = { name: "h100", memoryMb: 81_920, computeSlots: 8 };
type Job = TraceInput["jobs"][number];
const loraRl = (id: string, extra: Partial<Job> = {}): Job => ({
  id,
  arrival: 0,
  user: "alice",
  kind: "rl",
  mode: "lora",
  model: "llama-8b",
  batchSize: 1,
  contextLength: 1024,
  loraRank: 16,
  weightDtype: "bf16",
  computeSlots: 2,
  durationSeconds: 3600,
  estimatedSeconds: 3600,
  ...extra,
});

describe("simulator", () => {
  it("runs four LoRA jobs on one base copy at once, where the baseline runs them one by one", () => {
    const trace = parseTrace({ name: "four", models, devices: [h100], jobs: ["a", "b", "c", "d"].map((id) => loraRl(id)) });
    const packed = simulate(trace, createPackingPolicy());
    const baseline = simulate(trace, createFifoBaselinePolicy());
    expect(packed.maxJobsPerDevice).toBe(4);
    expect(baseline.maxJobsPerDevice).toBe(1);
    expect(packed.completed).toBe(4);
    // Together they run about 9% slower each (interference), but nobody waits.
    expect(packed.meanJct).toBeLessThan(3600 * 1.15);
    expect(baseline.meanJct).toBeGreaterThan(3600 * 2.4);
  });

  it("preempts a low-priority job through its checkpoint, losing at most one interval, and resumes it", () => {
    const trace = parseTrace({
      name: "preempt",
      models,
      checkpointIntervalSeconds: 600,
      devices: [h100],
      jobs: [
        loraRl("low", { priority: -1, computeSlots: 8, durationSeconds: 3600 }),
        loraRl("urgent", { kind: "sft", priority: 1, computeSlots: 8, arrival: 1_000, durationSeconds: 600 }),
      ],
    });
    const result = simulate(trace, createPackingPolicy());
    const low = result.outcomes.find((o) => o.id === "low")!;
    const urgent = result.outcomes.find((o) => o.id === "urgent")!;
    expect(result.preemptions).toBe(1);
    expect(low.preemptions).toBe(1);
    expect(low.lostSeconds).toBeGreaterThan(0);
    expect(low.lostSeconds).toBeLessThanOrEqual(600);
    expect(low.state).toBe("completed");
    expect(urgent.waitSeconds).toBe(0);
    expect(low.finishedAt!).toBeGreaterThan(urgent.finishedAt!);
  });

  it("never preempts a remote session, an evaluation or a serving job, as server/jobs does", () => {
    for (const kind of ["session", "eval", "inference"] as const) {
      const trace = parseTrace({
        name: `keeps-${kind}`,
        models,
        devices: [h100],
        jobs: [
          loraRl("held", { kind, priority: -1, computeSlots: 8, durationSeconds: 3600, estimatedSeconds: null }),
          loraRl("urgent", { kind: "sft", priority: 1, computeSlots: 8, arrival: 1_000, durationSeconds: 600 }),
        ],
      });
      const result = simulate(trace, createPackingPolicy());
      expect(result.preemptions, kind).toBe(0);
      const urgent = result.outcomes.find((o) => o.id === "urgent")!;
      // It waits for the held job to end (about 3,600 s of work after its start), not a moment less.
      expect(urgent.waitSeconds, kind).toBeGreaterThan(2_500);
    }
  });

  it("rejects at submit a job that no device could hold, with the numbers", () => {
    const trace = parseTrace({
      name: "too-big",
      models,
      devices: [h100],
      jobs: [loraRl("ok"), loraRl("huge", { kind: "sft", mode: "full", batchSize: 4, contextLength: 4096, computeSlots: 8 })],
    });
    const result = simulate(trace, createPackingPolicy());
    expect(result.rejected).toEqual([
      { id: "huge", message: expect.stringMatching(/^needs [\d,]+ MiB \(weights 15,317 MiB, .*\); the largest device has 81,920 MiB$/) },
    ]);
    expect(result.outcomes.find((o) => o.id === "huge")!.state).toBe("failed");
    expect(result.completed).toBe(1);
  });

  it("measures how busy the devices are while jobs arrive, apart from the drain after", () => {
    const trace = parseTrace({
      name: "busy",
      models,
      devices: [h100],
      jobs: [loraRl("first", { computeSlots: 8, durationSeconds: 3600 }), loraRl("last", { arrival: 7200, computeSlots: 8, durationSeconds: 36_000 })],
    });
    const result = simulate(trace, createPackingPolicy());
    // 3,600 s of 8 busy slots in the 7,200 s between the arrivals.
    expect(result.arrivalUtilization).toBeCloseTo(0.5, 9);
    // Over the makespan, the long last job keeps it busy most of the time.
    expect(result.utilization).toBeGreaterThan(0.9);
  });

  it("pauses, resumes and cancels jobs as the trace says", () => {
    const trace = parseTrace({
      name: "actions",
      models,
      devices: [h100],
      jobs: [loraRl("paused"), loraRl("cancelled")],
      actions: [
        { at: 600, job: "paused", action: "pause" },
        { at: 900, job: "cancelled", action: "cancel" },
        { at: 1_200, job: "paused", action: "resume" },
      ],
    });
    const result = simulate(trace, createPackingPolicy());
    const paused = result.outcomes.find((o) => o.id === "paused")!;
    expect(result.outcomes.find((o) => o.id === "cancelled")!.state).toBe("cancelled");
    expect(paused.state).toBe("completed");
    expect(paused.lostSeconds).toBe(0);
    // 600 s paused, and a second start-up and base load when it comes back.
    expect(paused.finishedAt!).toBeGreaterThan(3600 + 600);
    expect(result.cancelled).toBe(1);
  });

  it("is deterministic for a seed", () => {
    const a = generateTrace("mixed-8", 7, { jobs: 80 });
    const b = generateTrace("mixed-8", 7, { jobs: 80 });
    expect(a).toEqual(b);
    expect(generateTrace("mixed-8", 8, { jobs: 80 })).not.toEqual(a);
    expect(simulate(a, createPackingPolicy())).toEqual(simulate(b, createPackingPolicy()));
  });

  it("is never worse than the baseline on small generated traces, light or overloaded", () => {
    for (const seed of [1, 2, 3]) {
      for (const [preset, offeredLoad] of [
        ["mixed-8", 0.9],
        ["lora-heavy", 1.0],
        ["mixed-8", 0.3],
        ["lora-heavy", 1.3],
      ] as const) {
        const trace = generateTrace(preset, seed, { jobs: 150, offeredLoad });
        const packed = simulate(trace, createPackingPolicy());
        const baseline = simulate(trace, createFifoBaselinePolicy());
        expect(packed.completed).toBe(baseline.completed);
        expect(packed.meanJct, `${preset} at load ${offeredLoad}, seed ${seed}`).toBeLessThanOrEqual(baseline.meanJct);
      }
    }
  });
});

describe("trace files", () => {
  it("names the bad field and what is accepted", () => {
    const bad = { name: "bad", models, devices: [h100], jobs: [{ ...loraRl("a"), mode: "qlora" }] };
    expect(() => parseTrace(bad, "bad.json")).toThrow(/bad\.json is not a valid trace/);
    expect(() => parseTrace(bad, "bad.json")).toThrow(/jobs\[0\]\.mode: .*"lora"\|"full"/);
    const unknownModel = { name: "bad", models, devices: [h100], jobs: [loraRl("b", { model: "gpt-5" })] };
    expect(() => parseTrace(unknownModel, "bad.json")).toThrow(/jobs\[0\]\.model: unknown model 'gpt-5'; models has 'llama-8b'/);
  });
});
