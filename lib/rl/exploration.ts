/**
 * Exploration when a run sees no signal: the sampling temperature rises while steps find no group whose rewards
 * differ (nothing to learn from), and falls back towards the configured temperature once most groups carry a
 * signal. A policy that never samples a rewarded answer at its temperature may at a higher one; the update is
 * taken at the temperature the step sampled at, so the loss compares like with like.
 *
 * The rule: after `PATIENCE` steps in a row without a signal (and not every group mastered), +`RAISE` a step (up to
 * `algorithm.exploreTemperature`); while at least half the groups carry one, or all are mastered, −`SETTLE` a step
 * (down to the configured temperature); in between, it holds. Raising fast and settling slowly keeps a signal once found: dropping at once went back to where none was.
 */

/** Steps without a signal before the temperature rises (one step of bad luck is no reason to explore). */
const PATIENCE = 2;
/** How much the temperature rises after each step without a signal, once past PATIENCE. */
const RAISE = 0.25;
/** How much it falls back after a step in which at least half the groups carried a signal. */
const SETTLE = 0.05;

/** The keys of the algorithm's memory (saved with checkpoints) that hold the schedule's state. */
const KEYS = { temperature: "exploration/temperature", streak: "exploration/streak" } as const;

export class Exploration {
  constructor(
    /** the configured sampling temperature: where the schedule starts and settles */
    private readonly base: number,
    /** the highest temperature it may reach (`algorithm.exploreTemperature`); at or below `base`, it is off */
    private readonly max: number,
    /** the algorithm's memory: the state is kept there, so a resumed run explores as it did */
    private readonly memory: Record<string, number>,
  ) {}

  get enabled(): boolean {
    return this.max > this.base;
  }

  /** The temperature the next step samples at. */
  get temperature(): number {
    return this.enabled ? (this.memory[KEYS.temperature] ?? this.base) : this.base;
  }

  /**
   * After a step: `signalShare` is the share of its groups whose rewards differed (`train/signal_groups`),
   * `masteredShare` the share whose episodes all scored full marks (`train/mastered_groups`). A step whose groups
   * are all mastered is a solved task, not a search that found nothing: it settles rather than explores.
   */
  observe(signalShare: number, masteredShare = 0): void {
    if (!this.enabled) return;
    const stuck = signalShare === 0 && masteredShare < 1;
    const streak = stuck ? (this.memory[KEYS.streak] ?? 0) + 1 : 0;
    let temperature = this.temperature;
    if (streak >= PATIENCE) temperature = Math.min(this.max, temperature + RAISE);
    else if (signalShare >= 0.5 || masteredShare === 1) temperature = Math.max(this.base, temperature - SETTLE);
    this.memory[KEYS.streak] = streak;
    // Rounded so that a long run's sums of steps land on the same values on every machine.
    this.memory[KEYS.temperature] = Math.round(temperature * 1e6) / 1e6;
  }
}
