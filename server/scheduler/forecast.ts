/**
 * Estimated starts for queued jobs: the simulator run forward from the cluster as it stands (the jobs on each
 * device with the work they have left, the queue in its order), under the same policy the scheduler uses, with no
 * further arrivals. A job's start is only as good as the estimates of the jobs ahead of it: a job of unknown length
 * is taken never to end, so jobs that must wait for it get no estimate.
 */
import { describeDevice, type ClusterState, type RunningJob, type SchedulingPolicy } from "./policy";
import type { Footprint } from "./resources";
import { simulate } from "./simulator";
import type { Trace, TraceJob } from "./trace";

/** Beyond this, a forecast start is reported as unknown (it waits for a job nobody can time). */
const FORECAST_HORIZON_SECONDS = 30 * 24 * 3600;
const NEVER_ENDS = FORECAST_HORIZON_SECONDS * 10;

/**
 * For each queued job of `state`, the time (seconds, same clock as `state.now`) at which the policy would start
 * it, or null when that cannot be told. `remainingSeconds` gives each job's work left, running or queued; a job
 * missing from it, or null there, has no estimate.
 */
export function forecastStarts(
  state: ClusterState,
  policy: SchedulingPolicy,
  remainingSeconds: ReadonlyMap<string, number | null>,
): Map<string, number | null> {
  const deviceIds = new Map<string, string>();
  const footprints = new Map<string, Footprint>();
  const submittedAt = new Map<string, number>();
  const jobs: TraceJob[] = [];
  const running: { jobId: string; deviceId: string; doneSeconds: number }[] = [];
  const toJob = (job: { id: string; userId: string; priority: number; footprint: Footprint }, kind: TraceJob["kind"], mode: TraceJob["mode"]): TraceJob => {
    const left = remainingSeconds.get(job.id) ?? null;
    footprints.set(job.id, job.footprint);
    return {
      id: job.id,
      arrival: 0,
      user: job.userId,
      priority: job.priority,
      kind,
      mode,
      model: "live",
      batchSize: 1,
      contextLength: 1,
      weightDtype: "fp32",
      computeSlots: job.footprint.computeSlots,
      durationSeconds: left === null ? NEVER_ENDS : Math.max(left, 1),
      estimatedSeconds: left === null ? null : Math.max(left, 1),
    };
  };
  const devices: Trace["devices"] = state.devices.map((device) => {
    // The simulator names a group's devices name-0, name-1, …: one group per live device.
    deviceIds.set(device.capacity.id, `${device.capacity.id}-0`);
    return { name: device.capacity.id, count: 1, kind: device.capacity.kind, memoryMb: device.capacity.memoryMb, computeSlots: device.capacity.computeSlots };
  });
  for (const device of state.devices) {
    // A device can hold more than fits for a moment (a job placed while a preempted one writes its checkpoint):
    // the forecast keeps the jobs that fit, in order, and drops the leaving rest.
    const kept: RunningJob[] = [];
    for (const job of device.jobs) {
      if (describeDevice(device.capacity, [...kept, job]).freeMemoryMb < 0) continue;
      kept.push(job);
      // A running job's kind only matters for preemption: the policy reads `preemptible` from the simulator.
      jobs.push(toJob(job, job.preemptible ? "rl" : "inference", job.footprint.sharedBase === null ? "full" : "lora"));
      running.push({ jobId: job.id, deviceId: deviceIds.get(device.capacity.id)!, doneSeconds: 0 });
    }
  }
  for (const job of [...state.queue].sort((a, b) => a.submittedAt - b.submittedAt)) {
    jobs.push(toJob(job, job.kind, job.mode));
    submittedAt.set(job.id, job.submittedAt - state.now);
  }
  const starts = new Map<string, number | null>(state.queue.map((job) => [job.id, null]));
  if (state.queue.length === 0 || devices.length === 0) return starts;
  const trace: Trace = {
    name: "forecast",
    checkpointIntervalSeconds: 600,
    models: { live: { parameters: 1, dModel: 1, nLayers: 1 } },
    devices,
    jobs,
    actions: [],
  };
  const result = simulate(trace, policy, {}, { running, footprints, submittedAt });
  for (const outcome of result.outcomes) {
    if (!starts.has(outcome.id)) continue;
    starts.set(outcome.id, outcome.startedAt !== null && outcome.startedAt < FORECAST_HORIZON_SECONDS ? state.now + outcome.startedAt : null);
  }
  return starts;
}
