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

/** Seconds as "0.4s", "42s", "3m 05s" or "1h 02m". */
export function formatDuration(seconds: number): string {
  if (seconds < 10) return `${Number(seconds.toFixed(1))}s`;
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** A time shown relative to now, with the exact time on hover. */
export function RelativeTime({ date }: { date: Date }) {
  return (
    <time suppressHydrationWarning dateTime={date.toISOString()} title={`${date.toISOString().replace("T", " ").slice(0, 19)} UTC`}>
      {formatRelative(date)}
    </time>
  );
}
