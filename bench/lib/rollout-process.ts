import { spawnSync } from "node:child_process";
import { missingRolloutFlags } from "@/server/worker";

/**
 * Makes this bench the process a worker is (server/worker/gc.ts): when it was started without the flags a worker
 * playing rollouts gets on this machine (`--no-concurrent-marking` on fewer than three cores), it runs itself
 * again with them, waits, and exits with that run's status. `keepDefaults`: run as started (to compare with V8's
 * defaults).
 */
export function runAsRolloutProcess(keepDefaults = false): void {
  const missing = keepDefaults ? [] : missingRolloutFlags();
  if (missing.length === 0) return;
  const child = spawnSync(process.execPath, [...missing, ...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  process.exit(child.status ?? 1);
}
