/**
 * A curriculum from the environment (online difficulty filtering): an environment that declares levels of
 * difficulty (`defineEnvironment({ difficulty: { min, max } })`) is trained at the level where the policy succeeds
 * sometimes but not always, the only place a group-relative estimator learns anything (a group that always or
 * never succeeds has equal returns, so zero advantages).
 *
 * The trainer (lib/rl/train.ts) keeps one `Curriculum` per run. Each step's prompts draw their level from it
 * (`curriculumLevels`: mostly the current level, every `probeEvery`-th group one level above, to probe it); after
 * the step has played, it hands over each group's success (the mean of its episodes' scores, 1 = full marks) and
 * the curriculum moves the current level at most one level (`settle`). Its state lives in the algorithm's memory,
 * so a checkpoint carries it and a resumed run goes on at its level with the same prompts.
 *
 * The rule, and why these constants (test/unit/rl/curriculum.test.ts simulates it; figures from a simulation of
 * 16 groups of 8 episodes a step, success a logistic function of skill minus level, 5 seeds each):
 * - Success at a level is a running mean over its groups, then a moving average over the last `window` (16)
 *   groups: a starter's step plays 12 groups at the current level, so the estimate spans about one step; its
 *   noise at a success rate of 0.5 is about ±0.05 (one standard deviation, 96 episodes), well inside the band.
 * - The level moves up when its success reaches `upAt` (0.8) and down when it falls to `downAt` (0.2), each on at
 *   least `minGroups` (8) groups played at that level since the last move. Within that band a group's episodes
 *   mostly differ in their returns. A policy that stays put at a success of 0.73 saw 0.8 needless moves in 200
 *   steps; with a window of 8 and 4 groups, 7.6; with thresholds 0.7 and 0.3, 25. The price is lag: a policy
 *   that masters a level every 4 steps is in the band 84% of its steps (window 8: 99%); one every 7.5 steps or
 *   slower, all of them.
 * - A move up takes the probe's groups (played at the level above) as the new level's evidence; a move down keeps
 *   the level left as the new probe level's. So a level is never judged on nothing, and a level already shown
 *   mastered by the probes is left after one step.
 * - No move up while the level above has shown, on half of `minGroups` probes (one starter step's), a success at
 *   or below `downAt`: it would only come back down, one level up and down each step. The policy keeps meeting
 *   that level in the probes (a quarter of the groups) until it succeeds there at times.
 * With skill rising through 8 levels over 150 steps, the current level's true success stayed within 0.1 to 0.9
 * in every step (a run held at its start level: 14%), with no reversal.
 */
import type { Difficulty } from "@/lib/sdk/environment";

export const curriculumRule = {
  /** Success at or above this moves the level up. */
  upAt: 0.8,
  /** Success at or below this moves the level down. */
  downAt: 0.2,
  /** Groups the moving average spans. */
  window: 16,
  /** Groups played at a level, since the last move, before it may move. */
  minGroups: 8,
  /** Every this-many-th group of a step (rotating with the step) probes the level above. */
  probeEvery: 4,
} as const;

/** What a level's success rate is known from: its moving average and how many groups it has seen. */
type Evidence = { success: number; groups: number };

const keys = {
  level: "curriculum/level",
  success: "curriculum/success",
  groups: "curriculum/groups",
  probeSuccess: "curriculum/probe_success",
  probeGroups: "curriculum/probe_groups",
} as const;

/**
 * The level of each of a step's `count` prompts: the current `level`, except every `probeEvery`-th (the rotation
 * shifting with the step and the round), one above, while there is a level above. A pure function of (step, round,
 * level), so a resumed run sees the same prompts.
 */
export function curriculumLevels(count: number, step: number, round: number, level: number, range: Pick<Difficulty, "max">): number[] {
  const { probeEvery } = curriculumRule;
  return Array.from({ length: count }, (_, i) => (level < range.max && (i + step + round) % probeEvery === probeEvery - 1 ? level + 1 : level));
}

/** The current level of a run and what is known of it and of the level above (see the file's comment). */
export class Curriculum {
  level: number;
  private current: Evidence = { success: 0, groups: 0 };
  private probe: Evidence = { success: 0, groups: 0 };

  /** Starts at `range.start ?? range.min`, or where `memory` (a checkpoint's) says a run was. */
  constructor(
    readonly range: Difficulty,
    memory: Record<string, number> = {},
  ) {
    const saved = memory[keys.level];
    this.level = saved !== undefined && Number.isInteger(saved) ? Math.min(range.max, Math.max(range.min, saved)) : (range.start ?? range.min);
    if (saved === this.level) {
      this.current = { success: memory[keys.success] ?? 0, groups: memory[keys.groups] ?? 0 };
      this.probe = { success: memory[keys.probeSuccess] ?? 0, groups: memory[keys.probeGroups] ?? 0 };
    }
  }

  /** One group's success (its episodes' mean score) at `level`; groups of other levels are ignored. */
  observe(level: number, success: number): void {
    const evidence = level === this.level ? this.current : level === this.level + 1 ? this.probe : null;
    if (!evidence || !Number.isFinite(success)) return;
    evidence.groups += 1;
    evidence.success += (Math.min(1, Math.max(0, success)) - evidence.success) / Math.min(evidence.groups, curriculumRule.window);
  }

  /** After a step's groups were observed: moves the level one up or down when its evidence says so. */
  settle(): void {
    const { upAt, downAt, minGroups } = curriculumRule;
    if (this.current.groups < minGroups) return;
    const aboveFails = this.probe.groups >= minGroups / 2 && this.probe.success <= downAt;
    if (this.current.success >= upAt && this.level < this.range.max && !aboveFails) {
      this.level += 1;
      this.current = this.probe;
      this.probe = { success: 0, groups: 0 };
    } else if (this.current.success <= downAt && this.level > this.range.min) {
      this.level -= 1;
      this.probe = this.current;
      this.current = { success: 0, groups: 0 };
    }
  }

  /** Writes the state into `memory` (the algorithm's, saved with each checkpoint). */
  save(memory: Record<string, number>): void {
    memory[keys.level] = this.level;
    memory[keys.success] = this.current.success;
    memory[keys.groups] = this.current.groups;
    memory[keys.probeSuccess] = this.probe.success;
    memory[keys.probeGroups] = this.probe.groups;
  }
}
