/**
 * The runs table's window over a long page (components/runs/row-window.ts): which rows are drawn for where the page
 * is scrolled, so the rows on screen are always among them, up to the last.
 */
import { describe, expect, it } from "vitest";
import { FIRST_WINDOW, windowRange } from "@/components/runs/row-window";

const ROW = 33;
const SCREEN = 1000;
const onScreen = (count: number, bodyTop: number) => {
  const first = Math.max(0, Math.floor(-bodyTop / ROW));
  const last = Math.min(count - 1, Math.floor((SCREEN - bodyTop) / ROW));
  return [first, last] as const;
};

describe("the rows a long table draws", () => {
  it("draws the first screen and a margin at the top, about the server's first window", () => {
    const { start, end } = windowRange(1000, 300, SCREEN, ROW);
    expect(start).toBe(0);
    expect(end).toBeGreaterThan(onScreen(1000, 300)[1]);
    expect(Math.abs(end - FIRST_WINDOW)).toBeLessThanOrEqual(5);
  });

  it.each([-5_000, -16_500, -30_000])("holds every row on screen when the body's top is at %i px", (bodyTop) => {
    const { start, end } = windowRange(1000, bodyTop, SCREEN, ROW);
    const [first, last] = onScreen(1000, bodyTop);
    expect(start).toBeLessThanOrEqual(first);
    expect(end).toBeGreaterThan(last);
    // Far fewer than the page's thousand.
    expect(end - start).toBeLessThan(120);
  });

  it("reaches the last row at the page's end, and past it", () => {
    const bottom = -(1000 * ROW - SCREEN);
    expect(windowRange(1000, bottom, SCREEN, ROW).end).toBe(1000);
    const past = windowRange(1000, -1000 * ROW * 2, SCREEN, ROW);
    expect(past.end).toBe(1000);
    expect(past.start).toBeLessThan(1000);
  });
});
