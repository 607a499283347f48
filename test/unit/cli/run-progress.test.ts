/**
 * What `tinkerlab run` shows of the run it follows (bin/cli/run-progress.ts): the bar never goes back when the run
 * resumes from an earlier checkpoint or starts over, a line says what happened, and the time left reads "—" until a
 * step has been timed, then as lib/duration writes it.
 */
import { describe, expect, it } from "vitest";
import { RunProgress } from "@/bin/cli/run-progress";
import type { MetricPoint, Run, RunUpdate } from "@/lib/client";

/** One look at a run of 8 steps: its step, state and resume point, with the step durations reported since the last. */
function look(step: number, options: { status?: string; resumedFromStep?: number | null; stepSeconds?: number[]; reward?: number } = {}): RunUpdate {
  const run = { id: "run_a", step, totalSteps: 8, status: options.status ?? "running", resumedFromStep: options.resumedFromStep ?? null } as Run;
  const points = (options.stepSeconds ?? []).map((value) => ({ name: "perf/step_seconds", step, value }) as MetricPoint);
  return { run, points, latest: options.reward === undefined ? {} : { "reward/mean": options.reward } };
}

describe("the CLI's run progress", () => {
  it("keeps the highest step reached when a requeued run resumes from an earlier checkpoint, and says so once", () => {
    const progress = new RunProgress("run_a");
    expect(progress.observe(look(0)).note).toBeNull();
    expect(progress.observe(look(1)).view.value).toBe(1);
    expect(progress.observe(look(3)).view.value).toBe(3);
    // Its worker lost; requeued, it resumes from the checkpoint of step 1 on another.
    const resumed = progress.observe(look(1, { resumedFromStep: 1 }));
    expect(resumed.view).toMatchObject({ value: 3, total: 8, resumed: " | resumed from step 1" });
    expect(resumed.note).toBe(
      "resumed from the checkpoint of step 1 (it had reached step 3; the steps after 1 are trained again); `tinkerlab runs logs run_a` says why",
    );
    expect(progress.observe(look(2, { resumedFromStep: 1 }))).toMatchObject({ view: { value: 3 }, note: null });
    expect(progress.observe(look(4, { resumedFromStep: 1 }))).toMatchObject({ view: { value: 4 }, note: null });
  });

  it("says when a run goes back with no checkpoint to resume from (1/8, then 0/8), and the bar stays at 1", () => {
    const progress = new RunProgress("run_a");
    progress.observe(look(1));
    const back = progress.observe(look(0, { status: "queued" }));
    expect(back.view.value).toBe(1);
    expect(back.view.resumed).toBe("");
    expect(back.note).toMatch(/^went back to step 0 with no checkpoint to resume from \(it had reached step 1; the steps after 0 are trained again\)/);
  });

  it("says so again when a run resumes a second time from the same checkpoint", () => {
    const progress = new RunProgress("run_a");
    progress.observe(look(2, { resumedFromStep: 2 }));
    expect(progress.observe(look(4, { resumedFromStep: 2 })).note).toBeNull();
    expect(progress.observe(look(2, { resumedFromStep: 2 })).note).toMatch(/^resumed from the checkpoint of step 2 \(it had reached step 4;/);
  });

  it("shows the time left as '—' until a step has been timed, and only while the run is running", () => {
    const progress = new RunProgress("run_a");
    expect(progress.observe(look(0, { status: "queued" })).view.left).toBe("—");
    expect(progress.observe(look(0)).view.left).toBe("—");
    // 8 steps to go at 20 s, then 7 at the mean of the last ten steps' durations.
    expect(progress.observe(look(1, { stepSeconds: [19.96] })).view.left).toBe("2m 20s");
    expect(progress.observe(look(2, { stepSeconds: [9.96] })).view.left).toBe("1m 30s");
    expect(progress.observe(look(2, { status: "paused" })).view.left).toBe("—");
  });

  it("shows the latest reward with three decimals, '—' before the first", () => {
    const progress = new RunProgress("run_a");
    expect(progress.observe(look(0)).view.reward).toBe("—");
    expect(progress.observe(look(1, { reward: 0.25 })).view.reward).toBe("0.250");
  });
});
