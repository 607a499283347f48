/** Durations as the run page and the CLI show them (lib/duration.ts): never "2m 60s", never NaN. */
import { describe, expect, it } from "vitest";
import { formatDuration, secondsLeft } from "@/lib/duration";

describe("formatDuration", () => {
  it("writes seconds, minutes and hours as people read them", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(0.44)).toBe("0.4s");
    expect(formatDuration(42)).toBe("42s");
    expect(formatDuration(185)).toBe("3m 05s");
    expect(formatDuration(3720)).toBe("1h 02m");
  });

  it("rounds before it splits, so no part reads 60", () => {
    expect(formatDuration(9.97)).toBe("10s");
    expect(formatDuration(59.6)).toBe("1m 00s");
    expect(formatDuration(179.7)).toBe("3m 00s");
    expect(formatDuration(3599.6)).toBe("1h 00m");
    expect(formatDuration(7199)).toBe("2h 00m");
    for (let tenths = 0; tenths < 100_000; tenths += 7) expect(formatDuration(tenths / 10)).not.toMatch(/(^|\D)60[sm]/);
  });

  it("writes '—' for a duration that is not known", () => {
    for (const unknown of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -1]) expect(formatDuration(unknown)).toBe("—");
  });
});

describe("secondsLeft", () => {
  it("is null until a step has been timed", () => {
    expect(secondsLeft(8, 0, [])).toBeNull();
    expect(secondsLeft(8, 0, [Number.NaN])).toBeNull();
  });

  it("is the steps to go times the mean of the last ten steps' durations", () => {
    expect(secondsLeft(8, 2, [2, 4])).toBe(18);
    expect(secondsLeft(100, 90, [100, ...Array(10).fill(1)])).toBe(10);
    expect(secondsLeft(8, 9, [3])).toBe(0);
  });
});
