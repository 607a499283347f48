/** A training loop saves by steps and by time (lib/rl/checkpoint-schedule.ts), so a lost worker costs little. */
import { describe, expect, it } from "vitest";
import { checkpointSchedule } from "@/lib/rl/checkpoint-schedule";

describe("checkpointSchedule", () => {
  it("saves every N steps, at the last step, and after checkpointMinutes of training since the last save", () => {
    let now = 0;
    const schedule = checkpointSchedule({ checkpointEvery: 25, checkpointMinutes: 2 }, 100, () => now);
    now = 60_000;
    expect(schedule.due(3)).toBe(false);
    expect(schedule.due(25)).toBe(true);
    now = 120_000; // two minutes since the schedule began, none saved yet
    expect(schedule.due(26)).toBe(true);
    schedule.saved();
    now = 200_000;
    expect(schedule.due(27)).toBe(false);
    expect(schedule.dueByStep(27)).toBe(false);
    now = 240_000;
    expect(schedule.due(28)).toBe(true);
    expect(schedule.dueByStep(28)).toBe(false);
    expect(schedule.due(100)).toBe(true);
  });

  it("saves by steps alone when checkpointMinutes is 0", () => {
    let now = 0;
    const schedule = checkpointSchedule({ checkpointEvery: 0, checkpointMinutes: 0 }, 10, () => now);
    now = 3_600_000;
    expect(schedule.due(5)).toBe(false);
    expect(schedule.due(10)).toBe(true);
  });
});
