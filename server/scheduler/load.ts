/**
 * How hard a trace presses on its cluster: the work its jobs offer, counted in what they hold on a device (their
 * footprints), over what the devices have during the span of arrivals. docs/SCHEDULER.md, "Traces", explains why
 * the benchmark's traces are sized to about 1.
 */
import { memoryToAdd } from "./resources";
import { footprintOf, traceDevices } from "./simulator";
import type { Trace, TraceJob } from "./trace";

export interface OfferedLoad {
  /**
   * Offered work over capacity: each job's duration times its dominant share of the cluster (the larger of its
   * compute slots over all slots and its memory, base weights included, over all memory), summed over the jobs and
   * divided by the span of arrivals. At 1 the jobs ask for all of the cluster's compute (or memory) while they
   * arrive; a policy that packed perfectly, without interference, would just keep up.
   */
  load: number;
  /**
   * The same work counted in whole devices (each job takes one, whatever its footprint), over the device count: the
   * load a one-job-per-device policy such as the FIFO baseline faces. Above 1 its queue grows for as long as jobs
   * keep arriving.
   */
  wholeDeviceLoad: number;
  /** Seconds from the first arrival to the last. */
  spanSeconds: number;
}

/** The share of the cluster's compute or memory a job holds while it runs alone, whichever is larger. */
export function dominantShare(job: TraceJob, trace: Trace, totals: { slots: number; memoryMb: number }): number {
  const footprint = footprintOf(job, trace);
  return Math.max(job.computeSlots / totals.slots, memoryToAdd(footprint, false) / totals.memoryMb);
}

/** The offered load of a trace; jobs no device could hold are left out (they never run). */
export function offeredLoad(trace: Trace, spanSeconds = arrivalSpan(trace)): OfferedLoad {
  const devices = traceDevices(trace);
  const totals = { slots: 0, memoryMb: 0 };
  let largest = 0;
  for (const device of devices) {
    totals.slots += device.computeSlots;
    totals.memoryMb += device.memoryMb;
    largest = Math.max(largest, device.memoryMb);
  }
  let work = 0;
  let deviceSeconds = 0;
  for (const job of trace.jobs) {
    if (memoryToAdd(footprintOf(job, trace), false) > largest) continue;
    work += job.durationSeconds * dominantShare(job, trace, totals);
    deviceSeconds += job.durationSeconds;
  }
  if (!(spanSeconds > 0)) return { load: Infinity, wholeDeviceLoad: Infinity, spanSeconds };
  return { load: work / spanSeconds, wholeDeviceLoad: deviceSeconds / (devices.length * spanSeconds), spanSeconds };
}

function arrivalSpan(trace: Trace): number {
  let first = Infinity;
  let last = -Infinity;
  for (const job of trace.jobs) {
    first = Math.min(first, job.arrival);
    last = Math.max(last, job.arrival);
  }
  return trace.jobs.length === 0 ? 0 : last - first;
}
