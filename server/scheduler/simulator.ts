/**
 * A discrete-event simulation of the scheduler: virtual devices, virtual time, the same `SchedulingPolicy` the
 * real scheduler calls. Its model of speed, loading and checkpoints is in docs/SCHEDULER.md; in short:
 * - a job has `durationSeconds` of work at rate 1; on a device whose running jobs ask for D slots out of S, each
 *   runs at min(1, S/D) / (1 + interference * (jobs - 1)): co-located jobs share the compute, and pay for it;
 * - placing a job costs a start-up, plus reading weights when the device lacks them (a base is read once per
 *   device, then shared); a job that joins a base still being read waits for it;
 * - training jobs checkpoint every `checkpointIntervalSeconds` of progress; a preempted job resumes from its last
 *   checkpoint; a paused job checkpoints first and loses nothing.
 */
import { EventQueue } from "./event-queue";
import { transition, type JobState } from "@/lib/lifecycle";
import { describeDevice, type ClusterState, type DeviceState, type QueuedJob, type RunningJob, type SchedulingPolicy } from "./policy";
import { checkEverFits, estimateFootprint, type DeviceCapacity, type Footprint } from "./resources";
import type { Trace, TraceAction, TraceJob } from "./trace";

export interface SimulationOptions {
  /** MiB per second a device reads weights at when it loads a model. */
  loadMbPerSecond: number;
  /** Fixed cost of starting any job (process, adapter, optimizer set-up), in seconds. */
  startSeconds: number;
  /** Slowdown each extra running job on a device adds to all of them (memory bandwidth, kernel switches). */
  interferencePerExtraJob: number;
}

const defaultSimulationOptions: SimulationOptions = {
  loadMbPerSecond: 2000,
  startSeconds: 5,
  interferencePerExtraJob: 0.03,
};

export interface JobOutcome {
  id: string;
  state: JobState;
  arrival: number;
  finishedAt: number | null;
  waitSeconds: number;
  preemptions: number;
  lostSeconds: number;
  /** Devices the job ran on, in order. */
  devices: string[];
  /** When it was first placed on a device, or null if it never was. */
  startedAt: number | null;
}

/**
 * Where a simulation starts from instead of empty devices (the forecast of the live cluster): jobs already on a
 * device with work already done, and footprints given as they are (instead of computed from the trace's models).
 */
export interface SimulationStart {
  running?: readonly { jobId: string; deviceId: string; doneSeconds: number }[];
  footprints?: ReadonlyMap<string, Footprint>;
  /** Submission times the policy orders by, when they precede the simulation's start (the queue as it stands). */
  submittedAt?: ReadonlyMap<string, number>;
}

export interface SimulationResult {
  policy: string;
  trace: string;
  devices: number;
  jobs: number;
  completed: number;
  cancelled: number;
  rejected: { id: string; message: string }[];
  preemptions: number;
  /** Work thrown away by preemptions, seconds at full speed. */
  lostWorkSeconds: number;
  meanJct: number;
  p95Jct: number;
  meanWait: number;
  p95Wait: number;
  /** Busy compute-slot time over available compute-slot time, from the first arrival to the last finish. */
  utilization: number;
  /**
   * The same from the first arrival to the last: how busy the devices are while the trace offers work, before the
   * last jobs drain (they run on a cluster that has nothing else to do, which `utilization` counts).
   */
  arrivalUtilization: number;
  makespan: number;
  /** Largest number of jobs placed on one device at once. */
  maxJobsPerDevice: number;
  outcomes: JobOutcome[];
}

interface SimJob {
  spec: TraceJob;
  footprint: Footprint;
  preemptible: boolean;
  state: JobState;
  /** Work done, seconds at rate 1, as of `updatedAt`. */
  done: number;
  /** Work saved in the last checkpoint. */
  checkpointed: number;
  rate: number;
  updatedAt: number;
  /** Bumped whenever the job's pending events become stale. */
  version: number;
  device: SimDevice | null;
  loadedAt: number;
  queuedSince: number;
  waited: number;
  finishedAt: number | null;
  preemptions: number;
  lost: number;
  placements: string[];
  startedAt: number | null;
  queueView: QueuedJob;
  runningView: RunningJob;
}

interface SimDevice {
  index: number;
  capacity: DeviceCapacity;
  jobs: SimJob[];
  /** When each resident base finishes loading. */
  baseReadyAt: Map<string, number>;
  busySlotSeconds: number;
  /** The part of busySlotSeconds between the first and the last arrival. */
  busyWhileArriving: number;
  accountedAt: number;
  activeSlots: number;
}

type SimEvent =
  | { type: "arrival"; job: SimJob }
  | { type: "loaded"; job: SimJob; version: number }
  | { type: "finish"; job: SimJob; version: number }
  | { type: "action"; action: TraceAction };

/** Expands a trace's device groups into devices named `name-0`, `name-1`, ... */
export function traceDevices(trace: Trace): DeviceCapacity[] {
  const devices: DeviceCapacity[] = [];
  for (const group of trace.devices) {
    for (let i = 0; i < group.count; i++) {
      devices.push({ id: `${group.name}-${i}`, kind: group.kind, memoryMb: group.memoryMb, computeSlots: group.computeSlots });
    }
  }
  return devices;
}

export function footprintOf(job: TraceJob, trace: Trace): Footprint {
  const model = trace.models[job.model];
  return estimateFootprint({
    kind: job.kind,
    mode: job.mode,
    model: { name: job.model, ...model },
    batchSize: job.batchSize,
    contextLength: job.contextLength,
    loraRank: job.loraRank,
    weightDtype: job.weightDtype,
    computeSlots: job.computeSlots,
  });
}

export function simulate(trace: Trace, policy: SchedulingPolicy, options: Partial<SimulationOptions> = {}, start: SimulationStart = {}): SimulationResult {
  return new Simulation(trace, policy, { ...defaultSimulationOptions, ...options }, start).run();
}

class Simulation {
  private now = 0;
  private readonly events = new EventQueue<SimEvent>();
  private readonly devices: SimDevice[];
  private readonly deviceStates: DeviceState[];
  private readonly devicesById = new Map<string, SimDevice>();
  private readonly jobs: SimJob[];
  private readonly jobsById = new Map<string, SimJob>();
  /** Queued jobs, oldest submission first (ties by trace order). */
  private queue: SimJob[] = [];
  private readonly usage = new Map<string, number>();
  private readonly capacities: DeviceCapacity[];
  private readonly rejected: { id: string; message: string }[] = [];
  private preemptions = 0;
  private maxJobsPerDevice = 0;
  private needsPass = false;
  private readonly firstArrival: number;
  private readonly lastArrival: number;

  constructor(
    private readonly trace: Trace,
    private readonly policy: SchedulingPolicy,
    private readonly options: SimulationOptions,
    private readonly start: SimulationStart = {},
  ) {
    const capacities = traceDevices(trace);
    this.capacities = capacities;
    this.devices = capacities.map((capacity, index) => ({
      index,
      capacity,
      jobs: [],
      baseReadyAt: new Map(),
      busySlotSeconds: 0,
      busyWhileArriving: 0,
      accountedAt: 0,
      activeSlots: 0,
    }));
    for (const device of this.devices) this.devicesById.set(device.capacity.id, device);
    this.deviceStates = this.devices.map((device) => describeDevice(device.capacity, []));

    this.jobs = trace.jobs.map((spec) => this.createJob(spec));
    this.firstArrival = trace.jobs.reduce((first, job) => Math.min(first, job.arrival), Infinity);
    this.lastArrival = trace.jobs.reduce((last, job) => Math.max(last, job.arrival), -Infinity);
    for (const job of this.jobs) this.jobsById.set(job.spec.id, job);
    const alreadyRunning = new Set<string>();
    for (const { jobId, deviceId, doneSeconds } of start.running ?? []) {
      const job = this.jobsById.get(jobId);
      const device = this.devicesById.get(deviceId);
      if (!job || !device) throw new Error(`the starting state names unknown job '${jobId}' or device '${deviceId}'`);
      alreadyRunning.add(jobId);
      job.done = job.checkpointed = Math.min(doneSeconds, job.spec.durationSeconds);
      // Already loaded: it runs from the first instant, without a start-up or a read of its weights.
      this.place(job, device, job.footprint.sharedBase !== null && device.baseReadyAt.has(job.footprint.sharedBase));
      device.baseReadyAt.forEach((_, base) => device.baseReadyAt.set(base, 0));
      job.version++;
      this.startRunning(job);
    }
    // Sorting by arrival (stable) fixes the queue's tie order as the trace's order.
    for (const job of [...this.jobs].sort((a, b) => a.spec.arrival - b.spec.arrival)) {
      if (!alreadyRunning.has(job.spec.id)) this.events.push(job.spec.arrival, { type: "arrival", job });
    }
    for (const action of trace.actions) this.events.push(action.at, { type: "action", action });
  }

  private createJob(spec: TraceJob): SimJob {
    const sim = this;
    const job: SimJob = {
      spec,
      footprint: this.start.footprints?.get(spec.id) ?? footprintOf(spec, this.trace),
      // As server/jobs/scheduling.ts marks them: RL and SFT stop at a step and resume from a checkpoint; an
      // evaluation, an export, a remote session (its script holds the model's state) and serving run to the end.
      preemptible: spec.kind === "rl" || spec.kind === "sft",
      state: "queued",
      done: 0,
      checkpointed: 0,
      rate: 0,
      updatedAt: 0,
      version: 0,
      device: null,
      loadedAt: 0,
      queuedSince: spec.arrival,
      waited: 0,
      finishedAt: null,
      preemptions: 0,
      lost: 0,
      placements: [],
      startedAt: null,
      queueView: undefined as unknown as QueuedJob,
      runningView: undefined as unknown as RunningJob,
    };
    job.queueView = {
      id: spec.id,
      userId: spec.user,
      priority: spec.priority,
      submittedAt: this.start.submittedAt?.get(spec.id) ?? spec.arrival,
      kind: spec.kind,
      mode: spec.mode,
      footprint: job.footprint,
      estimatedSeconds: null,
    };
    // The policy reads progress and estimated end as of the moment it runs, so these are computed on read.
    job.runningView = {
      id: spec.id,
      userId: spec.user,
      priority: spec.priority,
      footprint: job.footprint,
      preemptible: job.preemptible,
      get estimatedEndAt() {
        return sim.estimatedEndAt(job);
      },
      get secondsSinceCheckpoint() {
        return sim.progress(job) - sim.lastCheckpoint(job);
      },
    };
    return job;
  }

  run(): SimulationResult {
    for (;;) {
      const next = this.events.pop();
      if (next === undefined) break;
      this.now = next.time;
      this.handle(next.item);
      // Events at the same instant are handled together, then the policy runs once.
      if (this.events.peekTime() === this.now) continue;
      if (this.needsPass && this.queue.length > 0) this.schedule();
      this.needsPass = false;
    }
    for (const device of this.devices) this.account(device);
    return this.result();
  }

  private handle(event: SimEvent): void {
    switch (event.type) {
      case "arrival":
        return this.arrive(event.job);
      case "loaded":
        if (event.version === event.job.version) this.startRunning(event.job);
        return;
      case "finish":
        if (event.version === event.job.version) this.finish(event.job);
        return;
      case "action":
        return this.act(event.action);
    }
  }

  private arrive(job: SimJob): void {
    const fit = checkEverFits(job.footprint, this.capacities);
    if (!fit.fits) {
      this.setState(job, "failed", `rejected at submit: ${fit.message}`);
      this.rejected.push({ id: job.spec.id, message: fit.message });
      return;
    }
    this.enqueue(job);
  }

  private enqueue(job: SimJob): void {
    job.queuedSince = this.now;
    const remaining = job.spec.estimatedSeconds === null ? null : Math.max(job.spec.estimatedSeconds - job.done, 1);
    job.queueView.estimatedSeconds = remaining;
    // Binary search keeps the queue in submission order; arrivals land at the end, re-queued jobs in their place.
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.queue[mid].spec.arrival <= job.spec.arrival) lo = mid + 1;
      else hi = mid;
    }
    this.queue.splice(lo, 0, job);
    this.needsPass = true;
  }

  private schedule(): void {
    const state: ClusterState = {
      now: this.now,
      devices: this.deviceStates,
      queue: this.queue.map((job) => job.queueView),
      slotsInUseByUser: this.usage,
    };
    const decisions = this.policy.decide(state);
    if (decisions.length === 0) return;
    for (const decision of decisions) {
      const job = this.jobsById.get(decision.jobId);
      const device = this.devicesById.get(decision.deviceId);
      if (!job || !device) throw new Error(`policy '${this.policy.name}' named unknown job '${decision.jobId}' or device '${decision.deviceId}'`);
      if (decision.type === "preempt") this.preempt(job, decision.forJobId);
      else this.place(job, device, decision.sharesBase !== null);
    }
    this.queue = this.queue.filter((job) => job.state === "queued");
  }

  private place(job: SimJob, device: SimDevice, sharesBase: boolean): void {
    if (job.state !== "queued") throw new Error(`policy '${this.policy.name}' placed job '${job.spec.id}', which is ${job.state}`);
    this.setState(job, "placing", `placed on ${device.capacity.id}${sharesBase ? ` sharing base ${job.footprint.sharedBase}` : ""}`);
    job.waited += this.now - job.queuedSince;
    job.device = device;
    job.placements.push(device.capacity.id);
    job.startedAt ??= this.now;
    this.usage.set(job.spec.user, (this.usage.get(job.spec.user) ?? 0) + job.footprint.computeSlots);

    const base = job.footprint.sharedBase;
    let readyAt = this.now + this.options.startSeconds;
    if (base !== null) {
      let baseReady = device.baseReadyAt.get(base);
      if (baseReady === undefined) {
        baseReady = this.now + job.footprint.baseMemoryMb / this.options.loadMbPerSecond;
        device.baseReadyAt.set(base, baseReady);
      }
      readyAt = Math.max(readyAt, baseReady);
    } else {
      readyAt += (job.footprint.breakdown.weights ?? 0) / this.options.loadMbPerSecond;
    }
    device.jobs.push(job);
    this.refreshDevice(device);
    const state = this.deviceStates[device.index];
    if (state.freeMemoryMb < 0) {
      throw new Error(`policy '${this.policy.name}' overfilled ${device.capacity.id}: ${-state.freeMemoryMb} MiB over capacity`);
    }
    this.maxJobsPerDevice = Math.max(this.maxJobsPerDevice, device.jobs.length);
    job.version++;
    job.loadedAt = readyAt;
    this.events.push(readyAt, { type: "loaded", job, version: job.version });
  }

  private startRunning(job: SimJob): void {
    const device = job.device!;
    this.setState(job, "running", `loaded on ${device.capacity.id}`);
    this.account(device);
    job.updatedAt = this.now;
    this.reschedule(device);
  }

  private finish(job: SimJob): void {
    const device = job.device!;
    this.account(device);
    this.detach(job);
    job.done = job.spec.durationSeconds;
    job.finishedAt = this.now;
    this.setState(job, "completed", "finished its work");
    this.reschedule(device);
  }

  private preempt(job: SimJob, forJobId: string): void {
    const device = job.device;
    if (device === null || (job.state !== "running" && job.state !== "placing")) {
      throw new Error(`policy '${this.policy.name}' preempted job '${job.spec.id}', which is ${job.state}`);
    }
    this.account(device);
    const checkpoint = this.lastCheckpoint(job);
    job.lost += this.progress(job) - checkpoint;
    job.preemptions++;
    this.preemptions++;
    this.detach(job);
    job.done = checkpoint;
    this.setState(job, "queued", `preempted for ${forJobId}; resumes from its checkpoint at ${Math.round(checkpoint)} s of work`);
    this.enqueue(job);
    this.reschedule(device);
  }

  private act(action: TraceAction): void {
    const job = this.jobsById.get(action.job)!;
    if (action.action === "resume") {
      if (job.state !== "paused") return;
      this.setState(job, "queued", "resumed by its user");
      this.enqueue(job);
      return;
    }
    if (job.state === "completed" || job.state === "failed" || job.state === "cancelled") return;
    if (action.action === "pause" && job.state === "paused") return;
    const device = job.device;
    if (device !== null) {
      this.account(device);
      this.detach(job);
      // A pause writes a checkpoint first, so nothing is lost; a cancel throws the job away anyway.
      job.checkpointed = job.done;
      this.reschedule(device);
    } else if (job.state === "queued") {
      job.waited += this.now - job.queuedSince;
      this.queue = this.queue.filter((queued) => queued !== job);
    }
    if (action.action === "pause") this.setState(job, "paused", "paused by its user");
    else {
      this.setState(job, "cancelled", "cancelled by its user");
      job.finishedAt = this.now;
    }
    this.needsPass = true;
  }

  /** Takes a job off its device, settling its progress first; the base goes when its last sharer does. */
  private detach(job: SimJob): void {
    const device = job.device!;
    job.done = this.progress(job);
    job.updatedAt = this.now;
    job.rate = 0;
    job.version++;
    device.jobs.splice(device.jobs.indexOf(job), 1);
    const base = job.footprint.sharedBase;
    if (base !== null && !device.jobs.some((other) => other.footprint.sharedBase === base)) device.baseReadyAt.delete(base);
    job.device = null;
    this.usage.set(job.spec.user, (this.usage.get(job.spec.user) ?? 0) - job.footprint.computeSlots);
    this.refreshDevice(device);
    this.needsPass = true;
  }

  private refreshDevice(device: SimDevice): void {
    this.deviceStates[device.index] = describeDevice(
      device.capacity,
      device.jobs.map((job) => job.runningView),
    );
  }

  /** Adds the busy slot time since the device last changed; call before anything on it changes. */
  private account(device: SimDevice): void {
    const busy = Math.min(device.capacity.computeSlots, device.activeSlots);
    device.busySlotSeconds += busy * (this.now - device.accountedAt);
    const overlap = Math.min(this.now, this.lastArrival) - Math.max(device.accountedAt, this.firstArrival);
    if (overlap > 0) device.busyWhileArriving += busy * overlap;
    device.accountedAt = this.now;
  }

  /** Settles each running job's progress at its old rate, then gives it the new rate and a new finish event. */
  private reschedule(device: SimDevice): void {
    let activeSlots = 0;
    let active = 0;
    for (const job of device.jobs) {
      if (job.state !== "running") continue;
      activeSlots += job.footprint.computeSlots;
      active++;
    }
    device.activeSlots = activeSlots;
    if (active === 0) return;
    const share = Math.min(1, device.capacity.computeSlots / activeSlots);
    const rate = share / (1 + this.options.interferencePerExtraJob * (active - 1));
    for (const job of device.jobs) {
      if (job.state !== "running") continue;
      job.done = this.progress(job);
      job.updatedAt = this.now;
      job.rate = rate;
      job.version++;
      const left = Math.max(0, job.spec.durationSeconds - job.done);
      this.events.push(this.now + left / rate, { type: "finish", job, version: job.version });
    }
  }

  private progress(job: SimJob): number {
    if (job.state !== "running") return job.done;
    return Math.min(job.spec.durationSeconds, job.done + job.rate * (this.now - job.updatedAt));
  }

  private lastCheckpoint(job: SimJob): number {
    const interval = this.trace.checkpointIntervalSeconds;
    return Math.max(job.checkpointed, Math.floor(this.progress(job) / interval) * interval);
  }

  /** What the scheduler would believe: the user's estimate, not the true duration. */
  private estimatedEndAt(job: SimJob): number | null {
    const estimate = job.spec.estimatedSeconds;
    if (estimate === null) return null;
    const done = this.progress(job);
    // A job past its estimate is expected to end soon, not to have ended already.
    const left = Math.max(estimate - done, 0.05 * estimate);
    if (job.state !== "running") return Math.max(this.now, job.loadedAt) + left;
    return this.now + left / job.rate;
  }

  private setState(job: SimJob, to: JobState, reason: string): void {
    transition(job.state, to, reason, this.now);
    job.state = to;
  }

  private result(): SimulationResult {
    const jct: number[] = [];
    const wait: number[] = [];
    let firstArrival = Infinity;
    let lastFinish = 0;
    let lostWorkSeconds = 0;
    let cancelled = 0;
    for (const job of this.jobs) {
      lostWorkSeconds += job.lost;
      if (job.state === "cancelled") cancelled++;
      if (job.state !== "completed") continue;
      firstArrival = Math.min(firstArrival, job.spec.arrival);
      lastFinish = Math.max(lastFinish, job.finishedAt!);
      jct.push(job.finishedAt! - job.spec.arrival);
      wait.push(job.waited);
    }
    const makespan = jct.length === 0 ? 0 : lastFinish - firstArrival;
    let busy = 0;
    let busyWhileArriving = 0;
    let slots = 0;
    for (const device of this.devices) {
      busy += device.busySlotSeconds;
      busyWhileArriving += device.busyWhileArriving;
      slots += device.capacity.computeSlots;
    }
    const arrivalSpan = this.lastArrival - this.firstArrival;
    return {
      policy: this.policy.name,
      trace: this.trace.name,
      devices: this.devices.length,
      jobs: this.jobs.length,
      completed: jct.length,
      cancelled,
      rejected: this.rejected,
      preemptions: this.preemptions,
      lostWorkSeconds,
      meanJct: mean(jct),
      p95Jct: percentile(jct, 0.95),
      meanWait: mean(wait),
      p95Wait: percentile(wait, 0.95),
      utilization: makespan === 0 ? 0 : busy / (slots * makespan),
      arrivalUtilization: arrivalSpan > 0 ? busyWhileArriving / (slots * arrivalSpan) : 0,
      makespan,
      maxJobsPerDevice: this.maxJobsPerDevice,
      outcomes: this.jobs.map((job) => ({
        id: job.spec.id,
        state: job.state,
        arrival: job.spec.arrival,
        finishedAt: job.finishedAt,
        waitSeconds: job.waited,
        preemptions: job.preemptions,
        lostSeconds: job.lost,
        devices: job.placements,
        startedAt: job.startedAt,
      })),
    };
  }
}

function mean(values: number[]): number {
  if (values.length === 0) return 0;
  let total = 0;
  for (const v of values) total += v;
  return total / values.length;
}

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}
