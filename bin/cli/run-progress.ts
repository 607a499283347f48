/**
 * What `tinkerlab run` shows of the run it follows, one update at a time. A run that resumes (after a pause, or
 * requeued when its worker was lost) goes back to its last checkpoint and trains the steps after it again: the bar
 * keeps the highest step reached, says "resumed from step N" as the run page does, and a line says once what
 * happened. The time left comes from the recent steps' durations, "—" until a step has been timed.
 */
import type { RunUpdate } from "../../lib/client";
import { formatDuration, secondsLeft } from "../../lib/duration";

/** The bar's fields: `value` never goes down; `left`, `reward` and `resumed` are text to show as they are. */
export interface ProgressView {
  value: number;
  total: number;
  reward: string;
  left: string;
  status: string;
  resumed: string;
}

export class RunProgress {
  private reached = 0;
  private lastStep: number | null = null;
  private resumedFrom: number | null = null;
  private readonly stepSeconds: number[] = [];

  constructor(private readonly runId: string) {}

  /** Takes one look at the run: the bar to show, and the line that says it went back to an earlier step (or null). */
  observe(update: RunUpdate): { view: ProgressView; note: string | null } {
    const { run } = update;
    for (const point of update.points) if (point.name === "perf/step_seconds") this.stepSeconds.push(point.value);
    this.stepSeconds.splice(0, Math.max(0, this.stepSeconds.length - 10));
    let note: string | null = null;
    if (this.lastStep !== null) {
      const resumed = run.resumedFromStep !== null && run.resumedFromStep !== this.resumedFrom;
      const wentBack = run.step < this.lastStep;
      if (resumed || wentBack) {
        // A new resume point, or the same checkpoint again; else it went back with no checkpoint to resume from.
        const fromCheckpoint = resumed || run.resumedFromStep === run.step;
        const from = fromCheckpoint ? run.resumedFromStep! : run.step;
        const redone = this.reached > from ? ` (it had reached step ${this.reached}; the steps after ${from} are trained again)` : "";
        const what = fromCheckpoint ? `resumed from the checkpoint of step ${from}` : `went back to step ${from} with no checkpoint to resume from`;
        note = `${what}${redone}; \`tinkerlab runs logs ${this.runId}\` says why`;
      }
    }
    this.lastStep = run.step;
    this.resumedFrom = run.resumedFromStep;
    this.reached = Math.max(this.reached, run.step);
    return { view: this.view(update), note };
  }

  private view(update: RunUpdate): ProgressView {
    const { run } = update;
    const reward = update.latest["reward/mean"];
    const left = run.status === "running" ? secondsLeft(run.totalSteps, run.step, this.stepSeconds) : null;
    return {
      value: this.reached,
      total: run.totalSteps,
      reward: reward === undefined ? "—" : reward.toFixed(3),
      left: left === null ? "—" : formatDuration(left),
      status: run.status,
      resumed: run.resumedFromStep === null ? "" : ` | resumed from step ${run.resumedFromStep}`,
    };
  }
}
