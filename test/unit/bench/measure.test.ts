import { describe, expect, it } from "vitest";
import { bootstrapInterval, median, medianInterval, medianReachPoints, quantile, quietRatio } from "@/bench/lib/measure";
import { Rng } from "@/lib/model/rng";

/** Values with a known median: a seeded spread around `center` (a round's ratio on a noisy machine). */
function noisy(count: number, center: number, seed: number): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => center + (rng.uniform() + rng.uniform() + rng.uniform() - 1.5) * 0.3);
}

describe("the benches' statistics", () => {
  it("takes the median, the lower middle value of an even count", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2);
    expect(() => median([])).toThrow(/no values/);
  });

  it("gives a 90% interval around the median that holds the true one and narrows with more rounds", () => {
    const few = noisy(25, 1.1, 7);
    const many = noisy(400, 1.1, 7);
    const [fewLow, fewHigh] = medianInterval(few);
    const [low, high] = medianInterval(many);
    expect(fewLow).toBeLessThanOrEqual(median(few));
    expect(fewHigh).toBeGreaterThanOrEqual(median(few));
    expect(low).toBeLessThan(1.1);
    expect(high).toBeGreaterThan(1.1);
    expect(high - low).toBeLessThan((fewHigh - fewLow) / 2);
  });

  it("says how far the median's interval reaches, in points, and that it shrinks as rounds are added", () => {
    const few = noisy(25, 1.1, 11);
    const [low, high] = medianInterval(few);
    expect(medianReachPoints(few)).toBeCloseTo(100 * Math.max(median(few) - low, high - median(few)), 10);
    expect(medianReachPoints(few)).toBeGreaterThan(0);
    expect(medianReachPoints(noisy(400, 1.1, 11))).toBeLessThan(medianReachPoints(few) / 2);
    expect(medianReachPoints([1.2, 1.2, 1.2])).toBe(0);
  });

  it("gives the same interval for the same values, and none for values that do not vary", () => {
    const values = noisy(60, 1.05, 3);
    expect(medianInterval(values)).toEqual(medianInterval([...values]));
    expect(medianInterval([1.2, 1.2, 1.2, 1.2])).toEqual([1.2, 1.2]);
  });

  it("takes a quantile by nearest rank, and rejects a fraction outside 0 to 1", () => {
    const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(quantile(values, 0)).toBe(1);
    expect(quantile(values, 0.1)).toBe(1);
    expect(quantile(values, 0.2)).toBe(2);
    expect(quantile(values, 1)).toBe(10);
    expect(() => quantile(values, 1.5)).toThrow(/from 0 to 1/);
    expect(() => quantile([], 0.5)).toThrow(/no values/);
  });

  it("bootstraps an interval for a statistic of paired rounds: the quiet ratio sees through rollouts a burst of load slowed", () => {
    // Rounds of two variants, the second 5% slower; a burst of load doubled the first's time in 10% of the
    // rounds and the second's in 30%, which moves the ratio of the means far more than 5%.
    const rng = new Rng(11);
    const rounds = Array.from({ length: 120 }, () => {
      const base = 20 * (1 + 0.02 * rng.uniform());
      const hit = rng.uniform();
      return { a: base * (hit < 0.1 ? 2 : 1), b: base * 1.05 * (hit > 0.7 ? 2 : 1) };
    });
    const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
    expect(sum(rounds.map((r) => r.b)) / sum(rounds.map((r) => r.a))).toBeGreaterThan(1.15);
    const quiet = (sample: typeof rounds) =>
      quietRatio(
        sample.map((r) => r.b),
        sample.map((r) => r.a),
      );
    const [low, high] = bootstrapInterval(rounds, quiet);
    expect(low).toBeLessThanOrEqual(quiet(rounds));
    expect(high).toBeGreaterThanOrEqual(quiet(rounds));
    expect(low).toBeGreaterThan(1.02);
    expect(high).toBeLessThan(1.08);
    expect(bootstrapInterval(rounds, quiet)).toEqual([low, high]);
  });
});
