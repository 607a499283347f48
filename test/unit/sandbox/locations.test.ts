/**
 * Where user code was when it failed, for the errors that carry no stack of their own: an op stopped at its CPU
 * limit (the interrupt's stack, mapped through the source map), an error thrown while the module loads, and
 * validation's dry run stopped at its own CPU budget.
 */
import { describe, expect, it } from "vitest";
import { type SandboxError, SandboxLimitError, SandboxedEnvironmentPool, compileEnvironment } from "@/server/sandbox";
import { validateExperimentSource } from "@/server/sandbox/validate";
import { busyStep, createPool, envSource, fastLimits, firstError } from "./helpers";

/** envSource's step body is line 15 of environment.ts, and `step(` is on line 14 (column 3). */
const stepBodyLine = 15;
const stepLine = 14;

const loadError = (source: string, limits = fastLimits) =>
  firstError(() => SandboxedEnvironmentPool.create({ files: { "environment.ts": source } }, { limits })) as Promise<SandboxError & Record<string, unknown>>;

describe("locations of errors without a stack of their own", () => {
  it("places a loop stopped at the per-call CPU limit in its function, at its line where QuickJS records one", async () => {
    const pool = await createPool({ step: "let spins = 0; while (Math.abs(spins) >= 0) { spins++; }" });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const error = await firstError(() => pool.stepMany([{ slot: 0, action: "go" }]));
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("cpuMsPerCall");
    if (/stopped by the watchdog/.test(error.message)) {
      // the thread was terminated (a busy machine): no stack, so the definition of the function the op called
      expect(error.location).toMatchObject({ file: "environment.ts", line: stepLine });
      expect(error.message).toMatch(/ in step\(\) \(environment\.ts:14:3\)$/);
    } else {
      // the interrupt's frame: the loop's call (Math.abs) when QuickJS stopped it there, else the last position
      // it recorded before the loop's head, which here is the function's start
      expect(error.location).toMatchObject({ file: "environment.ts" });
      expect([stepLine, stepBodyLine]).toContain((error.location as { line: number }).line);
      expect(error.message).toMatch(/^step 1 of episode 0 \(seed 1\) exceeded cpuMsPerCall=100 ms \(ran \d+ ms\) in step\(\) \(environment\.ts:1[45]:\d+\)$/);
      expect(error.userStack).toMatch(/^\s+at step \(environment\.ts:1[45]:\d+\)/);
    }
    pool.dispose();
  });

  it("names the function of a loop of plain arithmetic, where QuickJS records no position of its own", async () => {
    const pool = await createPool({ step: "let spins = 0; while (true) { spins++; }" });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const error = await firstError(() => pool.stepMany([{ slot: 0, action: "go" }]));
    expect(error.limit).toBe("cpuMsPerCall");
    expect(error.location).toMatchObject({ file: "environment.ts", line: stepLine });
    expect(error.message).toMatch(/ in step\(\) \(environment\.ts:14:3\)$/);
    pool.dispose();
  });

  it("places a loop in a helper file in its function, with the step that called it", async () => {
    const helper = [
      "// helpers",
      "export function spin(): number {",
      "  let n = 0;",
      "  while (Math.abs(n) >= 0) n = (n * 31 + 7) % 1000003;",
      "  return n;",
      "}",
      "",
    ].join("\n");
    const source = envSource({ top: `import { spin } from "./helper";`, step: "return { state, reward: spin(), done: true };" });
    const pool = await SandboxedEnvironmentPool.create({ files: { "environment.ts": source, "helper.ts": helper } }, { limits: fastLimits });
    await pool.resetMany([{ slot: 0, seed: 2 }]);
    const error = await firstError(() => pool.stepMany([{ slot: 0, action: "go" }]));
    expect(error.limit).toBe("cpuMsPerCall");
    if (/stopped by the watchdog/.test(error.message)) {
      // the thread was terminated (a busy machine): no stack, so the definition of the function the op called
      expect(error.location).toMatchObject({ file: "environment.ts", line: stepLine });
      expect(error.message).toMatch(/ in step\(\) \(environment\.ts:14:3\)$/);
    } else {
      expect(error.location).toMatchObject({ file: "helper.ts" });
      expect([2, 4]).toContain((error.location as { line: number }).line);
      expect(error.message).toMatch(/ in spin\(\) \(helper\.ts:[24]:\d+\)$/);
      expect(error.userStack).toMatch(/^\s+at spin \(helper\.ts:[24]:\d+\)\n\s+at step \(environment\.ts:15:\d+\)/);
    }
    pool.dispose();
  });

  it("names the line of a loop stopped at the per-episode CPU limit", async () => {
    // the fourth step loops until what is left of the episode's 400 ms runs out (the per-call limit is higher)
    const pool = await createPool({ maxTurns: 1000, step: `if (state.n >= 3) while (true) {} ${busyStep(40)}` }, { ...fastLimits, cpuMsPerCall: 1_000 });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const error = await firstError(async () => {
      for (let i = 0; i < 4; i++) await pool.stepMany([{ slot: 0, action: "go" }]);
    });
    expect(error.limit).toBe("cpuMsPerEpisode");
    expect(error.message).toMatch(/^step 4 of episode 0 \(seed 1\) exceeded cpuMsPerEpisode=400 ms/);
    expect(error.location).toMatchObject({ file: "environment.ts" });
    expect([stepLine, stepBodyLine]).toContain((error.location as { line: number }).line);
    pool.dispose();
  });

  it("places a loop at load time in the file it runs in", async () => {
    const error = await loadError(envSource({ top: "let spins = 0; while (Math.abs(spins) >= 0) { spins++; }" }), { ...fastLimits, cpuMsPerEpisode: 200 });
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("cpuMsPerEpisode");
    if (/stopped by the watchdog/.test(error.message)) {
      // the thread was terminated from outside (a busy machine): no stack, and top-level code has no function
      expect(error.message).toBe("loading the environment exceeded cpuMsPerEpisode=200 ms (stopped by the watchdog)");
      expect(error.location).toBeNull();
    } else {
      // top-level code: the loop's call, or the last position QuickJS recorded before the loop (the module's start)
      expect(error.location).toMatchObject({ file: "environment.ts" });
      expect([1, 2]).toContain((error.location as { line: number }).line);
      expect(error.message).toMatch(/^loading the environment exceeded cpuMsPerEpisode=200 ms at environment\.ts:[12]:\d+$/);
    }
  });

  it("names the line of an error thrown while the module loads", async () => {
    const lines = [`import { defineEnvironment } from "tinkerlab";`, "// the table is not there yet", `throw new Error("x");`, ""];
    const thrown = await loadError(lines.join("\n") + envSource().split("\n").slice(1).join("\n"));
    expect(thrown.kind).toBe("runtime");
    expect(thrown.location).toMatchObject({ file: "environment.ts", line: 3 });
    expect(thrown.message).toMatch(/^loading the environment threw Error: x \(at environment\.ts:3:\d+\)$/);

    const undefinedRead = await loadError(envSource({ top: "// nothing yet\nconst missing = (undefined as any).foo;" }));
    expect(undefinedRead.kind).toBe("runtime");
    expect(undefinedRead.location).toMatchObject({ file: "environment.ts", line: 3 });
    expect(undefinedRead.message).toMatch(/TypeError.*\(at environment\.ts:3:\d+\)$/);
  });

  it("names the line of an error thrown while a second file loads", async () => {
    const helper = ["// helpers", "export const table: number[] = [];", "if (table.length === 0) throw new RangeError(`empty table`);", ""].join("\n");
    const source = envSource({ top: `import { table } from "./helper";`, step: "return { state, reward: table[0]!, done: true };" });
    const compiled = await compileEnvironment({ "environment.ts": source, "helper.ts": helper });
    if (!compiled.ok) throw new Error(compiled.diagnostics[0]!.message);
    const error = await firstError(() => SandboxedEnvironmentPool.create(compiled.compiled, { limits: fastLimits }));
    expect(error.location).toMatchObject({ file: "helper.ts", line: 3 });
    expect(error.message).toMatch(/^loading the environment threw RangeError: empty table \(at helper\.ts:3:\d+\)$/);
  });
});

describe("validation's dry run", () => {
  it("stops at its own CPU budget, naming dryRunCpuMs and the line, long before the request's time limit", async () => {
    // Three steps within every limit, then one that never returns: with a per-call limit above the dry run's
    // budget, what is left of that budget is what stops it, whatever share of a core the thread gets.
    const report = await validateExperimentSource(
      { "environment.ts": envSource({ maxTurns: 1000, step: `if (state.n >= 3) while (true) {} ${busyStep(20)}` }) },
      { typeCheck: false, dryRunCpuMs: 500, limits: { cpuMsPerCall: 1_000 } },
    );
    expect(report.ok).toBe(false);
    const error = report.diagnostics.find((d) => d.severity === "error")!;
    expect(error).toMatchObject({ source: "limit", file: "environment.ts" });
    expect([stepLine, stepBodyLine]).toContain(error.line);
    expect(error.message).toMatch(/^step 4 of episode 0 \(seed 0\) exceeded validation's CPU budget for its dry run, dryRunCpuMs=500 ms/);
    expect(error.message).toMatch(/it had played 4 steps, in episode 1 of 3, about [\d.]+ ms each/);
    // stopped at the budget as the sandbox counts CPU time (its interrupt at 500 ms, the watchdog from 25 ms
    // later), not at the request's 60 s
    const ran = Number(/\(the dry run ran ([\d,]+) ms/.exec(error.message)?.[1]?.replaceAll(",", ""));
    expect(ran).toBeGreaterThanOrEqual(500);
    expect(ran).toBeLessThanOrEqual(2 * 500);
  });

  it("plays a well-behaved environment within its default budget", async () => {
    const report = await validateExperimentSource({ "environment.ts": envSource() }, { typeCheck: false });
    expect(report.ok).toBe(true);
    expect(report.episodes).toHaveLength(3);
  });
});
