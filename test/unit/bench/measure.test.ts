import { describe, expect, it } from "vitest";
import { median, medianInterval } from "@/bench/lib/measure";
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

  it("gives the same interval for the same values, and none for values that do not vary", () => {
    const values = noisy(60, 1.05, 3);
    expect(medianInterval(values)).toEqual(medianInterval([...values]));
    expect(medianInterval([1.2, 1.2, 1.2, 1.2])).toEqual([1.2, 1.2]);
  });
});
