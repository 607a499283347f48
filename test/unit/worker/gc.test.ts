/** How a worker's V8 collects garbage on a small machine (server/worker/gc.ts). */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { mainThreadMarkingFlag, marksOnMainThread, rolloutProcessFlags } from "@/server/worker/gc";
import { workerCommand } from "@/server/worker/local-workers";

const root = path.resolve(__dirname, "../../..");

describe("garbage collection in a process that plays rollouts", () => {
  it("marks on the main thread on fewer than three cores, and keeps V8's default on more", () => {
    expect(rolloutProcessFlags(1)).toEqual([mainThreadMarkingFlag]);
    expect(rolloutProcessFlags(2)).toEqual([mainThreadMarkingFlag]);
    expect(rolloutProcessFlags(3)).toEqual([]);
    expect(rolloutProcessFlags(16)).toEqual([]);
    expect(marksOnMainThread(2)).toBe(true);
  });

  it("reaches the worker's process, which is the one started (a signal to it reaches the worker itself)", () => {
    // startLocalWorkers' command line, with a script that says how it was started in place of the worker.
    const script = path.join(__dirname, "fixtures", "print-gc.ts");
    const run = (flags: string[]) => spawnSync(process.execPath, workerCommand(root, flags, script, []), { cwd: root, encoding: "utf8" });
    const flagged = run([mainThreadMarkingFlag]);
    expect(flagged.stderr).toBe("");
    const [gc, pid] = flagged.stdout.trim().split("\n");
    expect(gc).toBe("main thread");
    expect(Number(pid)).toBe(flagged.pid);
    expect(run([]).stdout.trim().split("\n")[0]).toBe("concurrent");
  }, 60_000);
});
