/** The charts' x-axes: steps marked at whole steps only, wall time at whole seconds, minutes and hours. */
import { describe, expect, it } from "vitest";
import { extent, secondsAxis, stepAxis } from "@/components/charts";

describe("stepAxis", () => {
  it("marks whole steps only: two steps of range give 1, 2, 3 and no 1.5 or 2.5", () => {
    const axis = stepAxis([1, 3]);
    expect(axis.domain).toEqual([1, 3]);
    expect(axis.ticks).toEqual([1, 2, 3]);
    expect(axis.ticks.map(axis.format)).toEqual(["1", "2", "3"]);
  });

  it("gives a single step one step either side, never below step 0", () => {
    expect(stepAxis([5, 5])).toMatchObject({ domain: [4, 6], ticks: [4, 5, 6] });
    expect(stepAxis([0, 0])).toMatchObject({ domain: [0, 1], ticks: [0, 1] });
  });

  it("keeps d3's round ticks on a long run, and the data's own ends as the domain", () => {
    const axis = stepAxis([3, 997]);
    expect(axis.domain).toEqual([3, 997]);
    expect(axis.ticks).toEqual([200, 400, 600, 800]);
  });

  it("takes the range of finite values only", () => {
    expect(extent([3, Number.NaN, 1, 2])).toEqual([1, 3]);
    expect(extent([Number.POSITIVE_INFINITY])).toBeNull();
    expect(stepAxis(extent([])).domain).toEqual([0, 1]);
  });
});

describe("secondsAxis", () => {
  it("marks whole seconds on a short run and writes them as durations", () => {
    const axis = secondsAxis([0.2, 4.7]);
    expect(axis.ticks).toEqual([1, 2, 3, 4]);
    expect(axis.ticks.every(Number.isInteger)).toBe(true);
    expect(axis.format(4)).toBe("4s");
  });

  it("steps by round minutes on a run of an hour", () => {
    const axis = secondsAxis([0, 3600]);
    expect(axis.ticks).toEqual([0, 600, 1200, 1800, 2400, 3000, 3600]);
    expect(axis.ticks.map(axis.format)).toEqual(["0s", "10m 00s", "20m 00s", "30m 00s", "40m 00s", "50m 00s", "1h 00m"]);
  });
});
