/**
 * Replays workload traces through the packing policy and the FIFO baseline and compares them.
 *   npm run bench:scheduler                       the three generated traces (mixed-8, lora-heavy, scale-1000)
 *   npm run bench:scheduler -- --only lora-heavy  one of them
 *   npm run bench:scheduler -- --trace FILE       a trace from a JSON file (format: docs/SCHEDULER.md)
 *   npm run bench:scheduler -- --seed 2 --load 1.2 --jobs 1200
 *                                                 generated traces with another seed, offered load or length
 * Prints a table, then as its last line one JSON object with every figure. The figure the policy is judged on is
 * the speed-up: the baseline's mean job completion time over the policy's. A trace with jobs no device can hold
 * (rejected at submit) fails the run: its figures would leave those jobs out.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import {
  createFifoBaselinePolicy,
  createPackingPolicy,
  generateTrace,
  offeredLoad,
  parseTrace,
  simulate,
  tracePresets,
  type SimulationResult,
  type Trace,
  type TracePreset,
} from "@/server/scheduler";

function loadTraces(): Trace[] {
  const { values } = parseArgs({
    options: { trace: { type: "string" }, only: { type: "string" }, seed: { type: "string" }, load: { type: "string" }, jobs: { type: "string" } },
  });
  if (values.trace !== undefined) {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(values.trace, "utf8"));
    } catch (error) {
      throw new Error(`cannot read trace ${values.trace}: ${(error as Error).message}`);
    }
    return [parseTrace(json, values.trace)];
  }
  const seed = values.seed === undefined ? 1 : Number(values.seed);
  if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, got '${values.seed}'`);
  if (values.only !== undefined && !tracePresets.includes(values.only as TracePreset)) {
    throw new Error(`--only must be one of ${tracePresets.join(", ")}; got '${values.only}'`);
  }
  const overrides: { offeredLoad?: number; jobs?: number } = {};
  if (values.load !== undefined) {
    overrides.offeredLoad = Number(values.load);
    if (!(overrides.offeredLoad > 0 && overrides.offeredLoad <= 4))
      throw new Error(`--load must be a number above 0 and at most 4 (offered work over the cluster's capacity), got '${values.load}'`);
  }
  if (values.jobs !== undefined) {
    overrides.jobs = Number(values.jobs);
    if (!Number.isInteger(overrides.jobs) || overrides.jobs < 1) throw new Error(`--jobs must be a whole number of at least 1, got '${values.jobs}'`);
  }
  const names = values.only === undefined ? tracePresets : [values.only as TracePreset];
  return names.map((name) => generateTrace(name, seed, overrides));
}

function figures(result: SimulationResult) {
  return {
    mean_jct: round(result.meanJct),
    p95_jct: round(result.p95Jct),
    mean_wait: round(result.meanWait),
    p95_wait: round(result.p95Wait),
    utilization: Math.round(result.utilization * 1000) / 1000,
    arrival_utilization: Math.round(result.arrivalUtilization * 1000) / 1000,
    makespan: round(result.makespan),
    completed: result.completed,
    rejected: result.rejected.length,
    preemptions: result.preemptions,
    lost_work: round(result.lostWorkSeconds),
  };
}

function round(seconds: number): number {
  return Math.round(seconds);
}

function hours(seconds: number): string {
  return `${(seconds / 3600).toFixed(2)} h`;
}

function main(): number {
  const traces = loadTraces();
  const report = [];
  const rows: string[][] = [];
  const failures: string[] = [];
  for (const trace of traces) {
    const load = offeredLoad(trace);
    const started = performance.now();
    const policy = simulate(trace, createPackingPolicy());
    const baseline = simulate(trace, createFifoBaselinePolicy());
    const seconds = (performance.now() - started) / 1000;
    const speedup = baseline.meanJct / policy.meanJct;
    report.push({
      name: trace.name,
      devices: policy.devices,
      jobs: policy.jobs,
      offered_load: round2(load.load),
      whole_device_load: round2(load.wholeDeviceLoad),
      speedup: round2(speedup),
      policy: figures(policy),
      baseline: figures(baseline),
      seconds: round2(seconds),
    });
    if (policy.rejected.length > 0) {
      const first = policy.rejected[0];
      failures.push(`${trace.name}: ${policy.rejected.length} jobs can never run on its devices (${first.id} ${first.message}); a trace must not hold them`);
    }
    for (const result of [policy, baseline]) {
      rows.push([
        trace.name,
        result.policy,
        String(result.devices),
        String(result.jobs),
        load.load.toFixed(2),
        load.wholeDeviceLoad.toFixed(2),
        hours(result.meanJct),
        hours(result.p95Jct),
        hours(result.meanWait),
        hours(result.p95Wait),
        percent(result.arrivalUtilization),
        percent(result.utilization),
        hours(result.makespan),
        String(result.preemptions),
        String(result.rejected.length),
      ]);
    }
    rows.push([
      trace.name,
      "speed-up",
      "",
      "",
      "",
      "",
      `${speedup.toFixed(2)}x`,
      `${(baseline.p95Jct / policy.p95Jct).toFixed(2)}x`,
      "",
      "",
      "",
      "",
      "",
      "",
      `${seconds.toFixed(1)} s`,
    ]);
  }
  const header = [
    "trace",
    "policy",
    "devices",
    "jobs",
    "load",
    "1/device",
    "mean JCT",
    "p95 JCT",
    "mean wait",
    "p95 wait",
    "busy",
    "util",
    "makespan",
    "preempt",
    "rejected",
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  console.log(
    "load: offered work (each job's duration x its dominant share of the cluster's slots or memory) over the arrival span;",
    "1/device: the same work with each job on a device of its own, the baseline's way; busy: slot utilisation while jobs arrive;",
    "util: the same over the makespan; speed-up: baseline / packing.",
  );
  for (const failure of failures) console.error(`FAILED ${failure}`);
  console.log(JSON.stringify({ traces: report }));
  return failures.length === 0 ? 0 : 1;
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(1)}%`;
}

try {
  process.exitCode = main();
} catch (error) {
  console.error((error as Error).message);
  process.exit(1);
}
