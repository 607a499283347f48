/** Exploration: a run that sees no signal samples hotter until it does, then settles back, and resumes as it was. */
import { describe, expect, it } from "vitest";
import { Exploration } from "@/lib/rl/exploration";

describe("Exploration", () => {
  it("raises the temperature after two steps without a signal, up to its most, and holds it while some signal shows", () => {
    const exploration = new Exploration(1, 1.6, {});
    const temperatures: number[] = [];
    for (const share of [0, 0, 0, 0, 0, 0.25, 0.25]) {
      temperatures.push(exploration.temperature);
      exploration.observe(share);
    }
    expect(temperatures).toEqual([1, 1, 1.25, 1.5, 1.6, 1.6, 1.6]);
  });

  it("settles slowly back to the configured temperature while most groups carry a signal, never below it", () => {
    const exploration = new Exploration(0.8, 2, { "exploration/temperature": 1, "exploration/streak": 0 });
    const temperatures: number[] = [];
    for (let step = 0; step < 6; step++) {
      exploration.observe(0.75);
      temperatures.push(exploration.temperature);
    }
    expect(temperatures).toEqual([0.95, 0.9, 0.85, 0.8, 0.8, 0.8]);
  });

  it("keeps its state in the algorithm's memory, so a run resumed from a checkpoint explores as it did", () => {
    const memory: Record<string, number> = {};
    const first = new Exploration(1, 3, memory);
    for (let step = 0; step < 4; step++) first.observe(0);
    const resumed = new Exploration(1, 3, { ...memory });
    expect(resumed.temperature).toBe(first.temperature);
    first.observe(0);
    resumed.observe(0);
    expect(resumed.temperature).toBe(first.temperature);
    expect(first.temperature).toBe(2);
  });

  it("settles rather than explores when every group is mastered (a solved task), and holds while some are not", () => {
    const exploration = new Exploration(1, 2, { "exploration/temperature": 1.5, "exploration/streak": 0 });
    const temperatures: number[] = [];
    for (const [signal, mastered] of [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 0.5],
      [0, 0.5],
    ] as const) {
      exploration.observe(signal, mastered);
      temperatures.push(exploration.temperature);
    }
    expect(temperatures).toEqual([1.45, 1.4, 1.35, 1.35, 1.6]);
  });

  it("is off when its most is not above the configured temperature", () => {
    const exploration = new Exploration(1, 0, {});
    for (let step = 0; step < 5; step++) exploration.observe(0);
    expect(exploration.enabled).toBe(false);
    expect(exploration.temperature).toBe(1);
  });
});
