// One duration format for the pages and the CLI's bar.
export { formatDuration } from "@/lib/duration";

const units: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 24 * 3600],
  ["month", 30 * 24 * 3600],
  ["day", 24 * 3600],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];
const relative = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

function formatRelative(date: Date, now = Date.now()): string {
  const seconds = Math.round((date.getTime() - now) / 1000);
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size || unit === "second") return relative.format(Math.round(seconds / size), unit);
  }
  return "";
}

/** A time shown relative to now, with the exact time on hover. */
export function RelativeTime({ date }: { date: Date }) {
  return (
    <time suppressHydrationWarning dateTime={date.toISOString()} title={`${date.toISOString().replace("T", " ").slice(0, 19)} UTC`}>
      {formatRelative(date)}
    </time>
  );
}
