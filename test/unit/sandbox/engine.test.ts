/** The engine inside the sandbox's thread, run here directly: both ways of entering the guest agree. */
import { describe, expect, it } from "vitest";
import { compileEnvironment } from "@/server/sandbox";
import { QuickJSEngine } from "@/server/sandbox/quickjs-engine";
import { type GuestOp, encodeRequest } from "@/server/sandbox/wire";
import { envSource } from "./helpers";

async function load(lowLevelCalls: boolean) {
  const source = envSource({
    step: `if (action === "spin") while (true) {} return { state: { n: state.n + 1 }, observation: "n=" + (state.n + 1) + " é", reward: 0.5, done: false, info: { action } };`,
  });
  const compiled = await compileEnvironment({ "environment.ts": source });
  if (!compiled.ok) throw new Error(compiled.diagnostics[0]!.message);
  const { engine, outcome } = await QuickJSEngine.load(
    compiled.compiled.code,
    "sandbox.js",
    { memoryMb: 32, maxStackKb: 256, cpuMsPerEpisode: 1_000 },
    () => {},
    { lowLevelCalls },
  );
  expect(outcome).toEqual({ ok: true });
  return engine!;
}

const ops: GuestOp[] = [
  ["configure", 100_000],
  ["reset", 0, 1, null],
  ["step", 0, "go"],
  ["step", 0, "ünïcode ✓"],
  ["step", 9, "no episode"],
];

describe("QuickJSEngine", () => {
  it("answers the same through the low-level calls as through the public API, failures and interrupts included", async () => {
    const [fast, plain] = await Promise.all([load(true), load(false)]);
    const run = (engine: QuickJSEngine, batch: GuestOp[], budgetMs = 100) =>
      engine.run(encodeRequest(batch), new Float64Array(batch.length).fill(budgetMs), () => {});
    const answer = run(fast, ops);
    if (!answer.ok) throw new Error(`the batch failed: ${JSON.stringify(answer)}`);
    expect(answer.results).toBe((run(plain, ops) as typeof answer).results);
    // one flat array of records: configure (no values), the reset (3), two steps (4 each: no metrics), a failure
    const results = JSON.parse(answer.results) as unknown[];
    expect(results.slice(0, 9)).toEqual([0, 3, "start", "play", null, 4, "n=1 é", 0.5, { action: "go" }]);
    expect(results.slice(10, 15)).toEqual([4, "n=2 é", 0.5, { action: "ünïcode ✓" }, null]);
    expect(results[15]).toBe(-1);
    expect(results[16]).toMatchObject({ kind: "runtime", message: "slot 9 has no episode; reset it first" });
    expect(results).toHaveLength(17);
    // An op stopped by the interrupt handler escapes the bridge; both ways report it alike, with the stack of
    // where it was stopped (the user's loop, in the bundle)
    for (const engine of [fast, plain]) {
      const stopped = run(engine, [["step", 0, "spin"]], 20);
      expect(stopped).toMatchObject({ ok: false, op: 0, error: { name: "InternalError", message: "interrupted" } });
      expect(stopped.ok === false && stopped.error?.stack).toMatch(/at step \(sandbox\.js:\d+:\d+\)/);
      expect(stopped.ok === false && stopped.overrunMs).toBeGreaterThan(20);
    }
  });
});
