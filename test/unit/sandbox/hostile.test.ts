/**
 * Hostile environments: each must fail with a clear error (the limit or the cause named), leave the failed pool
 * failed, and leave the host and every other sandbox working. Nothing may be written outside the sandbox.
 */
import { readdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SandboxError, SandboxLimitError, SandboxedEnvironmentPool } from "@/server/sandbox";
import { busyStep, createPool, envSource, fastLimits, firstError } from "./helpers";

let bystander: SandboxedEnvironmentPool;
const repoFilesBefore = readdirSync(process.cwd()).sort();

beforeAll(async () => {
  bystander = await createPool();
  await bystander.resetMany([{ slot: 0, seed: 1 }]);
});

afterAll(() => {
  bystander.dispose();
});

/** The run next door still works, and the host's own realm is untouched. */
async function expectBystanderUnaffected() {
  await bystander.resetMany([{ slot: 0, seed: 7 }]);
  const [step] = await bystander.stepMany([{ slot: 0, action: "go" }]);
  expect(step).toMatchObject({ observation: "n=1", reward: 1, done: false });
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(Object.prototype).not.toHaveProperty("polluted");
}

/** Resets slot 0 and steps it until an error; returns that error. */
async function stepUntilError(pool: SandboxedEnvironmentPool, steps = 50) {
  return firstError(async () => {
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    for (let i = 0; i < steps; i++) {
      const [step] = await pool.stepMany([{ slot: 0, action: "go" }]);
      if (step!.done) await pool.resetMany([{ slot: 0, seed: 1 }]);
    }
  });
}

describe("hostile environments", () => {
  it("stops an infinite loop at the per-call CPU limit", async () => {
    const pool = await createPool({ step: "while (true) {}" });
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("cpuMsPerCall");
    // stopped at the limit as the sandbox counts CPU time: by the interrupt handler at 100 ms, or by the watchdog
    // from 25 ms later (as late as this thread looks), never after the loop ran on unchecked
    expect(error.reached).toBeGreaterThanOrEqual(100);
    expect(error.reached).toBeLessThanOrEqual(2 * 100 + 50);
    // the interrupt handler stops it; on a loaded machine the watchdog may get there first
    expect(error.message).toMatch(/step 1 of episode 0 \(seed 1\) exceeded cpuMsPerCall=100 ms \(ran \d+ ms(; stopped by the watchdog)?\)/);
    // the pool stays failed with the same reason
    await expect(pool.resetMany([{ slot: 0, seed: 2 }])).rejects.toThrow(error.message);
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("stops an infinite loop that catches its own errors", async () => {
    const pool = await createPool({ step: "for (;;) { try { while (true) {} } catch (e) {} }" });
    const error = await stepUntilError(pool);
    expect(error.limit).toBe("cpuMsPerCall");
    pool.dispose();
  });

  it("stops an infinite loop at load time", async () => {
    const error = await firstError(() => createPool({ top: "while (true) {}" }, { ...fastLimits, cpuMsPerEpisode: 200 }));
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.message).toMatch(/loading the environment exceeded cpuMsPerEpisode=200 ms/);
    await expectBystanderUnaffected();
  });

  it("stops an episode at the per-episode CPU limit, though no call passes its own", async () => {
    // Three steps of up to 40 ms, then one that never returns: under the per-call limit (1,000 ms) until what is
    // left of the episode's 400 ms runs out, whatever share of a core the thread gets.
    const pool = await createPool({ maxTurns: 1000, step: `if (state.n >= 3) while (true) {} ${busyStep(40)}` }, { ...fastLimits, cpuMsPerCall: 1_000 });
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("cpuMsPerEpisode");
    expect(error.message).toMatch(/^step 4 of episode 0 \(seed 1\) exceeded cpuMsPerEpisode=400 ms \(the episode ran \d+ ms(; stopped by the watchdog)?\)/);
    expect(error.reached).toBeGreaterThanOrEqual(400);
    expect(error.reached).toBeLessThanOrEqual(2 * 400);
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("stops a memory bomb at the memory limit", async () => {
    const pool = await createPool(
      { step: `const hoard: number[][] = []; while (true) hoard.push(new Array(100_000).fill(state.n));` },
      { ...fastLimits, cpuMsPerCall: 1_000, cpuMsPerEpisode: 2_000 },
    );
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("memoryMb");
    expect(error.message).toMatch(/ran out of memory: exceeded memoryMb=24/);
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("stops a memory bomb that is caught and retried", async () => {
    const pool = await createPool({
      step: `const hoard: number[][] = []; for (let i = 0; i < 1e9; i++) { try { hoard.push(new Array(100_000).fill(i)); } catch { } } return null as any;`,
    });
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(["memoryMb", "cpuMsPerCall"]).toContain(error.limit);
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("stops deep recursion at the stack limit", async () => {
    const pool = await createPool({ top: "function dive(n: number): number { return dive(n + 1) + 1; }", step: "dive(0); return null as any;" });
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("maxStackKb");
    expect(error.message).toMatch(/overflowed the stack: recursion deeper than maxStackKb=256 KiB allows/);
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("rejects a huge observation with its length and the limit", async () => {
    const pool = await createPool({ step: `return { state, observation: "x".repeat(2_000_001), reward: 0, done: false };` }, { ...fastLimits, memoryMb: 64 });
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("maxObservationChars");
    expect(error.message).toContain("observation is 2,000,001 characters; limit maxObservationChars=100,000");
    pool.dispose();
  });

  it("rejects a huge info, or observation and render each under the limit but over it together, by what is too large", async () => {
    const pool = await createPool({ step: `return { state, observation: "o", reward: 0, done: false, info: { rows: Array(30_000).fill("abc") } };` });
    const error = await stepUntilError(pool);
    expect(error.limit).toBe("maxObservationChars");
    expect(error.message).toContain("step 1 of episode 0 (seed 1): info as JSON is 180,010 characters; limit maxObservationChars=100,000");
    pool.dispose();
    // the whole answer is over the limit, no field is: nothing to reject
    const fits = await createPool({
      step: `return { state, observation: "x".repeat(60_000), reward: 0, done: false, info: { note: "y".repeat(60_000) } };`,
      extra: `  render: () => "z".repeat(60_000),`,
    });
    await fits.resetMany([{ slot: 0, seed: 1 }]);
    const [step] = await fits.stepMany([{ slot: 0, action: "go" }]);
    expect([step!.observation!.length, step!.render!.length, (step!.info.note as string).length]).toEqual([60_000, 60_000, 60_000]);
    fits.dispose();
  });

  it("rejects a string too large for memory", async () => {
    const pool = await createPool({ step: `let s = "x"; while (true) s = s + s; return null as any;` });
    const error = await stepUntilError(pool);
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect(error.limit).toBe("memoryMb");
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("rejects a huge action before it crosses", async () => {
    const pool = await createPool({}, { ...fastLimits, maxActionChars: 100 });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const error = await firstError(() => pool.stepMany([{ slot: 0, action: "a".repeat(150) }]));
    expect(error.limit).toBe("maxActionChars");
    expect(error.message).toContain("the action is 150 characters; limit maxActionChars=100");
    pool.dispose();
  });

  it("has no process, require, fetch, timers or dynamic import", async () => {
    const pool = await createPool({
      step: `
        const g = globalThis as any;
        const seen = [typeof g.process, typeof g.require, typeof g.fetch, typeof g.setTimeout, typeof g.setInterval,
          typeof g.XMLHttpRequest, typeof g.WebAssembly, typeof g.Deno, typeof g.Bun, typeof g.module, typeof g.__tinkerlab_register];
        let imported = "no promise";
        const name = "node:fs";
        const pending = import(name);
        pending.then(() => { imported = "loaded"; }, (e: unknown) => { imported = String(e); });
        return { state, observation: JSON.stringify(seen), reward: 0, done: false, info: { imported } };`,
    });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const [step] = await pool.stepMany([{ slot: 0, action: "go" }]);
    expect(JSON.parse(step!.observation!)).toEqual(Array(11).fill("undefined"));
    expect(step!.info.imported).not.toBe("loaded");
    pool.dispose();
  });

  it("refuses to compile imports of node modules or packages", async () => {
    for (const specifier of ["node:fs", "fs", "child_process", "zod", "@/server/db/client"]) {
      const error = await firstError(() =>
        SandboxedEnvironmentPool.create({ files: { "environment.ts": `import * as m from "${specifier}";\nconsole.log(m);\n${envSource()}` } }),
      );
      expect(error).toBeInstanceOf(SandboxError);
      expect(error.kind).toBe("syntax");
      expect(error.message).toContain(`'${specifier}' cannot be imported in the sandbox`);
    }
  });

  it("blocks eval, Function and constructor-chain escapes", async () => {
    const attempts = [
      `eval("1 + 1")`,
      `(0, eval)("1")`,
      `new Function("return 1")()`,
      `Function("return this")()`,
      `(function () {}).constructor("return 1")()`,
      `(async function () {}).constructor("return 1")`,
      `(function* () {}).constructor("return 1")`,
      `(({}) as any).constructor.constructor("return process")()`,
      `(state as any).constructor.constructor("return globalThis.process")()`,
    ];
    const pool = await createPool({
      step: `
        const attempts = [${attempts.map((code) => `() => ${code}`).join(",\n")}];
        const outcomes = attempts.map((attempt) => { try { attempt(); return "escaped"; } catch (e) { return String(e); } });
        return { state, observation: JSON.stringify(outcomes), reward: 0, done: false };`,
    });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const [step] = await pool.stepMany([{ slot: 0, action: "go" }]);
    const outcomes = JSON.parse(step!.observation!) as string[];
    for (const outcome of outcomes) expect(outcome).not.toBe("escaped");
    expect(outcomes.join("\n")).toMatch(/code generation \(eval, new Function\) is disabled/);
    pool.dispose();
  });

  it("keeps prototype pollution inside the sandbox", async () => {
    const pool = await createPool({
      reset: `(Object.prototype as any).polluted = "yes"; (context as any).__proto__.polluted2 = "yes"; return { state: { n: 0 }, observation: "start" };`,
      step: `(state as any).__proto__.polluted3 = "yes";
        return { state: JSON.parse('{"n": 1, "__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}}'), observation: "o", reward: 0, done: false };`,
    });
    await pool.resetMany([{ slot: 0, seed: 1, sample: { question: "q" } }]);
    await pool.stepMany([{ slot: 0, action: "go" }]);
    // a state's keys arrive as plain data, never as prototypes (info refuses them: reserved-keys.test.ts)
    const state = pool.summary(0).state as Record<string, unknown>;
    expect(Object.getPrototypeOf(state)).toBe(Object.prototype);
    expect(Object.keys(state)).toEqual(["n", "__proto__", "constructor"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(state.polluted).toBeUndefined();
    pool.dispose();
    await expectBystanderUnaffected();
  });

  it("reports thrown non-Error values clearly", async () => {
    for (const thrown of [
      `42`,
      `"a string"`,
      `null`,
      `undefined`,
      `{ toString() { throw new Error("no") } }`,
      `new Proxy({}, { get() { throw new Error("trap") }, getPrototypeOf() { throw new Error("trap") } })`,
    ]) {
      const pool = await createPool({ step: `throw ${thrown};` });
      const error = await stepUntilError(pool);
      expect(error).toBeInstanceOf(SandboxError);
      expect(error.kind).toBe("runtime");
      expect(error.message).toMatch(/step 1 of episode 0 \(seed 1\) threw NonErrorThrown: threw (a non-Error value|a value that could not be described)/);
      pool.dispose();
    }
  });

  it("rejects NaN and Infinity rewards, naming the field", async () => {
    for (const reward of ["NaN", "Infinity", "-Infinity", `"1"`]) {
      const pool = await createPool({ step: `return { state, observation: "o", reward: ${reward} as any, done: false };` });
      const error = await stepUntilError(pool);
      expect(error.kind).toBe("contract");
      expect(error.message).toContain(`step() returned reward ${reward === `"1"` ? `"1" (a string)` : reward}; reward must be a finite number`);
      expect(error.location).toMatchObject({ file: "environment.ts", line: 14 });
      pool.dispose();
    }
  });

  it("turns a returned Proxy or a throwing getter into a clear error", async () => {
    const cases = [
      {
        step: `return new Proxy({}, { get: (_t, key) => key === "then" ? undefined : 1 }) as any;`,
        expected: /done 1 \(a number\); done must be true or false/,
      },
      {
        step: `return { state, observation: "o", get reward(): number { throw new Error("getter says no"); }, done: false };`,
        expected: /threw Error: getter says no \(at environment\.ts:15:/,
      },
      { step: `return new Proxy({}, { get() { while (true) {} } }) as any;`, expected: /exceeded cpuMsPerCall=100 ms/ },
      {
        step: `return Promise.resolve({ state, reward: 1, done: true }) as any;`,
        expected: /step\(\) returned a Promise; environment functions must be synchronous/,
      },
      {
        reset: `return Promise.resolve({ state: { n: 0 }, observation: "start" }) as any;`,
        expected: /reset\(\) returned a Promise; environment functions must be synchronous/,
      },
      {
        parseAction: `return Promise.resolve({ ok: true, action: text }) as any;`,
        expected: /parseAction\(\) returned a Promise; environment functions must be synchronous/,
      },
      { step: `const o: any = { state, observation: "o", reward: 1, done: false, info: {} }; o.info.self = o.info; return o;`, expected: /info/ },
    ];
    for (const { expected, ...parts } of cases) {
      const pool = await createPool(parts);
      const error = await stepUntilError(pool);
      expect(error).toBeInstanceOf(SandboxError);
      expect(error.message).toMatch(expected);
      pool.dispose();
    }
    await expectBystanderUnaffected();
  });

  it("ends an environment that never ends its episode at maxStepsPerEpisode", async () => {
    // defineEnvironment caps maxTurns at 1000, so the export skips it to claim an endless episode
    const source = envSource({ maxTurns: 5, step: `return { state, observation: "again", reward: 0, done: false };` })
      .replace("export default defineEnvironment<{ n: number }, string>({", "const env: any = ({")
      .replace(/\}\);\n$/, "});\nenv.maxTurns = Infinity;\nexport default { ...env, maxTurns: 1e9 } as any;\n");
    const error = await firstError(() => SandboxedEnvironmentPool.create({ files: { "environment.ts": source } }, { limits: fastLimits }));
    // the SDK's own check rejects it at load...
    expect(error.kind).toBe("contract");
    expect(error.message).toContain("maxTurns must be a whole number from 1 to 1000");
    // ...and a legal but long episode is cut by the server's limit
    const pool = await createPool(
      { maxTurns: 1000, step: `return { state, observation: "again", reward: 0, done: false };` },
      { ...fastLimits, maxStepsPerEpisode: 20 },
    );
    const stepError = await stepUntilError(pool, 100);
    expect(stepError.limit).toBe("maxStepsPerEpisode");
    expect(stepError.message).toContain("episode 0 (seed 1) did not end within maxStepsPerEpisode=20 steps");
    pool.dispose();
  });

  describe("one long native call, which QuickJS's interrupt handler cannot see into", () => {
    // Each call below runs for well over a second by itself (its data is made at load); the per-call limit is 100 ms.
    const limits = { ...fastLimits, cpuMsPerCall: 100, cpuMsPerEpisode: 5_000, memoryMb: 128 };
    const bound = 2 * limits.cpuMsPerCall + 50;
    const cases: [string, string, string][] = [
      [
        "a default sort of a million numbers",
        `const numbers = Array.from({ length: 1_000_000 }, (_, i) => (i * 7919) % 1_000_003);`,
        `numbers.slice().sort();`,
      ],
      ["an indexOf that compares 8 billion characters", "", `"a".repeat(4_000_000).indexOf("a".repeat(2_000) + "b");`],
      ["JSON.parse of a 6 MB array", `const big = "[" + "1,".repeat(3_000_000) + "1]";`, `JSON.parse(big);`],
    ];

    it.each(cases)(`stops %s within 2 × cpuMsPerCall + 50 ms of CPU, naming the op, the limit and the time`, async (_, top, heavy) => {
      const pool = await createPool(
        { top, step: `if (action === "heavy") { ${heavy} } return { state: { n: state.n + 1 }, observation: "x", reward: 0, done: false };` },
        limits,
      );
      const slots = [0, 1, 2, 3];
      await pool.resetMany(slots.map((slot) => ({ slot, seed: slot })));
      const cpuBefore = process.cpuUsage();
      const error = await firstError(() => pool.stepMany(slots.map((slot) => ({ slot, action: slot === 2 ? "heavy" : "go" }))));
      const cpu = process.cpuUsage(cpuBefore);
      expect(error).toBeInstanceOf(SandboxLimitError);
      expect(error.limit).toBe("cpuMsPerCall");
      expect(error.limitValue).toBe(100);
      // no stack (the thread was terminated): the definition of the function the op called
      expect(error.message).toMatch(
        /^step 1 of episode 2 \(seed 2\) exceeded cpuMsPerCall=100 ms \(ran \d+ ms; stopped by the watchdog\) in step\(\) \(environment\.ts:14:3\)$/,
      );
      // CPU time, as the limit counts it (on a busy machine the wall clock runs on while the thread waits for a core)
      expect(error.reached).toBeGreaterThanOrEqual(100);
      expect(error.reached).toBeLessThanOrEqual(bound);
      // the whole process, both threads, spent about that too: the call alone would run for over a second
      expect((cpu.user + cpu.system) / 1000).toBeLessThanOrEqual(bound + 100);
      // the run stays failed with that reason, and the thread is gone (it no longer burns CPU)
      await expect(pool.resetMany([{ slot: 0, seed: 9 }])).rejects.toThrow(error.message);
      await pool.stopped;
      await expectBystanderUnaffected();
    });

    it("stops one while this thread blocks for it (a session's step, synchronous), as it stops one in a batch", async () => {
      const pool = await createPool(
        {
          top: cases[0]![1],
          step: `if (action === "heavy") { ${cases[0]![2]} } return { state: { n: state.n + 1 }, observation: "x", reward: 0, done: false };`,
        },
        limits,
      );
      await pool.resetMany([
        { slot: 0, seed: 0 },
        { slot: 1, seed: 1 },
      ]);
      const error = await firstError(() => pool.session(1).step("heavy"));
      expect(error).toBeInstanceOf(SandboxLimitError);
      expect(error.message).toMatch(
        /^step 1 of episode 1 \(seed 1\) exceeded cpuMsPerCall=100 ms \(ran \d+ ms; stopped by the watchdog\) in step\(\) \(environment\.ts:14:3\)$/,
      );
      expect(error.reached).toBeGreaterThanOrEqual(100);
      expect(error.reached).toBeLessThanOrEqual(bound);
      expect(() => pool.session(0).step("go")).toThrow(error.message);
      await pool.stopped;
      await expectBystanderUnaffected();
    });

    it("stops one posted right after an earlier batch was taken, before this thread's event loop turned", async () => {
      // The event loop's wait (the watchdog, here) starts from one immediate for every batch posted until it runs:
      // the first batch's immediate is the one that must watch the second.
      const pool = await createPool(
        {
          top: cases[0]![1],
          step: `if (action === "heavy") { ${cases[0]![2]} } return { state: { n: state.n + 1 }, observation: "x", reward: 0, done: false };`,
        },
        limits,
      );
      await pool.resetMany([
        { slot: 0, seed: 0 },
        { slot: 1, seed: 1 },
      ]);
      const first = pool.stepMany([{ slot: 0, action: "go" }]);
      expect(pool.waitForAnswer()).toBe(true);
      expect((await first)[0]).toMatchObject({ observation: "x" }); // promise callbacks only: no turn of the event loop
      const error = await firstError(() => pool.stepMany([{ slot: 1, action: "heavy" }]));
      expect(error).toBeInstanceOf(SandboxLimitError);
      expect(error.message).toMatch(
        /^step 1 of episode 1 \(seed 1\) exceeded cpuMsPerCall=100 ms \(ran \d+ ms; stopped by the watchdog\) in step\(\) \(environment\.ts:14:3\)$/,
      );
      expect(error.reached).toBeLessThanOrEqual(bound);
      await expectBystanderUnaffected();
    });

    it("stops one at load time under cpuMsPerEpisode", async () => {
      const error = await firstError(() => createPool({ top: `"a".repeat(4_000_000).indexOf("a".repeat(2_000) + "b");` }, { ...limits, cpuMsPerEpisode: 200 }));
      expect(error).toBeInstanceOf(SandboxLimitError);
      expect(error.message).toBe("loading the environment exceeded cpuMsPerEpisode=200 ms (stopped by the watchdog)");
      await expectBystanderUnaffected();
    });

    it("lets a batch of long native calls run when each op stays within its own limit", async () => {
      // eight ops of one ~100-200 ms sort each: together far over one op's limit, each well under it
      const pool = await createPool(
        {
          step: `Array.from({ length: 100_000 }, (_, i) => (i * 7919) % 100_003).sort(); return { state: { n: state.n + 1 }, observation: "sorted", reward: 0, done: false };`,
        },
        { ...limits, cpuMsPerCall: 1_000 },
      );
      const slots = [0, 1, 2, 3, 4, 5, 6, 7];
      await pool.resetMany(slots.map((slot) => ({ slot, seed: slot })));
      const steps = await pool.stepMany(slots.map((slot) => ({ slot, action: "go" })));
      expect(steps.map((step) => step.observation)).toEqual(Array(8).fill("sorted"));
      pool.dispose();
    });
  });

  it("writes nothing outside the sandbox", () => {
    expect(readdirSync(process.cwd()).sort()).toEqual(repoFilesBefore);
  });
});
