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
