/**
 * Run health: the signs that a run cannot learn, read from each training step's rollouts and update. A run
 * whose episodes end before their first turn, are mostly cut off, whose actions are mostly invalid, whose rewards
 * are the same within every group, or whose gradient is zero, says so (once per kind) instead of finishing
 * "completed" with nothing learned.
 */
import type { Trajectory } from "@/lib/sdk/protocol";
import { hasSignal } from "./algorithm";

export const healthCodes = ["no-turns", "truncated", "invalid-actions", "no-signal", "zero-gradient"] as const;
export type HealthCode = (typeof healthCodes)[number];
export type HealthWarning = { code: HealthCode; step: number; message: string };

/** Steps a sign must last before it is reported (one step of bad luck is not a broken run). */
const PERSIST: Record<HealthCode, number> = { "no-turns": 1, truncated: 3, "invalid-actions": 3, "no-signal": 5, "zero-gradient": 3 };

export class RunHealth {
  private readonly streaks = new Map<HealthCode, number>();
  private readonly raised = new Set<HealthCode>();
  /**
   * Whether a step has had a learning signal yet (rewards that differ within a group, a gradient). Equal rewards
   * and a zero gradient are a broken run only before that: a policy that has learned its task answers each prompt
   * the same way, and then they are what success looks like.
   */
  private learned = false;

  constructor(private readonly context: { contextLength: number; maxTokens: number }) {}

  /** The warnings this step raises for the first time. */
  observe(step: number, groups: Trajectory[][], metrics: Record<string, number>): HealthWarning[] {
    const episodes = groups.flat();
    if (episodes.length === 0) return [];
    const turns = episodes.reduce((n, t) => n + t.turns.length, 0);
    const truncated = episodes.filter((t) => t.truncated).length / episodes.length;
    const invalid = turns === 0 ? 0 : episodes.reduce((n, t) => n + t.invalidActions, 0) / turns;
    const sized = groups.filter((group) => group.length > 1);
    const flat = sized.length > 0 && !sized.some(hasSignal);
    const gradNorm = metrics["train/grad_norm"];
    const signal = !flat && gradNorm !== undefined && gradNorm > 0;
    // Every episode scored full marks (the environment's own score, 1 by convention): equal rewards and no gradient
    // are what a solved task looks like (a run that imitated a demonstrator first starts here), not a broken run.
    const solved = episodes.every((t) => t.score >= 1);
    const pct = (share: number) => `${Math.round(share * 100)}%`;
    const signs: [HealthCode, boolean, () => string][] = [
      [
        "no-turns",
        turns === 0,
        () =>
          `every episode of step ${step} ended before its first turn: the prompt and the reply (agent.sampling.maxTokens=${this.context.maxTokens}) ` +
          `do not fit the base's context of ${this.context.contextLength} tokens. Pick a base with a longer context, or shorten the system prompt and observation`,
      ],
      [
        "truncated",
        turns > 0 && truncated >= 0.5,
        () =>
          `${pct(truncated)} of step ${step}'s episodes were cut off (maxTurns, or the context filled up) for ${PERSIST.truncated} steps: most episodes never reach their end or their reward`,
      ],
      [
        "invalid-actions",
        invalid >= 0.5,
        () =>
          `${pct(invalid)} of step ${step}'s actions were invalid for ${PERSIST["invalid-actions"]} steps: declare the legal actions (actions) so sampling is held to them, or start from a base that writes this format (SFT on a demonstrator)`,
      ],
      [
        "no-signal",
        flat && !this.learned && !solved,
        () =>
          `rewards were the same within every group in each of the first ${PERSIST["no-signal"]} steps (up to step ${step}): group-relative advantages are all zero, so nothing is learned. Make the reward tell better actions from worse, or raise the sampling temperature`,
      ],
      [
        "zero-gradient",
        turns > 0 && !this.learned && !solved && (gradNorm === undefined || gradNorm === 0),
        () => `the gradient was zero in each of the first ${PERSIST["zero-gradient"]} steps (up to step ${step}): the update does not move the policy`,
      ],
    ];
    if (signal) this.learned = true;
    const raised: HealthWarning[] = [];
    for (const [code, present, message] of signs) {
      const streak = present ? (this.streaks.get(code) ?? 0) + 1 : 0;
      this.streaks.set(code, streak);
      if (streak >= PERSIST[code] && !this.raised.has(code)) {
        this.raised.add(code);
        raised.push({ code, step, message: message() });
      }
    }
    return raised;
  }
}
