/**
 * Runs a PyTorch anchor of bench/anchors/ (the same block as ours, written out in plain PyTorch) with Debian's
 * python3-torch and reads its tokens/s and parameter count, or returns null with the reason when it cannot run here.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";

/** The blocks with an anchor: GPT-2's (bench/anchors/torch_gpt.py) and Llama's (torch_llama.py). */
export type AnchorBlock = "gpt" | "llama";

/** d: dModel, L: layers, H: heads, T: context and sequence length, V: vocabulary, B: sequences a step. */
export interface AnchorShape {
  d: number;
  L: number;
  H: number;
  T: number;
  V: number;
  B: number;
  /** Llama's block: this many key/value heads and this MLP width (SwiGLU) */
  llama?: { kv: number; ff: number };
}

export type AnchorResult = { tokensPerSecond: number; params: number; line: string } | { tokensPerSecond: null; reason: string };

export function anchorScriptPath(repoRoot: string, block: AnchorBlock): string {
  return resolve(repoRoot, "bench", "anchors", `torch_${block}.py`);
}

/**
 * The anchor of `s`'s block in `mode`, for `seconds` of timed calls. `cpuTime`: one thread, timed by the process's
 * CPU time (OpenBLAS's and OpenMP's threads are set to 1 here too, before Python starts).
 */
export function runTorchAnchor(
  repoRoot: string,
  mode: "train" | "sample",
  s: AnchorShape,
  options: { cpuTime: boolean; seconds: number },
  python = "/usr/bin/python3",
): AnchorResult {
  const block: AnchorBlock = s.llama ? "llama" : "gpt";
  const script = anchorScriptPath(repoRoot, block);
  if (!existsSync(python)) return { tokensPerSecond: null, reason: `no ${python}` };
  const shape = s.llama ? [s.d, s.L, s.H, s.llama.kv, s.llama.ff, s.T, s.V, s.B] : [s.d, s.L, s.H, s.T, s.V, s.B];
  const flags = [...(options.cpuTime ? ["--cpu-time"] : []), "--seconds", String(options.seconds)];
  const env = options.cpuTime ? { ...process.env, OPENBLAS_NUM_THREADS: "1", OMP_NUM_THREADS: "1" } : process.env;
  const run = spawnSync(python, [script, mode, ...shape.map(String), ...flags], { encoding: "utf8", timeout: 600_000, env });
  const line = (run.stdout ?? "").trim().split("\n").at(-1) ?? "";
  const tokens = /tokens\/s=(\d+(?:\.\d+)?)/.exec(line);
  const params = /params=(\d+)/.exec(line);
  if (run.status !== 0 || !tokens || !params) {
    const why = (run.stderr ?? "").trim().split("\n").at(-1) || (run.error?.message ?? `exit ${run.status}`);
    return { tokensPerSecond: null, reason: why.includes("No module named 'torch'") ? "python3-torch is not installed" : why };
  }
  return { tokensPerSecond: Number(tokens[1]), params: Number(params[1]), line };
}
