/**
 * The web server's validation processes (server/validation): validations run side by side, each in a process of
 * its own, and a validation that outlives its time is stopped alone; one waiting for a free process is not
 * charged its wait; a process that fails to start fails no request while another can serve it; and a request
 * that would wait too long is refused at once, saying when to retry.
 */
import { execFileSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { ValidationBusyError, ValidationPool, defaultValidationProcesses, validationProcessesFromEnv } from "@/server/validation";

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

/** The validation processes this test's process has started (its children running validate-cli.ts). */
function validationProcessIds(): number[] {
  const lines = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(process.pid)], { encoding: "utf8" }).split("\n");
  return lines.filter((line) => line.includes("validate-cli")).map((line) => Number.parseInt(line.trim(), 10));
}

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

  it("serves a request with the processes alive when a new one fails to start", async () => {
    const others = validationProcessIds(); // the earlier tests' pools'
    const pool = new ValidationPool(process.cwd(), 2);
    pools.push(pool);
    expect((await pool.validate({ "environment.ts": benign }, { typeCheck: false })).ok).toBe(true);
    const first = validationProcessIds().filter((pid) => !others.includes(pid));
    expect(first).toHaveLength(1);
    // The first process takes a validation of ~2.5 s; the next request starts a second process, which dies as it
    // starts (as the kernel's OOM killer or a refused spawn would end it on a loaded machine).
    const busy = settled(pool.validate({ "environment.ts": slowEnvironment(40) }, { typeCheck: false }));
    const next = settled(pool.validate({ "environment.ts": benign }, { typeCheck: false }));
    const starting = validationProcessIds().filter((pid) => !others.includes(pid) && !first.includes(pid));
    expect(starting).toHaveLength(1);
    process.kill(starting[0]!, "SIGKILL");
    const [a, b] = await Promise.all([busy, next]);
    expect(a.error).toBeNull();
    expect(b.error).toBeNull();
    expect(b.value?.environment?.name).toBe("benign");
  });

  it("refuses a request that would wait too long, saying how many are validating and when to retry", async () => {
    const pool = new ValidationPool(process.cwd(), 1);
    pools.push(pool);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => settled(pool.validate({ "environment.ts": `${benign}// ${i}\n` }, { typeCheck: false }))),
    );
    const refused = answers.filter((answer) => answer.error);
    expect(refused.length).toBeGreaterThan(0);
    // The first ones queued are answered; those that came after the queue was full are refused, each at once.
    expect(answers.slice(0, answers.length - refused.length).every((answer) => answer.value?.ok === true)).toBe(true);
    for (const { error } of refused) {
      expect(error).toBeInstanceOf(ValidationBusyError);
      expect(error!.message).toMatch(/^the server is busy validating \d+ experiments; retry in \d+ s$/);
      expect((error as ValidationBusyError).retryAfterS).toBeGreaterThanOrEqual(1);
    }
    expect(Math.max(...refused.map((r) => r.at))).toBeLessThan(Math.min(...answers.filter((a) => a.value).map((a) => a.at)));
  });

  it("takes its size from TINKERLAB_VALIDATION_PROCESSES, naming the variable when it is invalid", () => {
    expect(validationProcessesFromEnv({})).toBe(defaultValidationProcesses);
    expect(validationProcessesFromEnv({ TINKERLAB_VALIDATION_PROCESSES: "3" })).toBe(3);
    expect(() => validationProcessesFromEnv({ TINKERLAB_VALIDATION_PROCESSES: "0" })).toThrow(
      /TINKERLAB_VALIDATION_PROCESSES must be a whole number from 1 to 16/,
    );
  });
});
