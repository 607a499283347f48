/**
 * This machine's fused multiply-add peak: bench/lib/fma-peak.cc, built with g++ once for each instruction set
 * (into the native kernel's cache folder), runs independent chains of FMAs on the widest vectors of that set
 * (2 operations per lane of each FMA) on `threads` threads; the best of `rounds` runs of 200 ms, per second of
 * the threads' CPU time and of wall time. The peak a kernel's share is taken of is the one-thread CPU-time
 * figure of the widest set the CPU runs: the most one core can do.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NativeIsa } from "@/native/kernel";

const peakSource = fileURLToPath(new URL("./fma-peak.cc", import.meta.url));
const peakFlags: Record<NativeIsa, string[]> = { avx512: ["-mavx512f", "-mfma"], avx2: ["-mavx2", "-mfma"] };

/** The peak program for `isa`, built unless it is there already. */
function peakProgram(isa: NativeIsa): string {
  const flags = ["-O2", "-std=c++17", "-pthread", ...peakFlags[isa]];
  const key = createHash("sha256").update(readFileSync(peakSource)).update(flags.join(" ")).digest("hex").slice(0, 16);
  const dir = fileURLToPath(new URL("../../node_modules/.cache/tinkerlab-native/", import.meta.url));
  const program = join(dir, `fma-peak-${isa}-${key}`);
  if (!existsSync(program)) {
    mkdirSync(dir, { recursive: true });
    execFileSync("g++", [...flags, peakSource, "-o", `${program}.${process.pid}`], { stdio: ["ignore", "ignore", "pipe"] });
    renameSync(`${program}.${process.pid}`, program);
  }
  return program;
}

type PeakRun = { flops: number; wall_s: number; cpu_s: number };

/** Best GFLOP/s of `rounds` runs on `threads` threads: per second of the threads' CPU time, and of wall time. */
export function fmaPeak(isa: NativeIsa, threads: number, rounds: number): { cpu: number; wall: number } {
  const program = peakProgram(isa);
  let cpu = 0;
  let wall = 0;
  for (let r = 0; r < rounds; r++) {
    const run = JSON.parse(execFileSync(program, [String(threads), "200"], { encoding: "utf8" })) as PeakRun;
    cpu = Math.max(cpu, run.flops / run.cpu_s / 1e9);
    wall = Math.max(wall, run.flops / run.wall_s / 1e9);
  }
  return { cpu, wall };
}
