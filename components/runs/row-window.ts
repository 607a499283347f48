"use client";

import { type RefObject, useEffect, useState } from "react";

/** Up to this many rows a table draws every one; past it, only those near the screen (`useRowWindow`). */
export const WINDOW_FROM = 200;
/** The rows drawn before the table has measured the screen: a tall screen's worth, and what the server renders. */
export const FIRST_WINDOW = 60;
/** Rows drawn beyond each edge of the screen, so a scroll shows drawn rows while the window catches up. */
const OVERSCAN = 30;
/** A row's height until one is measured (a line of text-sm with py-1.5). */
const ROW_HEIGHT = 33;

export type RowWindow = { start: number; end: number; rowHeight: number };

/**
 * The rows to draw, [start, end), of `count` rows of `rowHeight` pixels whose body's top is `bodyTop` pixels from the
 * viewport's top (negative once scrolled past): those on the screen and OVERSCAN more either side.
 */
export function windowRange(count: number, bodyTop: number, viewportHeight: number, rowHeight: number): { start: number; end: number } {
  const first = Math.floor(Math.max(0, -bodyTop) / rowHeight);
  const visible = Math.ceil(viewportHeight / rowHeight);
  const start = Math.max(0, Math.min(count - 1, first) - OVERSCAN);
  const end = Math.min(count, first + visible + OVERSCAN);
  return { start, end: Math.max(start, end) };
}

/**
 * Which of `count` rows of a table body to draw: all of them up to WINDOW_FROM; past it, those within about a
 * screen of the viewport (the page scrolls, not the table), the rows above and below stood in for by two spacer
 * rows of their height. A page of 1,000 rows then renders, hydrates and lays out about a hundred; a row's height is
 * measured from the rows drawn (they are one line each: cells do not wrap).
 */
export function useRowWindow(count: number, body: RefObject<HTMLTableSectionElement | null>): RowWindow {
  const windowed = count > WINDOW_FROM;
  const [range, setRange] = useState<RowWindow>({ start: 0, end: windowed ? FIRST_WINDOW : count, rowHeight: ROW_HEIGHT });

  useEffect(() => {
    if (!windowed) {
      setRange({ start: 0, end: count, rowHeight: ROW_HEIGHT });
      return;
    }
    let frame = 0;
    const measure = () => {
      frame = 0;
      const element = body.current;
      if (!element) return;
      const rows = element.querySelectorAll<HTMLTableRowElement>(":scope > tr:not([data-spacer])");
      let rowHeight = ROW_HEIGHT;
      if (rows.length > 1) {
        const first = rows[0]!.getBoundingClientRect();
        const last = rows[rows.length - 1]!.getBoundingClientRect();
        rowHeight = Math.max(16, (last.bottom - first.top) / rows.length);
      }
      const { start, end } = windowRange(count, element.getBoundingClientRect().top, window.innerHeight, rowHeight);
      setRange((current) =>
        current.start === start && current.end === end && Math.abs(current.rowHeight - rowHeight) < 0.5 ? current : { start, end, rowHeight },
      );
    };
    const schedule = () => {
      if (!frame) frame = requestAnimationFrame(measure);
    };
    measure();
    window.addEventListener("scroll", schedule, { passive: true });
    window.addEventListener("resize", schedule);
    return () => {
      if (frame) cancelAnimationFrame(frame);
      window.removeEventListener("scroll", schedule);
      window.removeEventListener("resize", schedule);
    };
  }, [windowed, count, body]);

  return windowed ? range : { start: 0, end: count, rowHeight: range.rowHeight };
}
