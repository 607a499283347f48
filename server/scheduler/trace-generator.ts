/**
 * Seeded, deterministic workload traces of the job kinds the runtime runs: LoRA RL sweeps on a few bases, LoRA and
 * full-parameter SFT, full-parameter RL on small models, evaluations and exports of checkpoints, remote training
 * sessions, and long-running serving jobs. The numbers are meant to look like a small lab's busy cluster, not to
 * flatter the policy; docs/SCHEDULER.md lists them. Arrivals are spaced so that the work offered, counted in the
 * jobs' footprints, is `offeredLoad` of what the devices have (load.ts), and every job fits some device.
 */
import { Rng } from "@/lib/model/rng";
import { offeredLoad } from "./load";
import { checkEverFits } from "./resources";
import { footprintOf, traceDevices } from "./simulator";
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

/** A kind of submission; `describeTemplate` gives each one's job kind, footprint and length. */
type Template = "loraRl" | "loraSft" | "fullSft" | "fullRl" | "eval" | "export" | "session" | "serving";

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
   * Offered load (load.ts): the jobs' work, each counted by its dominant share of the cluster's compute slots or
   * memory, over the span of arrivals. 1 asks for all the cluster has while jobs arrive.
   */
  offeredLoad: number;
}

const everyKind: Partial<Record<Template, number>> = {
  loraRl: 0.34,
  loraSft: 0.1,
  fullSft: 0.06,
  fullRl: 0.04,
  eval: 0.2,
  export: 0.1,
  session: 0.12,
  serving: 0.04,
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
    offeredLoad: 1.0,
  },
  "lora-heavy": {
    name: "lora-heavy",
    devices: [
      { group: h100, count: 8 },
      { group: l4, count: 4 },
    ],
    jobs: 600,
    users: 8,
    mix: { loraRl: 0.7, loraSft: 0.05, fullSft: 0.03, eval: 0.1, export: 0.05, session: 0.04, serving: 0.03 },
    bases: { "llama-8b": 0.5, "qwen-3b": 0.3, "llama-1b": 0.2 },
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
    offeredLoad: 1.0,
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
      // Evaluations and exports cost what their episodes and weights do, so they come with an estimate; a session
      // or a serving job lasts until its user closes it, which nobody can tell; 3 training jobs in 4 have one.
      const known = template === "eval" || template === "export" ? true : template === "session" || template === "serving" ? false : rng.uniform() < 0.75;
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

  const trace = parseTrace(
    {
      name: shape.name,
      checkpointIntervalSeconds: 600,
      models,
      devices: shape.devices.map(({ group, count }) => ({ ...group, count })),
      jobs,
    },
    `generated trace '${shape.name}'`,
  );
  // A job no device could hold would be rejected at submit and never load the cluster: a shape that makes one is
  // wrong, not a workload to measure.
  const capacities = traceDevices(trace);
  for (const job of trace.jobs) {
    const fit = checkEverFits(footprintOf(job, trace), capacities);
    if (!fit.fits) throw new Error(`generated trace '${shape.name}': job ${job.id} (${job.kind} ${job.mode} of ${job.model}) can never run: it ${fit.message}`);
  }
  // Space the arrivals so that the work offered, counted in footprints, is `offeredLoad` of the cluster's capacity.
  const first = trace.jobs[0]?.arrival ?? 0;
  const { load } = offeredLoad(trace);
  const scale = load / shape.offeredLoad;
  for (const job of trace.jobs) job.arrival = Math.round((job.arrival - first) * scale * 10) / 10;
  return trace;
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
    case "eval":
      // runs.evaluate: the checkpoint is the job's base, so it holds a whole copy of the weights (mode full, as
      // server/api queues it) and a KV cache, no gradients or optimizer; it samples the held-out episodes once.
      return {
        kind: "eval",
        mode: "full",
        model: base,
        batchSize: 8,
        contextLength: 2048,
        weightDtype: "bf16",
        computeSlots: 2,
        durationSeconds: duration(600, 0.5),
      };
    case "export":
      // runs.export: the checkpoint's weights (an adapter merged into its base) written as one file.
      return {
        kind: "export",
        mode: "full",
        model: base,
        batchSize: 1,
        contextLength: 1,
        weightDtype: "bf16",
        computeSlots: 1,
        durationSeconds: duration(90, 0.3),
      };
    case "session": {
      // A script's remote training session (tinkerlab/client): a training footprint (batch 64, as openSession
      // submits it) that holds its device until the script closes it; it is never preempted.
      const lora = rng.uniform() < 0.8;
      return {
        kind: "session",
        mode: lora ? "lora" : "full",
        model: lora ? base : small,
        batchSize: 64,
        contextLength: 2048,
        loraRank: lora ? 16 : undefined,
        weightDtype: "bf16",
        computeSlots: lora ? 2 : 8,
        durationSeconds: duration(1800, 1.0),
      };
    }
    case "serving":
      // Serving an adapter: a sampling job that keeps its base resident for hours, until it is closed. The runtime
      // has the kind ("inference") but nothing submits it yet, so it is modelled here: long-running, never
      // preempted, and above training in priority, as someone is waiting on its answers.
      return {
        kind: "inference",
        mode: "lora",
        model: base,
        priority: 1,
        batchSize: 8,
        contextLength: 2048,
        loraRank: 16,
        weightDtype: "bf16",
        computeSlots: 2,
        durationSeconds: duration(3 * 3600, 0.6),
      };
  }
}
