/** Durations as people read them, and the time a run has left: the run page and the CLI's progress bar share these. */

/**
 * Seconds as "0.4s", "42s", "3m 05s" or "1h 02m"; "—" for a duration that is not known (NaN, infinite, negative).
 * Rounded once, before it is split into units, so a part never reads 60 ("2m 60s").
 */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  if (seconds < 9.95) return `${Number(seconds.toFixed(1))}s`;
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  const m = Math.round(s / 60);
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

/**
 * The seconds a run has left: its steps to go times the mean of its last ten steps' `perf/step_seconds`; null
 * until a step has been timed (no rate yet), so nothing shows a guess from nothing.
 */
export function secondsLeft(totalSteps: number, step: number, stepSeconds: readonly number[]): number | null {
  const recent = stepSeconds.slice(-10).filter((s) => Number.isFinite(s) && s >= 0);
  if (recent.length === 0) return null;
  return Math.max(0, totalSteps - step) * (recent.reduce((a, b) => a + b, 0) / recent.length);
}
