/** What a compare panel draws: points paired with their x by step, groups' means and bands, smoothing. */
import { describe, expect, it } from "vitest";
import {
  configValue,
  groupBy,
  groupStatistics,
  MAX_RAW_LINES,
  pairByStep,
  panelLines,
  pointAtStep,
  smoothPoints,
  thinPoints,
  valueAtStep,
} from "@/components/compare/panel-data";

const series = (steps: number[], values: number[]) => ({ steps, values });

describe("pairing a metric with its x by step", () => {
  it("uses the step as x when the axis is the step", () => {
    expect(pairByStep(series([1, 2, 3], [0.1, 0.2, 0.3]), null)).toEqual([
      { step: 1, x: 1, y: 0.1 },
      { step: 2, x: 2, y: 0.2 },
      { step: 3, x: 3, y: 0.3 },
    ]);
  });

  it("pairs another metric's value at the same step, between its points where it skips steps, and drops steps outside it", () => {
    const reward = series([0, 1, 2, 3, 4], [0, 0.1, 0.2, 0.3, 0.4]);
    const kl = series([1, 3], [10, 30]); // a downsample: step 2 is between its points, steps 0 and 4 outside them
    expect(pairByStep(reward, kl)).toEqual([
      { step: 1, x: 10, y: 0.1 },
      { step: 2, x: 20, y: 0.2 },
      { step: 3, x: 30, y: 0.3 },
    ]);
  });

  it("reads a series at a step: its own value, the line between neighbours, or nothing outside", () => {
    const s = series([2, 4, 8], [1, 3, 5]);
    expect(valueAtStep(s, 4)).toBe(3);
    expect(valueAtStep(s, 6)).toBe(4);
    expect(valueAtStep(s, 1)).toBeNull();
    expect(valueAtStep(s, 9)).toBeNull();
    expect(valueAtStep(series([], []), 0)).toBeNull();
  });
});

describe("grouping runs by a config field", () => {
  const runs = [
    { id: "a", config: { seed: 1, algorithm: { learningRate: 0.01 } } },
    { id: "b", config: { seed: 2, algorithm: { learningRate: 0.02 } } },
    { id: "c", config: { seed: 3, algorithm: { learningRate: 0.01 } } },
    { id: "d", config: { seed: 4, algorithm: {} } },
  ];

  it("reads a dotted path, and nothing where it leads nowhere", () => {
    expect(configValue(runs[0]!.config, "algorithm.learningRate")).toBe(0.01);
    expect(configValue(runs[0]!.config, "algorithm.learningRate.x")).toBeUndefined();
    expect(configValue(runs[0]!.config, "constructor")).toBeUndefined();
  });

  it("puts runs with the same value in one group, in order of first appearance, with the value as its label", () => {
    const groups = groupBy(runs, (r) => configValue(r.config, "algorithm.learningRate"));
    expect(groups.map((g) => [g.label, g.members.map((r) => r.id)])).toEqual([
      ["0.01", ["a", "c"]],
      ["0.02", ["b"]],
      ["unset", ["d"]],
    ]);
  });
});

describe("a group's statistics", () => {
  const run = (ys: number[], from = 0) => ys.map((y, i) => ({ step: from + i, x: from + i, y }));

  it("draws the mean with its lowest and highest run as the band, counting the runs at each step", () => {
    const stats = groupStatistics([run([1, 2, 3]), run([3, 4, 5]), run([2, 6], 1)], "minmax");
    expect(stats).toEqual([
      { step: 0, x: 0, y: 2, low: 1, high: 3, count: 2 },
      { step: 1, x: 1, y: 8 / 3, low: 2, high: 4, count: 3 },
      { step: 2, x: 2, y: 14 / 3, low: 3, high: 6, count: 3 },
    ]);
  });

  it("draws ± one standard error of the mean, and no width for a lone run", () => {
    const [at0] = groupStatistics([run([1]), run([2]), run([3]), run([6])], "sem");
    // mean 3, sample variance (4 + 1 + 0 + 9) / 3, standard error its root over √4
    expect(at0!.y).toBe(3);
    expect(at0!.high - at0!.y).toBeCloseTo(Math.sqrt(14 / 3) / 2, 12);
    expect(at0!.y - at0!.low).toBeCloseTo(Math.sqrt(14 / 3) / 2, 12);
    expect(groupStatistics([run([5, 7])], "sem")).toEqual([
      { step: 0, x: 0, y: 5, low: 5, high: 5, count: 1 },
      { step: 1, x: 1, y: 7, low: 7, high: 7, count: 1 },
    ]);
  });

  it("pairs runs whose downsamples kept different steps by the line between their points", () => {
    const a = [
      { step: 0, x: 0, y: 0 },
      { step: 10, x: 10, y: 10 },
    ];
    const b = [
      { step: 0, x: 0, y: 2 },
      { step: 5, x: 5, y: 7 },
      { step: 10, x: 10, y: 12 },
    ];
    expect(groupStatistics([a, b], "minmax")[1]).toEqual({ step: 5, x: 5, y: 6, low: 5, high: 7, count: 2 });
  });
});

describe("smoothing", () => {
  const points = [0, 1, 1, 1].map((y, step) => ({ step, x: step * 10, y }));

  it("is W&B's debiased EMA: the first point stays, later ones lean on the past by the weight", () => {
    const smoothed = smoothPoints(points, 0.5);
    // EMA 0, 0.5, 0.75, 0.875 over the debiasing 1 - 0.5^(i+1)
    const ys = smoothed.map((p) => p.y);
    [0, 2 / 3, 6 / 7, 14 / 15].forEach((want, i) => expect(ys[i]).toBeCloseTo(want, 12));
    expect(smoothed.map((p) => p.x)).toEqual([0, 10, 20, 30]);
  });

  it("leaves the points as they are at weight 0, and smooths a band's edges with its mean", () => {
    expect(smoothPoints(points, 0)).toEqual(points);
    const band = [
      { step: 0, x: 0, y: 1, low: 0, high: 2, count: 2 },
      { step: 1, x: 1, y: 3, low: 2, high: 4, count: 2 },
    ];
    const [, second] = smoothPoints(band, 0.5, ["y", "low", "high"]);
    expect(second!.y).toBeCloseTo(7 / 3, 12);
    expect(second!.low).toBeCloseTo(4 / 3, 12);
    expect(second!.high).toBeCloseTo(10 / 3, 12);
  });
});

describe("the point at a hovered step", () => {
  it("is the line's point nearest the step, and none outside the line's steps", () => {
    const line = [0, 10, 20].map((step) => ({ step, x: step, y: step / 10 }));
    expect(pointAtStep(line, 11)?.step).toBe(10);
    expect(pointAtStep(line, 16)?.step).toBe(20);
    expect(pointAtStep(line, 20)?.step).toBe(20);
    expect(pointAtStep(line, -5)).toBeNull();
    expect(pointAtStep(line, 21)).toBeNull();
    expect(pointAtStep([], 3)).toBeNull();
  });
});

describe("thinning a line for drawing", () => {
  it("keeps about `max` points with the spikes, the last point, and every field of each point", () => {
    const line = Array.from({ length: 1000 }, (_, step) => ({ step, x: step * 2, y: step === 500 ? 9 : Math.sin(step / 50), low: -1, high: 1, count: 2 }));
    const thinned = thinPoints(line, 100);
    expect(thinned.length).toBeLessThanOrEqual(101);
    expect(thinned.find((p) => p.step === 500)).toEqual({ step: 500, x: 1000, y: 9, low: -1, high: 1, count: 2 });
    expect(thinned.at(-1)!.step).toBe(999);
    expect(thinPoints(line.slice(0, 50), 100)).toHaveLength(50);
  });
});

describe("a panel's lines", () => {
  const run = (i: number, seed: number) => ({
    id: `r${i}`,
    name: `run ${i}`,
    color: `#00000${i}`,
    config: { seed },
    series: {
      "reward/mean": { steps: [1, 2, 3], values: [i, i + 1, i + 2], seconds: [10, 20, 30] },
      "loss/kl": { steps: [1, 3], values: [0.1, 0.3] },
    },
    tokens: { steps: [1, 2, 3], values: [100, 200, 300] },
  });
  const panel = (x: "step" | "time" | "tokens" | "metric:loss/kl", smoothing = 0) => ({ metric: "reward/mean", x, smoothing });

  it("puts each run against the panel's x: step, seconds, tokens, or another metric paired by step", () => {
    const runs = [run(0, 0)];
    expect(panelLines(panel("step"), runs, null)[0]!.points.map((p) => p.x)).toEqual([1, 2, 3]);
    expect(panelLines(panel("time"), runs, null)[0]!.points.map((p) => p.x)).toEqual([10, 20, 30]);
    expect(panelLines(panel("tokens"), runs, null)[0]!.points.map((p) => p.x)).toEqual([100, 200, 300]);
    expect(panelLines(panel("metric:loss/kl"), runs, null)[0]!.points.map((p) => [p.x, p.y])).toEqual([
      [0.1, 0],
      [0.2, 1],
      [0.3, 2],
    ]);
  });

  it("draws one line per group, with a band only where the group holds several runs", () => {
    const lines = panelLines(panel("step"), [run(0, 0), run(1, 1), run(2, 0)], { path: "seed", band: "minmax", colors: ["#a", "#b"] });
    expect(lines.map((l) => [l.label, l.color, l.band])).toEqual([
      ["seed = 0 · 2 runs", "#a", true],
      ["seed = 1 · 1 run", "#b", false],
    ]);
    expect((lines[0]!.points as { y: number; low: number; high: number }[])[0]).toMatchObject({ y: 1, low: 0, high: 2 });
  });

  it("draws raw curves behind smoothed ones for a few runs only", () => {
    const few = Array.from({ length: MAX_RAW_LINES }, (_, i) => run(i, i));
    expect(panelLines(panel("step", 0.6), few, null).every((l) => l.raw !== null)).toBe(true);
    expect(panelLines(panel("step", 0.6), [...few, run(9, 9)], null).every((l) => l.raw === null)).toBe(true);
    expect(panelLines(panel("step", 0), few, null).every((l) => l.raw === null)).toBe(true);
  });
});
