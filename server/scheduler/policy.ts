/**
 * Placement policies. A policy is a pure function of the cluster's state: it reads devices, what runs on them and
 * the queue, and returns decisions; the caller (the simulator, or the database-backed scheduler) carries them out.
 * Two policies share the `SchedulingPolicy` interface: the packing policy and the FIFO baseline it is measured
 * against. docs/SCHEDULER.md explains both.
 */
import { memoryToAdd, type DeviceCapacity, type Footprint, type JobKind, type JobMode } from "./resources";

export interface QueuedJob {
  id: string;
  userId: string;
  /** Higher runs first. */
  priority: number;
  /** Seconds; orders jobs within a user's queue and, in the baseline, the whole queue. */
  submittedAt: number;
  kind: JobKind;
  mode: JobMode;
  footprint: Footprint;
  /** Seconds of work left at full speed, when there is an estimate; backfill needs one to use a reserved device. */
  estimatedSeconds: number | null;
}

export interface RunningJob {
  id: string;
  userId: string;
  priority: number;
  footprint: Footprint;
  /** Training jobs can be stopped and resumed from a checkpoint; inference, evaluation and export run to the end. */
  preemptible: boolean;
  /** When it is expected to finish, or null when nobody knows. */
  estimatedEndAt: number | null;
  /** Progress since its last checkpoint, in seconds: what preempting it would throw away. */
  secondsSinceCheckpoint: number;
}

/** A device as a policy sees it; build it with `describeDevice` so that the derived fields agree with `jobs`. */
export interface DeviceState {
  capacity: DeviceCapacity;
  /** Jobs placing or running on it. */
  jobs: readonly RunningJob[];
  /** Base model -> number of jobs on this device sharing its one copy. */
  residentBases: ReadonlyMap<string, number>;
  freeMemoryMb: number;
  /** Sum of the compute slots its jobs ask for; above capacity, time-slicing slows each of them. */
  demandedSlots: number;
}

export function describeDevice(capacity: DeviceCapacity, jobs: readonly RunningJob[]): DeviceState {
  const residentBases = new Map<string, number>();
  let usedMemoryMb = 0;
  let demandedSlots = 0;
  for (const job of jobs) {
    const base = job.footprint.sharedBase;
    if (base !== null) {
      const sharers = residentBases.get(base) ?? 0;
      if (sharers === 0) usedMemoryMb += job.footprint.baseMemoryMb;
      residentBases.set(base, sharers + 1);
    }
    usedMemoryMb += job.footprint.ownMemoryMb;
    demandedSlots += job.footprint.computeSlots;
  }
  return { capacity, jobs, residentBases, freeMemoryMb: capacity.memoryMb - usedMemoryMb, demandedSlots };
}

export interface ClusterState {
  now: number;
  devices: readonly DeviceState[];
  /** Jobs waiting for a device, oldest submission first. */
  queue: readonly QueuedJob[];
  /** Compute slots each user's running jobs ask for; build it with `slotsInUseByUser` if not kept up to date. */
  slotsInUseByUser: ReadonlyMap<string, number>;
}

export function slotsInUseByUser(devices: readonly DeviceState[]): Map<string, number> {
  const usage = new Map<string, number>();
  for (const device of devices) {
    for (const job of device.jobs) usage.set(job.userId, (usage.get(job.userId) ?? 0) + job.footprint.computeSlots);
  }
  return usage;
}

type Decision =
  /** Start a queued job on a device; `sharesBase` names the resident base it joins, if any. */
  | { type: "place"; jobId: string; deviceId: string; sharesBase: string | null; backfilled: boolean }
  /** Stop a running job; it goes back to the queue and resumes from its last checkpoint. Listed before the placement it makes room for. */
  | { type: "preempt"; jobId: string; deviceId: string; forJobId: string };

export interface SchedulingPolicy {
  readonly name: string;
  decide(state: ClusterState): Decision[];
}

// ── the baseline ─────────────────────────────────────────────────────────────────────────────────────────────

/**
 * Strict FIFO, one job per device, no sharing: the oldest job starts on the smallest idle device that holds it
 * whole (base weights included); when none does, nothing behind it starts either.
 */
export function createFifoBaselinePolicy(): SchedulingPolicy {
  return {
    name: "fifo-baseline",
    decide(state) {
      const decisions: Decision[] = [];
      const taken = new Set<number>();
      for (const job of state.queue) {
        const needed = memoryToAdd(job.footprint, false);
        let best = -1;
        for (let i = 0; i < state.devices.length; i++) {
          const device = state.devices[i];
          if (device.jobs.length > 0 || taken.has(i) || device.capacity.memoryMb < needed) continue;
          if (best < 0 || device.capacity.memoryMb < state.devices[best].capacity.memoryMb) best = i;
        }
        if (best < 0) break;
        taken.add(best);
        decisions.push({ type: "place", jobId: job.id, deviceId: state.devices[best].capacity.id, sharesBase: null, backfilled: false });
      }
      return decisions;
    },
  };
}

// ── the packing policy ───────────────────────────────────────────────────────────────────────────────────────

export interface PackingPolicyOptions {
  /**
   * A device whose jobs are all LoRA jobs on one base may take more of them than it has compute slots, up to this
   * factor; they time-slice, each slower. 1 turns oversubscription off.
   */
  maxLoraOversubscription: number;
  /** Queued jobs looked at, behind the first blocked one, for backfill in one pass. */
  backfillDepth: number;
  /** Preemptions one pass may make; a bound on how much work one burst of urgent jobs can throw away. */
  maxPreemptionsPerPass: number;
}

const defaultPackingOptions: PackingPolicyOptions = {
  maxLoraOversubscription: 1,
  backfillDepth: 128,
  maxPreemptionsPerPass: 4,
};

/**
 * Priorities first; within a priority, the user with the fewest slots in use goes next (fair share), oldest job
 * of theirs first. A job goes to an idle device if there is one; once there is none, a LoRA job joins a device
 * that already holds its base and has slots to spare, else any device with room; the tightest fit wins each tier. The first job that cannot start may preempt lower-priority training jobs; if it still cannot,
 * it gets a reservation (the device and time it could start as running jobs end) and jobs behind it may backfill
 * anywhere that does not delay that reservation (EASY backfilling).
 */
export function createPackingPolicy(options: Partial<PackingPolicyOptions> = {}): SchedulingPolicy {
  const settings = { ...defaultPackingOptions, ...options };
  return { name: "packing", decide: (state) => new PackingPass(state, settings).run() };
}

/** A device's fit for a job, lower is better: idle, sharing its base, spare slots, time-sliced; then tightness. */
type Placement = { device: number; sharesBase: boolean; score: number };
/** Where and when the blocked head job could start as running jobs end (startsAt is Infinity when never). */
type Reservation = { device: number; startsAt: number };

/**
 * One scheduling pass. It copies the devices' free memory and slots into arrays it updates as it decides, so that
 * later decisions in the pass see earlier ones, without touching the caller's state.
 */
class PackingPass {
  private readonly devices: readonly DeviceState[];
  private readonly freeMemory: Float64Array;
  private readonly demandedSlots: Float64Array;
  private readonly jobCount: Int32Array;
  /** Base counts of devices this pass changed; others are read from their DeviceState. */
  private readonly changedBases = new Map<number, Map<string, number>>();
  private readonly preempted = new Set<string>();
  private readonly usage: Map<string, number>;
  private readonly decisions: Decision[] = [];
  private largestFreeMemory = 0;
  /** The most slots any busy device has to spare (Infinity while one is idle: it takes any job); an upper bound. */
  private largestFreeSlots = 0;
  /**
   * Footprints (with the device they were kept off) that found no device in this pass. Devices only fill up as the
   * pass places jobs, so a footprint that did not fit will not fit later in the pass, until a preemption frees room.
   */
  private readonly noRoom = new Set<string>();

  constructor(
    private readonly state: ClusterState,
    private readonly options: PackingPolicyOptions,
  ) {
    this.devices = state.devices;
    const n = this.devices.length;
    this.freeMemory = new Float64Array(n);
    this.demandedSlots = new Float64Array(n);
    this.jobCount = new Int32Array(n);
    this.usage = new Map(state.slotsInUseByUser);
    for (let i = 0; i < n; i++) {
      const device = this.devices[i];
      this.freeMemory[i] = device.freeMemoryMb;
      this.demandedSlots[i] = device.demandedSlots;
      this.jobCount[i] = device.jobs.length;
      if (device.freeMemoryMb > this.largestFreeMemory) this.largestFreeMemory = device.freeMemoryMb;
      const spareSlots = device.jobs.length === 0 ? Infinity : device.capacity.computeSlots - device.demandedSlots;
      if (spareSlots > this.largestFreeSlots) this.largestFreeSlots = spareSlots;
    }
  }

  run(): Decision[] {
    if (this.state.queue.length === 0) return this.decisions;
    let head: QueuedJob | null = null;
    // The head's reservation is computed when a job behind it first finds room (nothing has changed since the head
    // was blocked): a pass in which nothing backfills, the common case on a busy cluster, needs none.
    let reservation: Reservation | null | undefined;
    let lookedAtAfterHead = 0;
    let preemptions = 0;

    for (const job of this.fairShareOrder()) {
      if (head !== null && ++lookedAtAfterHead > this.options.backfillDepth) break;
      let placement = this.findPlacement(job, -1);
      if (placement && head !== null) {
        if (reservation === undefined) reservation = this.reserveFor(head);
        // Only the reserved device is closed to it, unless it would be done before the head could start there.
        if (reservation !== null && placement.device === reservation.device && !this.endsBefore(job, reservation)) {
          placement = this.findPlacement(job, reservation.device);
        }
      }
      if (placement) {
        this.place(job, placement, head !== null);
        continue;
      }
      if (head !== null) continue;
      // A job may stop lower-priority training jobs; preemptFor finds none when no running job is below it.
      if (preemptions < this.options.maxPreemptionsPerPass) {
        const victims = this.preemptFor(job);
        if (victims > 0) {
          preemptions += victims;
          const afterPreemption = this.findPlacement(job, -1);
          if (afterPreemption) {
            this.place(job, afterPreemption, false);
            continue;
          }
        }
      }
      head = job;
    }
    return this.decisions;
  }

  /** Whether a backfilled job's estimate ends before the blocked head's reserved start. */
  private endsBefore(job: QueuedJob, reservation: Reservation): boolean {
    return job.estimatedSeconds !== null && Number.isFinite(reservation.startsAt) && this.state.now + job.estimatedSeconds <= reservation.startsAt;
  }

  /**
   * Queued jobs in the order they get a chance: priority classes from the highest; within one, repeatedly the
   * user with the fewest slots in use (counting what this pass has placed), their oldest job first.
   */
  private *fairShareOrder(): Generator<QueuedJob> {
    const byPriority = new Map<number, Map<string, QueuedJob[]>>();
    for (const job of this.state.queue) {
      let users = byPriority.get(job.priority);
      if (!users) byPriority.set(job.priority, (users = new Map()));
      const jobs = users.get(job.userId);
      if (jobs) jobs.push(job);
      else users.set(job.userId, [job]);
    }
    const priorities = [...byPriority.keys()].sort((a, b) => b - a);
    for (const priority of priorities) {
      const lines = [...byPriority.get(priority)!].map(([userId, jobs]) => ({ userId, jobs, next: 0 }));
      while (lines.length > 0) {
        let pick = 0;
        for (let k = 1; k < lines.length; k++) {
          const a = lines[k];
          const b = lines[pick];
          const usageA = this.usage.get(a.userId) ?? 0;
          const usageB = this.usage.get(b.userId) ?? 0;
          if (usageA < usageB || (usageA === usageB && a.jobs[a.next].submittedAt < b.jobs[b.next].submittedAt)) pick = k;
        }
        const line = lines[pick];
        yield line.jobs[line.next++];
        if (line.next === line.jobs.length) lines.splice(pick, 1);
      }
    }
  }

  private baseSharers(device: number, base: string): number {
    const changed = this.changedBases.get(device);
    return changed ? (changed.get(base) ?? 0) : (this.devices[device].residentBases.get(base) ?? 0);
  }

  private basesOf(device: number): Map<string, number> {
    let bases = this.changedBases.get(device);
    if (!bases) this.changedBases.set(device, (bases = new Map(this.devices[device].residentBases)));
    return bases;
  }

  /** The best device for `job`, `excluded` left out (-1 for none), or null when none has room. */
  private findPlacement(job: QueuedJob, excluded: number): Placement | null {
    const { footprint } = job;
    const base = footprint.sharedBase;
    // Most passes find nothing free: skip the scan when even the emptiest device is too small.
    if (footprint.ownMemoryMb > this.largestFreeMemory) return null;
    if (footprint.computeSlots > this.largestFreeSlots && this.options.maxLoraOversubscription <= 1) return null;
    const key = `${footprint.ownMemoryMb}|${footprint.computeSlots}|${base}|${footprint.baseMemoryMb}|${excluded}`;
    if (this.noRoom.has(key)) return null;

    let best: Placement | null = null;
    for (let i = 0; i < this.devices.length; i++) {
      if (i === excluded) continue;
      const sharesBase = base !== null && this.baseSharers(i, base) > 0;
      const needed = memoryToAdd(footprint, sharesBase);
      if (this.freeMemory[i] < needed) continue;
      const slots = this.devices[i].capacity.computeSlots;
      const slotsAfter = this.demandedSlots[i] + footprint.computeSlots;
      // An idle device first (co-located jobs slow each other down, so packing only pays once devices run
      // out), then a device already holding the base, then any device with slots to spare, then time-slicing.
      let tier: number;
      if (this.jobCount[i] === 0) tier = 0;
      else if (slotsAfter <= slots) tier = sharesBase ? 1 : 2;
      else if (sharesBase && this.jobCount[i] === this.baseSharers(i, base!) && slotsAfter <= slots * this.options.maxLoraOversubscription) tier = 3;
      else continue;
      // Tightest fit: least slot and memory left over, so big jobs still find room elsewhere.
      const slack = Math.max(0, slots - slotsAfter) / slots + (this.freeMemory[i] - needed) / this.devices[i].capacity.memoryMb;
      const score = tier * 4 + slack;
      if (best === null || score < best.score) best = { device: i, sharesBase, score };
    }
    if (best === null) this.noRoom.add(key);
    return best;
  }

  private place(job: QueuedJob, placement: Placement, backfilled: boolean): void {
    const i = placement.device;
    const base = job.footprint.sharedBase;
    this.freeMemory[i] -= memoryToAdd(job.footprint, placement.sharesBase);
    this.demandedSlots[i] += job.footprint.computeSlots;
    this.jobCount[i] += 1;
    if (base !== null) {
      const bases = this.basesOf(i);
      const sharers = bases.get(base) ?? 0;
      bases.set(base, sharers + 1);
      // A base newly resident here lets other jobs on it fit in less memory than when they found no room.
      if (sharers === 0) this.noRoom.clear();
    }
    this.usage.set(job.userId, (this.usage.get(job.userId) ?? 0) + job.footprint.computeSlots);
    this.decisions.push({
      type: "place",
      jobId: job.id,
      deviceId: this.devices[i].capacity.id,
      sharesBase: placement.sharesBase ? base : null,
      backfilled,
    });
  }

  /**
   * Frees room for `job` on the device where that costs least: fewest lower-priority jobs stopped, then least
   * work lost since their checkpoints. Returns how many jobs it preempted (0 when no device would do).
   */
  private preemptFor(job: QueuedJob): number {
    let best: { device: number; victims: RunningJob[]; lost: number } | null = null;
    for (let i = 0; i < this.devices.length; i++) {
      const device = this.devices[i];
      // The jobs that stay must leave room for its slots even if every candidate goes; else skip the device (a
      // necessary condition: jobs placed in this pass stay too, and the full check below counts them).
      let staying = 0;
      let stayingSlots = 0;
      let anyCandidate = false;
      const anyPreempted = this.preempted.size > 0;
      for (const r of device.jobs) {
        if (anyPreempted && this.preempted.has(r.id)) continue;
        if (r.priority >= job.priority || !r.preemptible) {
          staying++;
          stayingSlots += r.footprint.computeSlots;
        } else anyCandidate = true;
      }
      if (!anyCandidate || (staying > 0 && stayingSlots + job.footprint.computeSlots > device.capacity.computeSlots)) continue;
      const candidates: { job: RunningJob; lost: number }[] = [];
      for (const r of device.jobs) {
        if (r.preemptible && r.priority < job.priority && !this.preempted.has(r.id)) candidates.push({ job: r, lost: r.secondsSinceCheckpoint });
      }
      candidates.sort((a, b) => a.job.priority - b.job.priority || a.lost - b.lost);
      const bases = new Map(this.changedBases.get(i) ?? device.residentBases);
      let free = this.freeMemory[i];
      let slots = this.demandedSlots[i];
      let count = this.jobCount[i];
      const victims: RunningJob[] = [];
      let lost = 0;
      for (const { job: victim, lost: victimLost } of candidates) {
        if (best !== null && victims.length > best.victims.length) break;
        victims.push(victim);
        lost += victimLost;
        free += victim.footprint.ownMemoryMb;
        slots -= victim.footprint.computeSlots;
        count -= 1;
        const victimBase = victim.footprint.sharedBase;
        if (victimBase !== null) {
          const left = (bases.get(victimBase) ?? 1) - 1;
          bases.set(victimBase, left);
          if (left === 0) free += victim.footprint.baseMemoryMb;
        }
        const base = job.footprint.sharedBase;
        const sharesBase = base !== null && (bases.get(base) ?? 0) > 0;
        const fitsCompute = count === 0 || slots + job.footprint.computeSlots <= device.capacity.computeSlots;
        if (free >= memoryToAdd(job.footprint, sharesBase) && fitsCompute) {
          if (best === null || victims.length < best.victims.length || (victims.length === best.victims.length && lost < best.lost))
            best = { device: i, victims: [...victims], lost };
          break;
        }
      }
    }
    if (best === null) return 0;
    for (const victim of best.victims) this.preempt(victim, best.device, job);
    return best.victims.length;
  }

  private preempt(victim: RunningJob, device: number, forJob: QueuedJob): void {
    this.preempted.add(victim.id);
    this.freeMemory[device] += victim.footprint.ownMemoryMb;
    this.demandedSlots[device] -= victim.footprint.computeSlots;
    this.jobCount[device] -= 1;
    const base = victim.footprint.sharedBase;
    if (base !== null) {
      const bases = this.basesOf(device);
      const left = (bases.get(base) ?? 1) - 1;
      if (left === 0) {
        bases.delete(base);
        this.freeMemory[device] += victim.footprint.baseMemoryMb;
      } else bases.set(base, left);
    }
    if (this.freeMemory[device] > this.largestFreeMemory) this.largestFreeMemory = this.freeMemory[device];
    const spareSlots = this.jobCount[device] === 0 ? Infinity : this.devices[device].capacity.computeSlots - this.demandedSlots[device];
    if (spareSlots > this.largestFreeSlots) this.largestFreeSlots = spareSlots;
    this.noRoom.clear();
    this.usage.set(victim.userId, (this.usage.get(victim.userId) ?? 0) - victim.footprint.computeSlots);
    this.decisions.push({ type: "preempt", jobId: victim.id, deviceId: this.devices[device].capacity.id, forJobId: forJob.id });
  }

  /**
   * The device and time at which the blocked job could start if nothing new arrived: running jobs end at their
   * estimates and give back their memory and slots. Jobs without an estimate are taken never to end. When no
   * device ever frees enough, the job keeps the device that could hold it with the fewest jobs on it, so that
   * backfill cannot fill that one for good.
   */
  private reserveFor(job: QueuedJob): Reservation | null {
    const { footprint } = job;
    const base = footprint.sharedBase;
    const alone = memoryToAdd(footprint, false);
    let best: Reservation | null = null;
    let fallback = -1;
    const ending: { end: number; job: RunningJob }[] = [];
    for (let i = 0; i < this.devices.length; i++) {
      const device = this.devices[i];
      if (device.capacity.memoryMb < alone) continue;
      if (fallback < 0 || this.jobCount[i] < this.jobCount[fallback]) fallback = i;
      const headSharesBase = base !== null && this.baseSharers(i, base) > 0;
      const needed = memoryToAdd(footprint, headSharesBase);
      // Jobs that end before the best start found so far, soonest first; the others cannot make this device better.
      ending.length = 0;
      for (const running of device.jobs) {
        if (this.preempted.has(running.id)) continue;
        const end = running.estimatedEndAt;
        if (end === null || (best !== null && end >= best.startsAt)) continue;
        ending.push({ end, job: running });
      }
      if (ending.length === 0) continue;
      ending.sort((a, b) => a.end - b.end);
      let free = this.freeMemory[i];
      let slots = this.demandedSlots[i];
      let count = this.jobCount[i];
      let sharers: Map<string, number> | null = null;
      for (const { end, job: running } of ending) {
        free += running.footprint.ownMemoryMb;
        slots -= running.footprint.computeSlots;
        count -= 1;
        const runningBase = running.footprint.sharedBase;
        if (runningBase !== null && runningBase !== (headSharesBase ? base : null)) {
          sharers ??= new Map(device.residentBases);
          const left = (sharers.get(runningBase) ?? 1) - 1;
          sharers.set(runningBase, left);
          if (left === 0) free += running.footprint.baseMemoryMb;
        }
        if (free >= needed && (count === 0 || slots + footprint.computeSlots <= device.capacity.computeSlots)) {
          best = { device: i, startsAt: Math.max(this.state.now, end) };
          break;
        }
      }
    }
    if (best !== null) return best;
    return fallback < 0 ? null : { device: fallback, startsAt: Infinity };
  }
}
