/** The charts' value axis and number formatting: sensible ranges for sparse series, ticks that differ from each other. */
import { describe, expect, it } from "vitest";
import { formatValue, valueAxis } from "@/components/charts";

const labels = (values: number[]) => {
  const axis = valueAxis(values);
  return axis.ticks.map(axis.format);
};

describe("valueAxis", () => {
  it("gives a single point a small band around its value, not a range a unit wide", () => {
    const { domain, ticks } = valueAxis([0.69]);
    expect(domain[0]).toBeGreaterThanOrEqual(0.5);
    expect(domain[1]).toBeLessThanOrEqual(0.85);
    expect(domain[0]).toBeLessThan(0.69);
    expect(domain[1]).toBeGreaterThan(0.69);
    expect(ticks.length).toBeGreaterThanOrEqual(3);
  });

  it("gives a flat series at zero a band of ±0.1, and one at 1000 a band of ±100", () => {
    expect(valueAxis([0, 0, 0]).domain).toEqual([-0.1, 0.1]);
    expect(valueAxis([1000, 1000]).domain).toEqual([900, 1100]);
  });

  it("widens a spread series to round ticks that cover every value", () => {
    const { domain, ticks } = valueAxis([0.13, 0.87]);
    expect(domain).toEqual([0, 1]);
    expect(ticks[0]).toBe(domain[0]);
    expect(ticks.at(-1)).toBe(domain[1]);
  });

  it("writes ticks with as many digits as tell them apart, and the same number on each", () => {
    expect(labels([0.5])).toEqual(["0.40", "0.45", "0.50", "0.55", "0.60"]);
    expect(labels([12_345.6, 12_345.7])).toEqual(["12,345.60", "12,345.62", "12,345.64", "12,345.66", "12,345.68", "12,345.70"]);
    expect(new Set(labels([0.1234, 0.1236])).size).toBe(valueAxis([0.1234, 0.1236]).ticks.length);
  });

  it("writes large ranges with an SI prefix and tiny ones in exponent form, zero as 0", () => {
    expect(labels([0, 20_000])).toEqual(["0", "5k", "10k", "15k", "20k"]);
    expect(labels([1e-5, 9e-5])).toEqual(["0", "2e-5", "4e-5", "6e-5", "8e-5", "1e-4"]);
  });

  it("ignores values that are not finite, and draws 0 to 1 when none is left", () => {
    expect(valueAxis([Number.NaN, 2, Number.POSITIVE_INFINITY]).domain).toEqual([1.8, 2.2]);
    expect(valueAxis([]).domain).toEqual([0, 1]);
  });
});

describe("formatValue", () => {
  it("writes four significant digits, compact when large and in exponent form when tiny", () => {
    expect(formatValue(Math.LN2)).toBe("0.6931");
    expect(formatValue(1234.5)).toBe("1,235");
    expect(formatValue(12_345.678)).toBe("12.35K");
    expect(formatValue(0.0000912345)).toBe("9.12e-5");
    expect(formatValue(0)).toBe("0");
    expect(formatValue(-1.5)).toBe("-1.5");
  });
});
