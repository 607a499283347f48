/**
 * Runs the PyTorch reference (../shared/anchors/torch_tiny_gpt.py relative to the repo root) with Debian's
 * python3-torch and reads its tokens/s, or returns null with the reason when it cannot run here.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";

export interface AnchorShape {
  d: number;
  L: number;
  H: number;
  T: number;
  V: number;
  B: number;
}

export type AnchorResult = { tokensPerSecond: number; line: string } | { tokensPerSecond: null; reason: string };

export function anchorScriptPath(repoRoot: string): string {
  return resolve(repoRoot, "../shared/anchors/torch_tiny_gpt.py");
}

export function runTorchAnchor(repoRoot: string, mode: "train" | "sample", s: AnchorShape, python = "/usr/bin/python3"): AnchorResult {
  const script = anchorScriptPath(repoRoot);
  if (!existsSync(script)) return { tokensPerSecond: null, reason: `no anchor script at ${script}` };
  if (!existsSync(python)) return { tokensPerSecond: null, reason: `no ${python}` };
  const run = spawnSync(python, [script, mode, ...[s.d, s.L, s.H, s.T, s.V, s.B].map(String)], {
    encoding: "utf8",
    timeout: 120_000,
  });
  const line = (run.stdout ?? "").trim().split("\n").at(-1) ?? "";
  const match = /tokens\/s=(\d+(?:\.\d+)?)/.exec(line);
  if (run.status !== 0 || !match) {
    const why = (run.stderr ?? "").trim().split("\n").at(-1) || `exit ${run.status}`;
    return { tokensPerSecond: null, reason: why.includes("No module named 'torch'") ? "python3-torch is not installed" : why };
  }
  return { tokensPerSecond: Number(match[1]), line };
}

/** A Llama-style shape (bench/lib/torch_llama.py): the anchor's fields plus key/value heads and the MLP's width. */
export interface LlamaAnchorShape extends AnchorShape {
  kv: number;
  ff: number;
}

export function llamaScriptPath(repoRoot: string): string {
  return resolve(repoRoot, "bench/lib/torch_llama.py");
}

/**
 * Runs bench/lib/torch_llama.py (plain PyTorch, the Llama block written out) on `s` and reads its tokens/s and
 * parameter count. `cpuTime`: one thread, timed by the process's CPU time (the script sets torch's threads, and
 * OpenBLAS's and OpenMP's are set to 1 here before it starts), as bench:train's --cpu-time does for the anchor.
 */
export function runTorchLlama(
  repoRoot: string,
  mode: "train" | "sample",
  s: LlamaAnchorShape,
  options: { cpuTime: boolean; seconds: number },
  python = "/usr/bin/python3",
): AnchorResult & { params?: number } {
  if (!existsSync(python)) return { tokensPerSecond: null, reason: `no ${python}` };
  const shape = [s.d, s.L, s.H, s.kv, s.ff, s.T, s.V, s.B].map(String);
  const flags = [...(options.cpuTime ? ["--cpu-time"] : []), "--seconds", String(options.seconds)];
  const env = options.cpuTime ? { ...process.env, OPENBLAS_NUM_THREADS: "1", OMP_NUM_THREADS: "1" } : process.env;
  const run = spawnSync(python, [llamaScriptPath(repoRoot), mode, ...shape, ...flags], { encoding: "utf8", timeout: 600_000, env });
  const line = (run.stdout ?? "").trim().split("\n").at(-1) ?? "";
  const match = /tokens\/s=(\d+(?:\.\d+)?)/.exec(line);
  if (run.status !== 0 || !match) {
    const why = (run.stderr ?? "").trim().split("\n").at(-1) || `exit ${run.status}`;
    return { tokensPerSecond: null, reason: why.includes("No module named 'torch'") ? "python3-torch is not installed" : why };
  }
  const params = /params=(\d+)/.exec(line);
  return { tokensPerSecond: Number(match[1]), line, params: params ? Number(params[1]) : undefined };
}
