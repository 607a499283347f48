/** Timing for benchmarks: a few warm-up calls, then as many calls as fit in a time budget. */
export async function throughput(
  fn: () => Promise<unknown> | unknown,
  tokensPerCall: number,
  options: { seconds: number; warmup?: number },
): Promise<{ tokensPerSecond: number; callsPerSecond: number; calls: number }> {
  for (let i = 0; i < (options.warmup ?? 2); i++) await fn();
  let calls = 0;
  const start = performance.now();
  while (performance.now() - start < options.seconds * 1000 || calls < 2) {
    await fn();
    calls++;
  }
  const elapsed = (performance.now() - start) / 1000;
  return { tokensPerSecond: (calls * tokensPerCall) / elapsed, callsPerSecond: calls / elapsed, calls };
}

/** Peak resident set size of this process so far, in MiB. */
export function peakRssMb(): number {
  return process.resourceUsage().maxRSS / 1024;
}

/** A plain-text table with right-aligned numbers. */
export function formatTable(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (typeof c === "number" ? formatNumber(c) : c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(cells[0]), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join("\n");
}

function formatNumber(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2);
}
