/** The sandbox runs a well-behaved environment exactly as the server would natively, and errors point home. */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it, vi } from "vitest";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { type ActRequest, multiTurn, runEpisodes } from "@/lib/sdk/protocol";
import { Rng } from "@/lib/model/rng";
import {
  type CrossingTiming,
  type HostWork,
  SandboxError,
  SandboxLimitError,
  SandboxedEnvironmentPool,
  compileEnvironment,
  resolveSandboxLimits,
  runSandboxedEpisodes,
} from "@/server/sandbox";
import { validateExperimentSource } from "@/server/sandbox/validate";
import counts from "./fixtures/counts-env";
import dice from "./fixtures/dice-env";
import { busyStep, busyWait, createPool, envSource, fastLimits, firstError } from "./helpers";

const diceSource = readFileSync(fileURLToPath(new URL("./fixtures/dice-env.ts", import.meta.url)), "utf8");

/** Room for steps that busy-wait a few hundred milliseconds. */
const slowLimits = { ...fastLimits, cpuMsPerCall: 1_000, cpuMsPerEpisode: 5_000 };

/** A scripted policy that depends on the observation, so any divergence would compound. */
function policy(seed: number) {
  const rng = new Rng(seed);
  return async (requests: ActRequest[]) =>
    requests.map((request) => {
      const last = request.messages.at(-1)!.content;
      const pick = Math.floor(rng.uniform() * 8);
      const text = pick === 7 ? "@remaining()" : pick === 6 ? "seven" : String(1 + ((pick + last.length) % 6));
      return { text };
    });
}

describe("sandboxed environments", () => {
  it("gives the same trajectories as the native environment for the same seeds", async () => {
    const seeds = Array.from({ length: 24 }, (_, i) => 100 + i);
    const native = await runEpisodes(
      multiTurn(),
      seeds.map((seed) => ({ session: new EnvironmentSession(dice), seed })),
      policy(1),
    );
    const pool = await SandboxedEnvironmentPool.create({ files: { "dice-env.ts": diceSource } });
    const sandboxed = await runSandboxedEpisodes(
      multiTurn(),
      pool,
      seeds.map((seed) => ({ seed })),
      policy(1),
    );
    expect(sandboxed).toEqual(native);
    expect(native.some((t) => t.invalidActions > 0) && native.some((t) => t.score === 1)).toBe(true);
    // the per-session surface, one crossing per call, agrees too
    const unbatched = await runEpisodes(
      multiTurn(),
      seeds.map((seed, slot) => ({ session: pool.session(slot) as unknown as EnvironmentSession, seed })),
      policy(1),
    );
    expect(unbatched).toEqual(native);
    expect(pool.environment).toMatchObject({ name: "dice-sum", maxTurns: 6, tools: ["remaining"], scoreName: "exact", hasRender: true });
    pool.dispose();
  });

  it("answers each step as the native session does: step cost, truncation, invalid actions, info, metrics, reward functions", async () => {
    const pool = await SandboxedEnvironmentPool.create({
      files: { "counts-env.ts": readFileSync(fileURLToPath(new URL("./fixtures/counts-env.ts", import.meta.url)), "utf8") },
    });
    // per seed, the actions of one episode: ended by the environment, cut short at maxTurns, with invalid actions
    const scripts = [["go", "stop"], ["go", "go", "go", "go"], ["?", "go", "?", "go"], ["stop"], ["?", "?", "stop"]];
    const seen = { steps: 0, truncated: 0, invalid: 0, info: 0, metrics: 0 };
    for (const [seed, actions] of scripts.entries()) {
      const native = new EnvironmentSession(counts);
      const sandboxed = pool.session(seed);
      expect(sandboxed.reset(seed)).toBe(native.reset(seed));
      for (const action of actions) {
        const expected = native.step(action);
        expect(sandboxed.step(action)).toEqual(expected);
        seen.steps += 1;
        seen.truncated += expected.info.truncated === true ? 1 : 0;
        seen.invalid += expected.info.invalid === undefined ? 0 : 1;
        seen.info += expected.info.half === true ? 1 : 0;
        seen.metrics += Object.keys(expected.metrics).length > 0 ? 1 : 0;
        if (expected.done) break;
      }
      const { state, ...summary } = native.summary();
      expect(sandboxed.summary()).toMatchObject(summary);
      expect(sandboxed.summary().state).toEqual(state);
      expect(sandboxed.score()).toBe(native.score());
      expect(sandboxed.rewardBreakdown()).toEqual(native.rewardBreakdown());
    }
    expect(seen).toEqual({ steps: 14, truncated: 2, invalid: 4, info: 3, metrics: 9 });
    pool.dispose();
  });

  it("answers summaries like the native session, with the final state fetched only when read", async () => {
    const pool = await SandboxedEnvironmentPool.create({ files: { "dice-env.ts": diceSource } });
    const actions = ["3", "seven", "@remaining()", "6", "2", "5", "1", "4"];
    for (const seed of [1, 2, 3, 4, 5]) {
      const native = new EnvironmentSession(dice);
      const sandboxed = pool.session(0);
      expect(sandboxed.reset(seed)).toBe(native.reset(seed));
      for (let turn = 0; !native.summary().done || turn === 0; turn++) {
        const action = actions[(seed + turn) % actions.length]!;
        expect(sandboxed.step(action)).toEqual(native.step(action));
        expect(sandboxed.render()).toBe(native.render());
      }
      const expected = native.summary();
      // QuickJS's Math.log and Math.cos (behind rng.normal) may differ from V8's in the last bit
      const state = { ...expected.state, noise: expect.closeTo(expected.state.noise, 12) };
      expect(sandboxed.summary()).toEqual({ ...expected, state, breakdown: native.rewardBreakdown() });
      expect(sandboxed.score()).toBe(native.score());
    }
    // A summary read after its slot was reset for another episode cannot fetch that episode's state any more.
    const summary = pool.session(0).summary();
    await pool.resetMany([{ slot: 0, seed: 99 }]);
    expect(summary.turns).toBeGreaterThan(0);
    expect(() => summary.state).toThrow("episode 0's final state is no longer in the sandbox: the slot has been reset since");
    pool.dispose();
  });

  it("crosses once for an unfinished episode's summary and once for its score until the episode moves on", async () => {
    const pool = await SandboxedEnvironmentPool.create({ files: { "dice-env.ts": diceSource } });
    const native = new EnvironmentSession(dice);
    const session = pool.session(0);
    const sandbox = (pool as unknown as { sandbox: { call: (...args: unknown[]) => unknown } }).sandbox;
    const crossings = vi.spyOn(sandbox, "call");
    session.reset(5);
    native.reset(5);
    for (const action of ["seven", "1"]) {
      session.step(action);
      native.step(action);
      crossings.mockClear();
      const first = session.summary();
      first.breakdown.env = 99; // the caller's copy: the next read is not changed by it
      expect(session.rewardBreakdown()).toEqual(native.rewardBreakdown());
      expect({ ...session.summary(), state: null }).toEqual({ ...native.summary(), state: null, breakdown: native.rewardBreakdown() });
      expect(session.score()).toBe(native.score());
      expect(session.score()).toBe(native.score());
      expect(crossings.mock.calls.map((call) => (call[0] as unknown[][]).map((op) => op[0]))).toEqual([["summary"], ["score"]]);
    }
    expect(native.summary().done).toBe(false);
    pool.dispose();
  });

  it("reports each reward function's share of the return, as the native session does", async () => {
    const source = envSource({ extra: `  rewardFunctions: { brevity: (summary) => -0.25 * summary.turns, steady: () => 0.1 },` });
    const pool = await SandboxedEnvironmentPool.create({ files: { "environment.ts": source } });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    let step = (await pool.stepMany([{ slot: 0, action: "go" }]))[0]!;
    while (!step.done) step = (await pool.stepMany([{ slot: 0, action: "go" }]))[0]!;
    // three steps of reward 1; the last also gets -0.75 + 0.1 from the reward functions
    expect(step.reward).toBeCloseTo(1 - 0.75 + 0.1, 12);
    expect(step.end).toMatchObject({ turns: 3, breakdown: { env: 3, brevity: -0.75, steady: 0.1 } });
    expect(step.end!.totalReward).toBeCloseTo(2.35, 12);
    expect(pool.session(0).rewardBreakdown()).toEqual({ env: 3, brevity: -0.75, steady: 0.1 });
    pool.dispose();
  });

  it("sends a render that is the observation itself once, and the host restores both", async () => {
    const pool = await createPool({
      reset: `return { state: { n: 0 }, observation: "n=0" };`,
      extra: `  render: (state) => "n=" + state.n,`,
    });
    const [reset] = await pool.resetMany([{ slot: 0, seed: 1 }]);
    expect(reset).toEqual({ observation: "n=0", systemPrompt: "play", render: "n=0", legalActions: null });
    const [step] = await pool.stepMany([{ slot: 0, action: "go" }]);
    expect(step).toMatchObject({ observation: "n=1", render: "n=1", done: false });
    const steps = [(await pool.stepMany([{ slot: 0, action: "go" }]))[0]!, (await pool.stepMany([{ slot: 0, action: "go" }]))[0]!];
    // the last step has no observation, and its render is the final state's
    expect(steps[1]).toMatchObject({ observation: null, render: "n=3", done: true, end: { turns: 3, totalReward: 3, score: 1 } });
    pool.dispose();
  });

  it("answers a batch as its slots' sessions answer one crossing each (resetMany, stepMany)", async () => {
    const [batched, alone] = await Promise.all([0, 1].map(() => SandboxedEnvironmentPool.create({ files: { "dice-env.ts": diceSource } })));
    const slots = [0, 1, 2, 3];
    const resets = await batched!.resetMany(slots.map((slot) => ({ slot, seed: 40 + slot })));
    expect(resets.map(({ observation }) => observation)).toEqual(slots.map((slot) => alone!.session(slot).reset(40 + slot)));
    let ended = 0;
    for (const action of ["3", "seven", "@remaining()", "5", "1", "2", "4", "6"]) {
      const live = slots.filter((slot) => !batched!.slotView(slot)!.done);
      const steps = await batched!.stepMany(live.map((slot) => ({ slot, action })));
      expect(steps).toMatchObject(live.map((slot) => alone!.session(slot).step(action)));
      ended += steps.filter((step) => step.done).length;
    }
    expect(ended).toBe(slots.length); // every episode played to its end (maxTurns 6)
    for (const slot of slots) expect(batched!.session(slot).summary()).toEqual(alone!.session(slot).summary());
    batched!.dispose();
    alone!.dispose();
  });

  it("leaves this thread free while the sandbox works, and takes one batch at a time", async () => {
    const pool = await createPool({ step: busyStep(200) }, slowLimits);
    await pool.resetMany([
      { slot: 0, seed: 1 },
      { slot: 1, seed: 2 },
    ]);
    const events: string[] = [];
    const stepping = pool.stepMany([{ slot: 0, action: "go" }]).then(([step]) => events.push(`answer ${step!.observation}`));
    setImmediate(() => events.push("next task"));
    setTimeout(() => events.push("timer"), 1);
    // Another batch while one is in flight is refused.
    await expect(pool.stepMany([{ slot: 1, action: "go" }])).rejects.toThrow(
      "the sandbox is already running a batch; wait for its answer before sending another",
    );
    await stepping;
    // this thread's other tasks ran (in either order) while the sandbox worked
    expect(events).toHaveLength(3);
    expect(events.slice(0, 2).sort()).toEqual(["next task", "timer"]);
    expect(events[2]).toBe("answer n=1");
    // A session's call, which blocks (EnvironmentSession's calls are synchronous), waits for the batch in flight.
    const pending = pool.stepMany([{ slot: 0, action: "go" }]);
    expect(pool.session(1).step("go")).toMatchObject({ observation: "n=1" });
    expect((await pending)[0]).toMatchObject({ observation: "n=2" });
    pool.dispose();
  });

  it("applies a batch's answers only when read (readLater), while the sandbox takes the next batch", async () => {
    const pool = await createPool({ extra: `  render: (state) => "n=" + state.n,` });
    await pool.resetMany([
      { slot: 0, seed: 1 },
      { slot: 1, seed: 2 },
    ]);
    const read = await pool.stepMany([{ slot: 0, action: "go" }], { readLater: true });
    expect(pool.slotView(0)).toMatchObject({ turns: 0, render: "n=0" }); // answered, not read: as before the step
    const [other] = await pool.stepMany([{ slot: 1, action: "go" }]);
    expect(other).toMatchObject({ observation: "n=1" });
    expect(read()).toMatchObject([{ observation: "n=1", render: "n=1", done: false }]);
    expect(pool.slotView(0)).toMatchObject({ turns: 1, render: "n=1" });
    // the slot's session answers its step from the batch, as runSandboxedEpisodes has it, without crossing
    expect(pool.session(0).step("go")).toMatchObject({ observation: "n=1" });
    const readResets = await pool.resetMany([{ slot: 0, seed: 5 }], { readLater: true });
    expect(pool.slotView(0)).toMatchObject({ turns: 1, seed: 1 });
    expect(readResets()).toEqual([{ observation: "start", systemPrompt: "play", render: "n=0", legalActions: null }]);
    expect(pool.slotView(0)).toMatchObject({ turns: 0, seed: 5 });
    pool.dispose();
  });

  it("settles a batch at once when this thread asks after the sandbox has answered (takeIfAnswered)", async () => {
    const pool = await createPool({ step: busyStep(200) }, slowLimits);
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const sandbox = (pool as unknown as { sandbox: { takeIfAnswered(): boolean } }).sandbox;
    const events: string[] = [];
    const stepping = pool.stepMany([{ slot: 0, action: "go" }]).then(([step]) => events.push(`answer ${step!.observation}`));
    expect(sandbox.takeIfAnswered()).toBe(false); // not answered yet: nothing taken
    // This thread blocked (as while the policy samples; asleep here, to leave the sandbox's thread a core): the
    // answer arrives meanwhile, and the wait's own task has not run.
    const nap = new Int32Array(new SharedArrayBuffer(4));
    let taken = false;
    while (!taken) {
      Atomics.wait(nap, 0, 0, 1);
      taken = sandbox.takeIfAnswered();
    }
    setImmediate(() => events.push("next task"));
    for (let i = 0; i < 20; i++) await Promise.resolve(); // microtasks only: no turn of the event loop
    expect(events).toEqual(["answer n=1"]);
    await stepping;
    expect(sandbox.takeIfAnswered()).toBe(false); // taken once: nothing left to take
    pool.dispose();
  });

  it("blocks for a batch's answer when asked (waitForAnswer), and settles it before the next task", async () => {
    const pool = await createPool({ step: busyStep(200) }, slowLimits);
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    let blocks = 0;
    pool.installProbe({ blocked: () => blocks++ });
    const events: string[] = [];
    const stepping = pool.stepMany([{ slot: 0, action: "go" }]).then(([step]) => events.push(`answer ${step!.observation}`));
    expect(pool.waitForAnswer(10_000)).toBe(true);
    expect(blocks).toBe(1); // it waited for the answer, rather than finding it there
    setImmediate(() => events.push("next task"));
    for (let i = 0; i < 20; i++) await Promise.resolve(); // microtasks only: no turn of the event loop
    expect(events).toEqual(["answer n=1"]);
    await stepping;
    expect(pool.waitForAnswer()).toBe(false); // nothing in flight: returns at once
    expect(blocks).toBe(1);
    pool.dispose();
  });

  it("stops blocking for an answer when asked to (waitForAnswer(ms)), leaving a longer batch to the event loop", async () => {
    const pool = await createPool({ step: busyStep(300) }, slowLimits);
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const events: string[] = [];
    const stepping = pool.stepMany([{ slot: 0, action: "go" }]).then(([step]) => events.push(`answer ${step!.observation}`));
    expect(pool.waitForAnswer(20)).toBe(false); // gave up while the step still ran
    setImmediate(() => events.push("next task"));
    await stepping; // answered later, in the event loop, after this thread's other tasks
    expect(events).toEqual(["next task", "answer n=1"]);
    pool.dispose();
  });

  it("hands a probe each call of this thread's sandbox functions, with its ops and time, while one is installed", async () => {
    const pool = await createPool({ reset: `${busyWait(200)} return { state: { n: 0 }, observation: "start" };` }, slowLimits);
    const log: HostWork[] = [];
    let blockedMs = 0;
    pool.installProbe({ hostWork: (work) => log.push(work), blocked: (ms) => (blockedMs += ms) });
    const resetting = pool.resetMany([0, 1, 2].map((slot) => ({ slot, seed: slot })));
    expect(pool.waitForAnswer(10_000)).toBe(true);
    await resetting;
    await pool.stepMany([0, 1].map((slot) => ({ slot, action: "go" })));
    pool.installProbe(null);
    await pool.stepMany([{ slot: 2, action: "go" }]); // not recorded
    expect(log.map(({ what, ops }) => `${what} ${ops}`)).toEqual([
      "build 3",
      "post 3",
      "take 3",
      "parse 3",
      "settle 3",
      "build 2",
      "post 2",
      "take 2",
      "parse 2",
      "settle 2",
    ]);
    expect(log.every(({ ms }) => ms >= 0)).toBe(true);
    expect(blockedMs).toBeGreaterThan(0);
    pool.dispose();
  });

  it("hands a probe each crossing's post, the thread's start and end of its run, and the take, in order", async () => {
    // A step of at least 5 ms (Date.now counts whole milliseconds): the thread's run is measurably inside the crossing.
    const pool = await createPool({ step: busyStep(6) });
    const log: CrossingTiming[] = [];
    pool.installProbe({ crossing: (timing) => log.push(timing) });
    await pool.resetMany([0, 1, 2].map((slot) => ({ slot, seed: slot })));
    await pool.stepMany([0, 1].map((slot) => ({ slot, action: "go" })));
    pool.installProbe(null);
    await pool.stepMany([{ slot: 2, action: "go" }]); // not recorded
    expect(log.map((crossing) => crossing.ops)).toEqual([3, 2]);
    for (const { postedAt, startedAt, ranAt, takenAt } of log) {
      // Each thread reads its own clock: allow a few microseconds between them.
      expect(startedAt).toBeGreaterThanOrEqual(postedAt - 0.05);
      expect(ranAt).toBeGreaterThanOrEqual(startedAt);
      expect(takenAt).toBeGreaterThanOrEqual(ranAt - 0.05);
    }
    expect(log[1]!.ranAt - log[1]!.startedAt).toBeGreaterThanOrEqual(9); // two steps of at least 5 ms
    expect(log[1]!.postedAt).toBeGreaterThanOrEqual(log[0]!.takenAt);
    pool.dispose();
  });

  it("hands a failure found while blocking for an answer (waitForAnswer) to the batch's caller, with the limit named", async () => {
    const pool = await createPool({ step: `while (true) {}` }, { ...fastLimits, cpuMsPerCall: 50 });
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const stepping = pool.stepMany([{ slot: 0, action: "go" }]);
    expect(pool.waitForAnswer(10_000)).toBe(true); // settled: with the failure
    const error = await stepping.then(
      () => null,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(SandboxLimitError);
    expect((error as SandboxLimitError).limit).toBe("cpuMsPerCall");
    await expect(pool.stepMany([{ slot: 0, action: "go" }])).rejects.toThrow(/cpuMsPerCall/); // the pool stays failed
    pool.dispose();
  });

  it("maps a syntax error to the user's file, line and column", async () => {
    const source = envSource().replace(`observation: "start"`, `observation: "start" +`);
    const result = await compileEnvironment({ "environment.ts": "// header\n" + source, "helper.ts": "export const x = 1;\n" });
    if (result.ok) throw new Error("expected a syntax error; it compiled");
    expect(result.diagnostics[0]).toMatchObject({ source: "syntax", file: "environment.ts", line: 10, severity: "error" });
    expect(result.diagnostics[0]!.column).toBeGreaterThan(1);
  });

  it("maps a runtime throw to the user's file, line and column, through a second file", async () => {
    const helper = [
      "// helpers",
      "export function explode(n: number): number {",
      "  if (n > 0) throw new RangeError(`too far: ${n}`);",
      "  return n;",
      "}",
      "",
    ].join("\n");
    const source = envSource({ top: `import { explode } from "./helper";`, step: `return { state, reward: explode(state.n + 1), done: true };` });
    const pool = await SandboxedEnvironmentPool.create({ files: { "environment.ts": source, "helper.ts": helper } });
    await pool.resetMany([{ slot: 0, seed: 3 }]);
    const error = await firstError(() => pool.stepMany([{ slot: 0, action: "x" }]));
    expect(error).toBeInstanceOf(SandboxError);
    expect(error.kind).toBe("runtime");
    expect(error.location).toEqual({ file: "helper.ts", line: 3, column: 24 });
    expect(error.message).toBe("step 1 of episode 0 (seed 3) threw RangeError: too far: 1 (at helper.ts:3:24)");
    expect(error.userStack).toMatch(/at explode \(helper\.ts:3:24\)\n\s+at step \(environment\.ts:15:\d+\)/);
    pool.dispose();
  });

  it("reports an error at load time with its location", async () => {
    const error = await firstError(() => createPool({ top: `const table: any = null;\nconst first = table.rows;` }));
    expect(error.kind).toBe("runtime");
    expect(error.location).toMatchObject({ file: "environment.ts", line: 3 });
  });

  it("rejects limits above the server's maxima, naming the field", () => {
    expect(() => resolveSandboxLimits({ cpuMsPerCall: 5_000 })).toThrow(/cpuMsPerCall: must be at most 1,000, the server's maximum \(got 5000\)/);
    expect(resolveSandboxLimits({ memoryMb: 32 })).toMatchObject({ memoryMb: 32, cpuMsPerCall: 200 });
  });

  it("collects console output", async () => {
    const pool = await createPool({ reset: `console.log("reset", context.seed, { a: 1 }); return { state: { n: 0 }, observation: "start" };` });
    await pool.resetMany([{ slot: 0, seed: 9 }]);
    expect(pool.drainLogs()).toEqual([`reset 9 {"a":1}`]);
    pool.dispose();
  });
});

describe("validateExperimentSource", () => {
  it("accepts a well-behaved environment and dry-runs it", async () => {
    const report = await validateExperimentSource({ "dice-env.ts": diceSource }, { typeCheck: false });
    expect(report.diagnostics).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.environment?.name).toBe("dice-sum");
    expect(report.episodes).toHaveLength(3);
  });

  it("flags a string reward and a NaN reward with the field named", async () => {
    for (const [reward, shown] of [
      [`"1"`, `"1" (a string)`],
      ["NaN", "NaN"],
    ] as const) {
      const report = await validateExperimentSource(
        { "environment.ts": envSource({ step: `return { state, observation: "o", reward: ${reward} as any, done: false };` }) },
        { typeCheck: false },
      );
      expect(report.ok).toBe(false);
      expect(report.diagnostics).toEqual([
        expect.objectContaining({
          severity: "error",
          source: "contract",
          message: `step 1 of episode 0 (seed 0): step() returned reward ${shown}; reward must be a finite number`,
          file: "environment.ts",
          line: 14,
        }),
      ]);
    }
  });

  it("flags a done that is not a boolean and an observation that is not a string", async () => {
    const report = await validateExperimentSource(
      { "environment.ts": envSource({ step: `return { state, observation: 7, reward: 0, done: false } as any;` }) },
      { typeCheck: false },
    );
    expect(report.diagnostics[0]?.message).toContain("step() returned observation 7 (a number); observation must be a string or left out");
  });

  it("reports syntax errors without running anything", async () => {
    const report = await validateExperimentSource({ "environment.ts": "export default {\n  name: 'x',,\n};\n" });
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]).toMatchObject({ source: "syntax", file: "environment.ts", line: 2 });
    expect(report.environment).toBeNull();
  });

  it("reports type errors with their position", async () => {
    const report = await validateExperimentSource({
      "environment.ts": envSource({ step: `const label: number = "n";\n    return { state, observation: String(label), reward: 1, done: true };` }),
    });
    expect(report.diagnostics).toContainEqual(
      expect.objectContaining({ source: "type", file: "environment.ts", line: 15, column: 11, message: "Type 'string' is not assignable to type 'number'." }),
    );
    expect(report.episodes).toHaveLength(3); // the dry run still ran
  }, 20_000);

  it("reports an environment without an export", async () => {
    const report = await validateExperimentSource({ "environment.ts": "export const x = 1;\n" }, { typeCheck: false });
    expect(report.diagnostics[0]).toMatchObject({ source: "contract", message: expect.stringContaining("exports no environment") });
  });

  it("reports a limit hit during the dry run", async () => {
    const report = await validateExperimentSource(
      { "environment.ts": envSource({ step: "while (true) {}" }) },
      { typeCheck: false, limits: { cpuMsPerCall: 50 } },
    );
    expect(report.diagnostics[0]).toMatchObject({ source: "limit", message: expect.stringContaining("exceeded cpuMsPerCall=50 ms") });
  });
});
