/**
 * What crosses the boundary, in the compact forms the bridge and the host agree on (server/sandbox/wire.ts):
 * batches by columns, each crossing's answers as one flat array of records, metrics as pairs, a repeated system
 * prompt sent once. The answers must be the native session's, whatever the text holds and however much of it.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { type DatasetRow, EnvironmentSession } from "@/lib/sdk/environment";
import { SandboxError, SandboxedEnvironmentPool, compileEnvironment } from "@/server/sandbox";
import { QuickJSEngine } from "@/server/sandbox/quickjs-engine";
import { type GuestOp, encodeRequest } from "@/server/sandbox/wire";
import rows from "./fixtures/rows-env";
import { createPool, envSource, fastLimits, firstError } from "./helpers";

const rowSource = readFileSync(fileURLToPath(new URL("./fixtures/rows-env.ts", import.meta.url)), "utf8");

/** Resets every slot and plays `actions` in each, one crossing a round, against native sessions; both sides' answers. */
async function playBoth(pool: SandboxedEnvironmentPool, starts: { seed: number; sample?: DatasetRow }[], actions: string[]) {
  const natives = starts.map(() => new EnvironmentSession(rows));
  const native: unknown[] = [];
  const sandboxed: unknown[] = [];
  const resets = await pool.resetMany(starts.map((start, slot) => ({ slot, ...start })));
  starts.forEach(({ seed, sample }, slot) => {
    const session = natives[slot]!;
    const observation = session.reset(seed, sample);
    native.push({ observation, systemPrompt: session.systemPrompt, render: session.render() ?? null, legalActions: null });
    sandboxed.push(resets[slot]);
  });
  for (const action of actions) {
    const live = starts.map((_, slot) => slot).filter((slot) => !natives[slot]!.summary().done);
    if (live.length === 0) break;
    const steps = await pool.stepMany(live.map((slot) => ({ slot, action })));
    live.forEach((slot, i) => {
      const session = natives[slot]!;
      native.push({ ...session.step(action), render: session.render() ?? null, legalActions: null });
      const { end, ...step } = steps[i]!;
      sandboxed.push(step);
      if (end) expect(end).toEqual({ ...session.summary(), state: undefined, done: undefined, score: session.score(), breakdown: session.rewardBreakdown() });
    });
  }
  return { native, sandboxed };
}

describe("the wire", () => {
  it("answers like the native session: prompts by row, metrics as pairs, info, invalid actions and truncation", async () => {
    const pool = await SandboxedEnvironmentPool.create({ files: { "environment.ts": rowSource } });
    const rows = [
      { topic: "cats", text: "a" },
      { topic: "cats", text: "b" },
      { topic: "dogs", text: "c" },
      { topic: "cats", text: "d" },
    ];
    // the same prompt in a row crosses once and a changed one in full; the host restores each
    const starts = [...rows, ...rows].map((sample, i) => ({ seed: i, sample }));
    const { native, sandboxed } = await playBoth(pool, starts, ["go", "bad", "info", "stop", "never"]);
    expect(sandboxed).toEqual(native);
    expect(sandboxed.map((answer) => (answer as { systemPrompt?: string }).systemPrompt).slice(0, 4)).toEqual([
      "Answer about cats.",
      "Answer about cats.",
      "Answer about dogs.",
      "Answer about cats.",
    ]);
    // the metrics arrive as a fresh record of their own keys
    await pool.resetMany([{ slot: 0, seed: 1, sample: rows[0] }]);
    const [step] = await pool.stepMany([{ slot: 0, action: "go" }]);
    expect(Object.keys(step!.metrics)).toEqual(["__proto", "length", "ratio"]);
    expect(Object.getPrototypeOf(step!.metrics)).toBe(Object.prototype);
    expect(step!.metrics.ratio).toBe(2 / 3);
    pool.dispose();
  });

  it("carries any text exactly, however much of it one crossing holds", async () => {
    const pool = await SandboxedEnvironmentPool.create({ files: { "rows-env.ts": rowSource } });
    // 12 episodes of 90,000 characters: several times what the guest serializes at once, so it hands them over in parts
    const texts = ["é".repeat(90_000), 'x\u2028"\\\n\t'.repeat(15_000), "😀".repeat(45_000), "\ud800 lone " + "y".repeat(89_993)];
    const starts = Array.from({ length: 12 }, (_, i) => ({ seed: i, sample: { topic: "t", text: texts[i % texts.length]! } }));
    const { native, sandboxed } = await playBoth(pool, starts, ["go", "stop"]);
    expect(sandboxed).toEqual(native);
    expect((sandboxed[3] as { observation: string }).observation.slice(0, 6)).toBe("\ud800 lone");
    pool.dispose();
  });

  it("names the metric that is not a finite number, at the user's step", async () => {
    for (const [metrics, shown] of [
      ["{ a: 1, b: NaN }", "metrics.b NaN"],
      [`{ a: "1" }`, `metrics.a "1" (a string)`],
      ["[1]", "metrics an array"],
    ] as const) {
      const pool = await createPool({ step: `return { state, observation: "o", reward: 0, done: false, metrics: ${metrics} as any };` });
      await pool.resetMany([{ slot: 0, seed: 1 }]);
      const error = await firstError(() => pool.stepMany([{ slot: 0, action: "go" }]));
      expect(error).toBeInstanceOf(SandboxError);
      expect(error.kind).toBe("contract");
      expect(error.message).toContain(`step 1 of episode 0 (seed 1): step() returned ${shown}`);
      expect(error.location).toMatchObject({ file: "environment.ts", line: 14 });
      pool.dispose();
    }
  });

  it("fails with a clear error when user code forges the answers through toJSON", async () => {
    const pool = await createPool(
      { step: `(Array.prototype as any).toJSON = function () { return [1, 2, 3]; }; return { state, observation: "o", reward: 0, done: false };` },
      fastLimits,
    );
    await pool.resetMany([
      { slot: 0, seed: 1 },
      { slot: 1, seed: 2 },
    ]);
    const error = await firstError(() =>
      pool.stepMany([
        { slot: 0, action: "go" },
        { slot: 1, action: "go" },
      ]),
    );
    expect(error).toBeInstanceOf(SandboxError);
    expect(error.message).toMatch(/the sandbox answered a batch of 2 step calls with 2 ops in a malformed shape|the answer is malformed/);
    await expect(pool.resetMany([{ slot: 0, seed: 1 }])).rejects.toThrow(error.message);
    pool.dispose();
  });

  it("sends batches of steps and of resets by columns, and other batches as their ops", async () => {
    expect(
      JSON.parse(
        encodeRequest([
          ["step", 3, "a"],
          ["step", 5, "b"],
        ]),
      ),
    ).toEqual(["step", [3, 5], ["a", "b"]]);
    expect(
      JSON.parse(
        encodeRequest([
          ["reset", 0, 7, null],
          ["reset", 1, 8, null],
        ]),
      ),
    ).toEqual(["reset", [0, 1], [7, 8], 0]);
    expect(
      JSON.parse(
        encodeRequest([
          ["reset", 0, 7, null],
          ["reset", 1, 8, { q: "x" }],
        ]),
      ),
    ).toEqual(["reset", [0, 1], [7, 8], [null, { q: "x" }]]);
    const mixed: GuestOp[] = [
      ["reset", 0, 7, null],
      ["step", 0, "a"],
      ["score", 0],
    ];
    expect(JSON.parse(encodeRequest(mixed))).toEqual(["ops", mixed]);
    // the guest answers each form alike: one flat array of records, the repeated prompt as true
    const compiled = await compileEnvironment({ "environment.ts": envSource() });
    if (!compiled.ok) throw new Error(compiled.diagnostics[0]!.message);
    const { engine } = await QuickJSEngine.load(compiled.compiled.code, "sandbox.js", { memoryMb: 32, maxStackKb: 256, cpuMsPerEpisode: 1_000 }, () => {});
    const run = (ops: GuestOp[]) => {
      const answer = engine!.run(encodeRequest(ops), new Float64Array(ops.length).fill(100), () => {});
      return answer.ok ? (JSON.parse(answer.results) as unknown[]) : answer;
    };
    expect(run([["configure", 100_000]])).toEqual([0]);
    expect(
      run([
        ["reset", 0, 1, null],
        ["reset", 1, 2, null],
      ]),
    ).toEqual([3, "start", "play", null, 3, "start", true, null]);
    expect(
      run([
        ["step", 0, "go"],
        ["step", 1, "go"],
      ]),
    ).toEqual([4, "n=1", 1, 0, null, 4, "n=1", 1, 0, null]);
    expect(run(mixed)).toEqual([3, "start", true, null, 4, "n=1", 1, 0, null, 1, 1]);
  });
});
