/**
 * The web server's validation processes (server/validation): validations run side by side, each in a process of
 * its own, and a validation that outlives its time is stopped alone; one waiting for a free process is not
 * charged its wait.
 */
import { afterAll, describe, expect, it } from "vitest";
import { ValidationPool, defaultValidationProcesses, validationProcessesFromEnv } from "@/server/validation";

/** A legal environment whose dry run (60 steps) takes seconds: each step busy-waits `ms` (within cpuMsPerCall). */
const slowEnvironment = (ms: number) => `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, string>({
  name: "slow",
  data: { kind: "free" },
  systemPrompt: "wait",
  maxTurns: 1000,
  actions: ["go"],
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step(state) {
    const until = Date.now() + ${ms};
    while (Date.now() < until) {}
    return { state: { n: state.n + 1 }, observation: String(state.n + 1), reward: 0, done: false };
  },
});
`;
const slow = slowEnvironment(100);

const benign = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, string>({
  name: "benign",
  data: { kind: "free" },
  systemPrompt: "say go",
  maxTurns: 3,
  actions: ["go"],
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state) => ({ state: { n: state.n + 1 }, observation: String(state.n + 1), reward: 1, done: state.n + 1 >= 3 }),
});
`;

const settled = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => ({ value, error: null, at: performance.now() }),
    (error: Error) => ({ value: null, error, at: performance.now() }),
  );

const pools: ValidationPool[] = [];
afterAll(() => {
  for (const pool of pools) pool.close();
});

describe("validation processes", () => {
  it("runs a benign validation beside a slow one, each in a process of its own, and a timeout stops only the slow one", async () => {
    const pool = new ValidationPool(process.cwd(), 2);
    pools.push(pool);
    const a = settled(pool.validate({ "environment.ts": slow }, { typeCheck: false }, 1_500));
    const b = settled(pool.validate({ "environment.ts": benign }, { typeCheck: false }));
    // B does not wait for A's process: a process starts for each.
    expect(pool.stats).toEqual({ queued: 2, processes: 2 });
    const [first, second] = await Promise.all([a, b]);
    expect(second.error).toBeNull();
    expect(second.value?.ok).toBe(true);
    expect(second.value?.environment?.name).toBe("benign");
    expect(first.error?.message).toMatch(/^validation took longer than 1\.5 s and was stopped/);
    // A's process was killed with it; B's goes on and takes the next request.
    expect(pool.stats).toEqual({ queued: 0, processes: 1 });
    const third = await pool.validate({ "environment.ts": benign }, { typeCheck: false });
    expect(third.ok).toBe(true);
    expect(pool.stats).toEqual({ queued: 0, processes: 1 });
  });

  it("does not charge a request its wait for a free process", async () => {
    const pool = new ValidationPool(process.cwd(), 1);
    pools.push(pool);
    // A's dry run takes ~2.5 s (60 steps of 40 ms); B waits for it, longer than B's own limit, then runs in well under it
    const a = settled(pool.validate({ "environment.ts": slowEnvironment(40) }, { typeCheck: false }, 30_000));
    const b = settled(pool.validate({ "environment.ts": benign }, { typeCheck: false }, 1_500));
    expect(pool.stats).toEqual({ queued: 2, processes: 1 });
    const [first, second] = await Promise.all([a, b]);
    expect(first.error).toBeNull();
    expect(first.value?.ok).toBe(true);
    expect(second.error).toBeNull();
    expect(second.value?.ok).toBe(true);
    expect(second.at).toBeGreaterThan(first.at);
    expect(pool.stats).toEqual({ queued: 0, processes: 1 });
  });

  it("takes its size from TINKERLAB_VALIDATION_PROCESSES, naming the variable when it is invalid", () => {
    expect(validationProcessesFromEnv({})).toBe(defaultValidationProcesses);
    expect(validationProcessesFromEnv({ TINKERLAB_VALIDATION_PROCESSES: "3" })).toBe(3);
    expect(() => validationProcessesFromEnv({ TINKERLAB_VALIDATION_PROCESSES: "0" })).toThrow(
      /TINKERLAB_VALIDATION_PROCESSES must be a whole number from 1 to 16/,
    );
  });
});
