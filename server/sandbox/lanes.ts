/**
 * Lanes: a batch of episodes split into a few parts that take turns, so that the policy samples one lane's
 * actions while the sandbox's thread steps another's (`runSandboxedEpisodes`).
 *
 * The order of everything that draws random numbers is fixed by the data, never by timing: lanes sample in turn
 * (0, 1, …, 0, 1, …, skipping lanes whose episodes have all ended), whether or not the steps overlap. The
 * sandbox runs one batch at a time, and a batch is posted only while no other lane is running the protocol's own
 * code (which may cross into the sandbox synchronously: the summary of an episode cut short).
 */
import type { DatasetRow } from "@/lib/sdk/environment";
import type { Protocol } from "@/lib/sdk/protocol";

/**
 * How many lanes a protocol's episodes are played in when they are reset in the batch (no `next` prepared
 * them). The policy waits for two crossings only: the first lane's resets and the last lane's final steps; every
 * other crossing runs while a lane samples. A single-turn episode is a reset and one step, so those two are a
 * large part of the sandbox's work: four lanes cut them to a quarter of the batch each (arithmetic, 32 × 8:
 * 21-24% added to a rollout's wall time against 35-36% with two, measured side by side; eight: 29-33%). A
 * multi-turn episode crosses once a round, and each lane adds its own switch every round: two lanes
 * (guess-number, 16 × 8: 7-10% with two, 18-21% with four).
 */
export function defaultLanes(protocol: Pick<Protocol, "name">): number {
  return protocol.name === "single-turn" ? 4 : 2;
}

/**
 * The lanes' relative sizes. Reset ahead, a single-turn batch has only its steps to cross, and the policy waits
 * only for the last lane's: the lanes taper toward the end (9 : 5 : 2), so each lane's steps still fit in the
 * next lane's sampling (a step costs the sandbox a quarter to a third of what sampling its reply costs the
 * smallest built-in policy) while the last crossing is an eighth of the batch. The host thread reads the first
 * two lanes' answers while that crossing runs (`LaneSchedule.readTurn`), and this shape makes the two take about
 * as long: arithmetic, 32 × 8, 10.6% added against 14.3% for 4 : 2 : 1 and 13.9% for 19 : 10 : 3 (the base's
 * sampler, the three side by side in one process; with a synthetic policy 9.4-11.0% against 12.3-12.7% and
 * 10.3-10.5%). Quartering (12 : 3 : 1) left a sixteenth, but the middle lane's steps outran the last lane's
 * sampling. Otherwise `defaultLanes` parts of equal size.
 */
export function laneShape(protocol: Pick<Protocol, "name">, prepared: boolean): number | number[] {
  return prepared && protocol.name === "single-turn" ? [9, 5, 2] : defaultLanes(protocol);
}

/**
 * Where each lane begins in `starts`: `lanes` parts of about equal size, or of the relative sizes given, cut only
 * where one group of identical starts (a GRPO group: same seed, sample and level) ends, so a group's first prompts are
 * still forked in one call. Fewer parts when there are fewer groups.
 */
export function laneStarts(starts: readonly { seed: number; sample?: DatasetRow; difficulty?: number }[], lanes: number | readonly number[]): number[] {
  if (typeof lanes === "number" && (!Number.isInteger(lanes) || lanes < 1)) throw new Error(`lanes must be a whole number of at least 1; got ${String(lanes)}`);
  const weights = typeof lanes === "number" ? new Array<number>(lanes).fill(1) : lanes;
  if (weights.length === 0 || !weights.every((weight) => Number.isFinite(weight) && weight > 0)) {
    throw new Error(`lane sizes must be a list of positive numbers; got [${weights.join(", ")}]`);
  }
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  const boundaries: number[] = [];
  for (let i = 1; i < starts.length; i++) {
    const [start, previous] = [starts[i]!, starts[i - 1]!];
    if (start.seed !== previous.seed || start.sample !== previous.sample || start.difficulty !== previous.difficulty) boundaries.push(i);
  }
  const cuts = [0];
  let before = 0;
  for (let lane = 1; lane < weights.length; lane++) {
    before += weights[lane - 1]!;
    const target = (before * starts.length) / total;
    let best: number | null = null;
    for (const boundary of boundaries) {
      if (boundary <= cuts.at(-1)!) continue;
      if (best === null || Math.abs(boundary - target) < Math.abs(best - target)) best = boundary;
    }
    if (best !== null) cuts.push(best);
  }
  return cuts;
}

/** Who samples next and when a lane may post its steps. One instance per batch of episodes. */
export class LaneSchedule {
  private turn = 0;
  /**
   * Running the protocol's code (from a crossing's answer to the next request): may cross synchronously. A lane
   * starts with its resets, a crossing, so none is busy before.
   */
  private readonly busy: boolean[];
  private readonly finished: boolean[];
  private stepping = false;
  /** The lane whose batch is in flight (while `stepping`). */
  private steppingLane = -1;
  /** Batches posted so far, and the number of each lane's last (-1: none yet). */
  private posts = 0;
  private readonly postedAs: number[];
  /** Lanes waiting to post a batch. */
  private readonly waiting = new Set<number>();
  private failure: { error: unknown } | null = null;
  private wakeups: (() => void)[] = [];

  /**
   * `stall`: called whenever nothing can go on before the batch in flight is answered, so that the caller may
   * block for it (`runSandboxedEpisodes` does) rather than let the event loop notice it:
   *  - a lane must wait to post only because of that batch, and no other lane is in the protocol's code (the
   *    lane posting holds the turn, so none samples);
   *  - that batch's lane is the last one still playing (`lastInFlight`): once it has posted, or once the other
   *    lanes have finished.
   */
  constructor(
    readonly lanes: number,
    private readonly stall?: () => void,
  ) {
    this.busy = new Array<boolean>(lanes).fill(false);
    this.finished = new Array<boolean>(lanes).fill(false);
    this.postedAs = new Array<number>(lanes).fill(-1);
  }

  /** The first error of any lane: every lane still waiting rethrows it. */
  get error(): { error: unknown } | null {
    return this.failure;
  }

  /**
   * Waits until `lane` may sample (it has left the protocol's code): its turn, and no other lane able to post a
   * batch now (so that batch runs while this lane samples, not after).
   */
  async sampleTurn(lane: number): Promise<void> {
    this.busy[lane] = false;
    this.changed();
    await this.until(() => this.turn === lane && ![...this.waiting].some((other) => this.mayCross(other)));
  }

  /**
   * Waits until `lane` may post a batch (the sandbox is idle and no other lane is in the protocol's code), then
   * calls `post` at once, in the same check, and returns what it started; `answered` must follow its answer,
   * and `crossed` when the lane reads it.
   */
  async crossing<T>(lane: number, post: () => Promise<T>): Promise<{ answer: Promise<T> }> {
    let started: { answer: Promise<T> } | null = null;
    this.waiting.add(lane);
    try {
      await this.until(() => {
        if (!this.mayCross(lane)) {
          if (this.stepping && this.stall && this.busy.every((busy, other) => other === lane || !busy)) this.stall();
          return false;
        }
        this.stepping = true;
        this.steppingLane = lane;
        this.postedAs[lane] = this.posts++;
        this.waiting.delete(lane);
        let answer: Promise<T>;
        try {
          answer = post();
        } catch (error) {
          answer = Promise.reject(error);
        }
        started = { answer };
        return true;
      });
    } finally {
      this.waiting.delete(lane);
    }
    this.changed();
    if (this.lastInFlight) this.stall?.();
    return started!;
  }

  private mayCross(lane: number): boolean {
    return !this.stepping && this.busy.every((busy, other) => other === lane || !busy);
  }

  /** The next lane may sample now. */
  passTurn(lane: number): void {
    if (this.turn !== lane) return;
    for (let k = 1; k <= this.lanes; k++) {
      const next = (lane + k) % this.lanes;
      if (!this.finished[next]) {
        this.turn = next;
        break;
      }
    }
    this.changed();
  }

  /** Every lane but `lane` has ended all its episodes. */
  othersFinished(lane: number): boolean {
    return this.finished.every((finished, other) => finished || other === lane);
  }

  /** The sandbox has answered the batch in flight: another lane may post one, before that answer is read. */
  answered(): void {
    this.stepping = false;
    this.changed();
  }

  /**
   * Waits until `lane` may read its crossing's answer: once every other lane still playing has posted a batch
   * after it. A lane's answer arrives while the next lane samples, but reading it (checking the answers, the
   * protocol's code for each episode) is this thread's work, which would delay that lane's post and the next
   * lane's sampling; read after them, it fills the time this thread waits for the last lane's steps. The order
   * is the batches' order, never the timing: any crossing a lane makes while it reads comes after the same posts.
   */
  async readTurn(lane: number): Promise<void> {
    await this.until(() => this.finished.every((finished, other) => finished || other === lane || this.postedAs[other]! > this.postedAs[lane]!));
  }

  /** The batch in flight is the only thing left to wait for: its lane is the last one still playing. */
  get lastInFlight(): boolean {
    return this.stepping && this.othersFinished(this.steppingLane);
  }

  /** `lane`'s crossing has been answered (or failed; see `answered`) and is read now: it goes back to the protocol's code. */
  crossed(lane: number): void {
    this.busy[lane] = true;
    this.changed();
  }

  /** Every episode of `lane` has ended. */
  finish(lane: number): void {
    this.finished[lane] = true;
    this.busy[lane] = false;
    this.passTurn(lane);
    this.changed();
    // Lanes read their answers late, so the last lane may be waiting for its own already.
    if (this.lastInFlight) this.stall?.();
  }

  abort(error: unknown): void {
    this.failure ??= { error };
    this.changed();
  }

  private async until(ready: () => boolean): Promise<void> {
    for (;;) {
      if (this.failure) throw this.failure.error;
      if (ready()) return;
      await new Promise<void>((resolve) => this.wakeups.push(resolve));
    }
  }

  private changed(): void {
    const wakeups = this.wakeups;
    this.wakeups = [];
    for (const wake of wakeups) wake();
  }
}
