/**
 * Seeded, deterministic workload traces: a mix of LoRA RL sweeps on a few bases, LoRA and full-parameter SFT,
 * full-parameter RL on small models, short inference and evaluation jobs, and adapter exports. The numbers are
 * meant to look like a small lab's cluster, not to flatter the policy; docs/SCHEDULER.md lists them.
 */
import { Rng } from "@/lib/model/rng";
import type { TraceInput, Trace } from "./trace";
import { parseTrace } from "./trace";

export const tracePresets = ["mixed-8", "lora-heavy", "scale-1000"] as const;
export type TracePreset = (typeof tracePresets)[number];

const models = {
  "tiny-125m": { parameters: 125e6, dModel: 768, nLayers: 12 },
  "llama-1b": { parameters: 1.24e9, dModel: 2048, nLayers: 16 },
  "qwen-3b": { parameters: 3.09e9, dModel: 2048, nLayers: 36 },
  "llama-8b": { parameters: 8.03e9, dModel: 4096, nLayers: 32 },
};
type ModelName = keyof typeof models;

const h100 = { name: "h100-80g", kind: "gpu" as const, memoryMb: 81_920, computeSlots: 8 };
const l4 = { name: "l4-24g", kind: "gpu" as const, memoryMb: 24_576, computeSlots: 4 };

type Template = "loraRl" | "loraSft" | "fullSft" | "fullRl" | "inference" | "eval" | "export" | "tooBig";

export interface TraceShape {
  name: string;
  devices: { group: typeof h100; count: number }[];
  jobs: number;
  users: number;
  /** Relative frequency of each kind of submission. */
  mix: Partial<Record<Template, number>>;
  /** Relative popularity of each base model among LoRA jobs. */
  bases: Partial<Record<ModelName, number>>;
  /**
   * Offered load as a fraction of device time: the sum of job durations over (devices x span of arrivals). At 1
   * the baseline, which gives every job a whole device, would be saturated even with perfect packing.
   */
  offeredLoad: number;
}

const everyKind: Partial<Record<Template, number>> = {
  loraRl: 0.4,
  loraSft: 0.1,
  fullSft: 0.07,
  fullRl: 0.05,
  inference: 0.22,
  eval: 0.1,
  export: 0.058,
  tooBig: 0.002,
};

export const traceShapes: Record<TracePreset, TraceShape> = {
  "mixed-8": {
    name: "mixed-8",
    devices: [
      { group: h100, count: 4 },
      { group: l4, count: 4 },
    ],
    jobs: 400,
    users: 6,
    mix: everyKind,
    bases: { "llama-1b": 0.4, "qwen-3b": 0.3, "llama-8b": 0.3 },
    offeredLoad: 0.8,
  },
  "lora-heavy": {
    name: "lora-heavy",
    devices: [
      { group: h100, count: 8 },
      { group: l4, count: 4 },
    ],
    jobs: 600,
    users: 8,
    mix: { loraRl: 0.75, loraSft: 0.05, fullSft: 0.03, inference: 0.12, export: 0.05 },
    bases: { "llama-8b": 0.5, "qwen-3b": 0.3, "llama-1b": 0.2 },
    // A busy shared cluster: the sweeps ask for as much device time as there is (docs/SCHEDULER.md, "Why
    // lora-heavy runs at load 1.0", gives the measurements behind this choice).
    offeredLoad: 1.0,
  },
  "scale-1000": {
    name: "scale-1000",
    devices: [
      { group: h100, count: 700 },
      { group: l4, count: 300 },
    ],
    jobs: 20_000,
    users: 200,
    mix: everyKind,
    bases: { "llama-1b": 0.3, "qwen-3b": 0.3, "llama-8b": 0.3, "tiny-125m": 0.1 },
    offeredLoad: 0.8,
  },
};

/** A preset's trace, or a smaller one with `jobs` submissions (for tests). Same seed, same trace. */
export function generateTrace(preset: TracePreset, seed = 1, overrides: Partial<TraceShape> = {}): Trace {
  return generateTraceFrom({ ...traceShapes[preset], ...overrides }, seed);
}

export function generateTraceFrom(shape: TraceShape, seed: number): Trace {
  const rng = new Rng(seed);
  const pick = <K extends string>(weights: Partial<Record<K, number>>): K => {
    const entries = Object.entries(weights) as [K, number][];
    let total = 0;
    for (const [, w] of entries) total += w;
    let u = rng.uniform() * total;
    for (const [key, w] of entries) {
      if ((u -= w) < 0) return key;
    }
    return entries[entries.length - 1][0];
  };
  const choose = <T>(values: readonly T[]): T => values[Math.floor(rng.uniform() * values.length)];
  /** Log-normal around a median, clamped: run times have a long right tail. */
  const duration = (median: number, sigma: number) => Math.round(Math.min(median * 12, Math.max(median / 8, median * Math.exp(sigma * rng.normal()))));
  // A few users submit most of the work (Zipf), as in any shared cluster.
  const userWeights: Record<string, number> = {};
  for (let u = 0; u < shape.users; u++) userWeights[`user-${u}`] = 1 / (u + 1);

  const jobs: TraceInput["jobs"] = [];
  let clock = 0;
  while (jobs.length < shape.jobs) {
    clock += -Math.log(1 - rng.uniform());
    const user = pick(userWeights);
    const template = pick(shape.mix);
    const base = pick(shape.bases);
    // RL on LoRA is submitted as sweeps: several seeds or learning rates of one recipe at once.
    const copies = template === "loraRl" && rng.uniform() < 0.5 ? 2 + Math.floor(rng.uniform() * 5) : 1;
    const recipe = describeTemplate(template, base, duration, choose, rng);
    for (let c = 0; c < copies && jobs.length < shape.jobs; c++) {
      const durationSeconds = c === 0 ? recipe.durationSeconds : Math.round(recipe.durationSeconds * Math.exp(0.2 * rng.normal()));
      const known = template === "inference" || template === "export" || rng.uniform() < 0.75;
      jobs.push({
        ...recipe,
        id: `j${jobs.length}`,
        arrival: clock,
        user,
        durationSeconds,
        estimatedSeconds: known ? Math.round(durationSeconds * Math.exp(0.4 * rng.normal())) : null,
      });
    }
  }

  // Stretch the arrivals so that the work offered is `offeredLoad` of the device time over the arrival span.
  const deviceCount = shape.devices.reduce((n, d) => n + d.count, 0);
  const work = jobs.reduce((total, job) => total + job.durationSeconds, 0);
  const span = work / (shape.offeredLoad * deviceCount);
  const scale = span / clock;
  for (const job of jobs) job.arrival = Math.round(job.arrival * scale * 10) / 10;

  return parseTrace(
    {
      name: shape.name,
      checkpointIntervalSeconds: 600,
      models,
      devices: shape.devices.map(({ group, count }) => ({ ...group, count })),
      jobs,
    },
    `generated trace '${shape.name}'`,
  );
}

type JobRecipe = Omit<TraceInput["jobs"][number], "id" | "arrival" | "user" | "estimatedSeconds">;

function describeTemplate(
  template: Template,
  base: ModelName,
  duration: (median: number, sigma: number) => number,
  choose: <T>(values: readonly T[]) => T,
  rng: Rng,
): JobRecipe {
  const small: ModelName = choose(["tiny-125m", "llama-1b", "llama-1b", "qwen-3b"] as const);
  switch (template) {
    case "loraRl":
      return {
        kind: "rl",
        mode: "lora",
        model: base,
        // Background sweeps run below normal priority and are the first to be preempted.
        priority: rng.uniform() < 0.15 ? -1 : 0,
        batchSize: 1,
        contextLength: choose([1024, 2048, 2048, 4096]),
        loraRank: choose([8, 16, 32]),
        weightDtype: "bf16",
        computeSlots: 2,
        durationSeconds: duration(2400, 0.9),
      };
    case "loraSft":
      return {
        kind: "sft",
        mode: "lora",
        model: base,
        batchSize: 2,
        contextLength: 2048,
        loraRank: 16,
        weightDtype: "bf16",
        computeSlots: 4,
        durationSeconds: duration(1200, 0.7),
      };
    case "fullSft":
      return {
        kind: "sft",
        mode: "full",
        model: small,
        batchSize: 2,
        contextLength: 1024,
        weightDtype: "bf16",
        computeSlots: 8,
        durationSeconds: duration(3600, 0.7),
      };
    case "fullRl":
      return {
        kind: "rl",
        mode: "full",
        model: small === "qwen-3b" ? "llama-1b" : small,
        batchSize: 1,
        contextLength: 2048,
        weightDtype: "bf16",
        computeSlots: 8,
        durationSeconds: duration(5400, 0.8),
      };
    case "inference":
      return {
        kind: "inference",
        mode: "lora",
        model: base,
        // Interactive: someone is waiting on the answer.
        priority: 1,
        batchSize: 8,
        contextLength: 2048,
        loraRank: 16,
        weightDtype: "bf16",
        computeSlots: 2,
        durationSeconds: duration(240, 0.6),
      };
    case "eval":
      return {
        kind: "eval",
        mode: "lora",
        model: base,
        batchSize: 8,
        contextLength: 2048,
        loraRank: 16,
        weightDtype: "bf16",
        computeSlots: 2,
        durationSeconds: duration(600, 0.5),
      };
    case "export":
      return {
        kind: "export",
        mode: "lora",
        model: base,
        batchSize: 1,
        contextLength: 1,
        loraRank: 16,
        weightDtype: "bf16",
        computeSlots: 1,
        durationSeconds: duration(90, 0.3),
      };
    case "tooBig":
      // Someone asks for full-parameter SFT of an 8B model: about 100 GB before activations. Rejected at submit.
      return {
        kind: "sft",
        mode: "full",
        model: "llama-8b",
        batchSize: 4,
        contextLength: 4096,
        weightDtype: "bf16",
        computeSlots: 8,
        durationSeconds: duration(7200, 0.5),
      };
  }
}
