/** The scheduler loop's measure of its own stalls (server/jobs/loop.ts), which it adds to every lease. */
import { describe, expect, it } from "vitest";
import { stallClock } from "@/server/jobs/loop";

describe("stallClock", () => {
  it("sums the timers that ran late within the window, and forgets older ones", () => {
    const clock = stallClock(20_000);
    clock.record(30, 1_000); // on time: a timer is always a little late
    clock.record(8_000, 10_000);
    clock.record(4_000, 15_000);
    expect(clock.recentMs(16_000)).toBe(12_000);
    // 20 s after the first stall it no longer counts; the second does until 35 s.
    expect(clock.recentMs(31_000)).toBe(4_000);
    expect(clock.recentMs(36_000)).toBe(0);
  });
});
