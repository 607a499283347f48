/**
 * The resource model: what a device offers and what a job needs. Memory is counted in MiB (2^20 bytes) and
 * rounded up; compute in slots, the share of a device one job can keep busy on its own (see docs/SCHEDULER.md).
 */

import { jobKinds, type JobKind } from "@/lib/lifecycle";
import { DECODER_CACHE_BYTES, PASS_ACTIVATION_BYTES } from "@/lib/model/budgets";

export { jobKinds, type JobKind };

/** "full" trains (or serves) every weight; "lora" adds an adapter to a base shared with other jobs. */
export const jobModes = ["lora", "full"] as const;
export type JobMode = (typeof jobModes)[number];

export const weightDtypes = ["fp32", "bf16"] as const;
type WeightDtype = (typeof weightDtypes)[number];

const bytesPerWeight: Record<WeightDtype, number> = { fp32: 4, bf16: 2 };
/** Adam's two moments stay in fp32 whatever the weights are. */
const bytesPerAdamMoment = 4;
/**
 * Values kept per token, per layer, in units of dModel, for the backward pass: block input, two layer-norm
 * outputs, q, k, v, attention output, MLP input and its 4x hidden before and after GELU (about 16 in all).
 * Attention probabilities (T^2 per head) are left out: fused attention recomputes them.
 */
const activationWidthsPerLayer = 16;
/** The LoRA targets of lib/model (qkv, attention projection, MLP in and out) add r*(in+out) = r*14*dModel a block. */
const loraWidthsPerLayer = 14;

const mib = 2 ** 20;

export interface ModelShape {
  name: string;
  parameters: number;
  dModel: number;
  nLayers: number;
}

export interface JobResourceSpec {
  kind: JobKind;
  mode: JobMode;
  model: ModelShape;
  batchSize: number;
  contextLength: number;
  /** Adapter rank for LoRA jobs. */
  loraRank?: number;
  weightDtype?: WeightDtype;
  /** Slots this job keeps busy when it has a device to itself; it runs slower on a device with fewer. */
  computeSlots: number;
  /**
   * Clients the job holds on its base, each with its own weights or adapter, gradients and optimizer state: one per
   * agent with separate policies, and a league run's learner plus every snapshot it keeps. Default 1. Activations
   * and the KV cache are counted once: the clients take turns.
   */
  clients?: number;
}

/** What a job holds on a device. The base weights of a LoRA job are counted once per device, not per job. */
export interface Footprint {
  /** The base model a LoRA job shares with others on the same device; null for a job that holds its own weights. */
  sharedBase: string | null;
  /** Memory of the shared base weights; 0 when `sharedBase` is null. */
  baseMemoryMb: number;
  /** Memory only this job holds: its weights or adapter, gradients, optimizer state, activations or KV cache. */
  ownMemoryMb: number;
  computeSlots: number;
  /** The parts of the estimate, in MiB, for messages and the UI. */
  breakdown: Record<string, number>;
}

function toMb(bytes: number): number {
  return Math.ceil(bytes / mib);
}

/** Jobs that hold gradients and an optimizer: RL, SFT, and a remote training session. */
function isTraining(kind: JobKind): boolean {
  return kind === "rl" || kind === "sft" || kind === "session";
}

/** Estimates a job's memory from its model's shape, mode, batch and context. */
export function estimateFootprint(spec: JobResourceSpec): Footprint {
  const { model, batchSize, contextLength } = spec;
  const weightBytes = bytesPerWeight[spec.weightDtype ?? "fp32"];
  const tokens = batchSize * contextLength;
  // Training keeps every layer's activations for the backward pass; serving keeps only the KV cache. Neither
  // passes what the engine allows itself (lib/model/budgets.ts): a larger batch runs in parts, a larger sample in
  // turns; a training job samples and trains one after the other.
  const activationBytes = isTraining(spec.kind)
    ? Math.min(tokens * model.nLayers * model.dModel * activationWidthsPerLayer * weightBytes, Math.max(PASS_ACTIVATION_BYTES, DECODER_CACHE_BYTES))
    : spec.kind === "export"
      ? 0
      : Math.min(tokens * model.nLayers * model.dModel * 2 * weightBytes, DECODER_CACHE_BYTES);
  const weightsMb = toMb(model.parameters * weightBytes);
  const activationsMb = toMb(activationBytes);
  const clients = spec.clients ?? 1;
  if (!Number.isInteger(clients) || clients < 1) throw new Error(`a job holds a whole number of clients ≥ 1; got ${clients}`);
  /** A part every client holds, times the clients, named so a message says so ("adapter ×3"). */
  const perClient = (breakdown: Record<string, number>) =>
    clients === 1 ? breakdown : Object.fromEntries(Object.entries(breakdown).map(([name, mb]) => [`${name} ×${clients}`, mb * clients]));

  if (spec.mode === "full") {
    const own: Record<string, number> = { weights: weightsMb };
    if (isTraining(spec.kind)) {
      own.gradients = weightsMb;
      own.adam = toMb(model.parameters * 2 * bytesPerAdamMoment);
    }
    const breakdown = perClient(own);
    if (activationsMb > 0) breakdown[isTraining(spec.kind) ? "activations" : "kvCache"] = activationsMb;
    return { sharedBase: null, baseMemoryMb: 0, ownMemoryMb: sum(breakdown), computeSlots: spec.computeSlots, breakdown };
  }

  const rank = spec.loraRank ?? 8;
  const adapterParameters = model.nLayers * rank * loraWidthsPerLayer * model.dModel;
  const own: Record<string, number> = { adapter: toMb(adapterParameters * 4) };
  if (isTraining(spec.kind)) {
    own.adapterGradients = own.adapter!;
    own.adapterAdam = toMb(adapterParameters * 2 * bytesPerAdamMoment);
  }
  const breakdown = perClient(own);
  if (activationsMb > 0) breakdown[isTraining(spec.kind) ? "activations" : "kvCache"] = activationsMb;
  const ownMemoryMb = sum(breakdown);
  return {
    sharedBase: model.name,
    baseMemoryMb: weightsMb,
    ownMemoryMb,
    computeSlots: spec.computeSlots,
    breakdown: { baseWeights: weightsMb, ...breakdown },
  };
}

/** Memory a job adds to a device: its own part, plus the base weights when no copy is resident there yet. */
export function memoryToAdd(footprint: Footprint, baseResident: boolean): number {
  return footprint.ownMemoryMb + (footprint.sharedBase !== null && !baseResident ? footprint.baseMemoryMb : 0);
}

export interface DeviceCapacity {
  id: string;
  kind: "cpu" | "gpu";
  memoryMb: number;
  computeSlots: number;
}

/**
 * The device every installation has: the machine's CPU, with the memory it can spare for jobs and one compute
 * slot per core. Callers pass what `node:os` reports so that this module stays free of Node.
 */
export function cpuDevice(id: string, totalMemoryBytes: number, cores: number, reservedFraction = 0.25): DeviceCapacity {
  return {
    id,
    kind: "cpu",
    memoryMb: Math.floor((totalMemoryBytes * (1 - reservedFraction)) / mib),
    computeSlots: Math.max(1, cores),
  };
}

function formatMb(mb: number): string {
  return `${Math.round(mb).toLocaleString("en-US")} MiB`;
}

export type FitCheck = { fits: true } | { fits: false; message: string };

/**
 * Whether a job could run on the largest device once it had it to itself. A job that cannot is rejected at
 * submit, with the numbers, instead of waiting forever.
 */
export function checkEverFits(footprint: Footprint, devices: readonly DeviceCapacity[]): FitCheck {
  const needed = memoryToAdd(footprint, false);
  if (devices.length === 0) return { fits: false, message: `needs ${formatMb(needed)}; there are no devices` };
  let largest = devices[0];
  for (const device of devices) if (device.memoryMb > largest.memoryMb) largest = device;
  if (needed <= largest.memoryMb) return { fits: true };
  const parts = Object.entries(footprint.breakdown)
    .map(([name, mb]) => `${name} ${formatMb(mb)}`)
    .join(", ");
  return {
    fits: false,
    message: `needs ${formatMb(needed)} (${parts}); the largest device has ${formatMb(largest.memoryMb)}`,
  };
}

function sum(parts: Record<string, number>): number {
  let total = 0;
  for (const value of Object.values(parts)) total += value;
  return total;
}
