/**
 * Keys a run cannot report ("__proto__", "constructor", "prototype": superjson, which carries a worker's reports,
 * refuses them) are refused where the environment returns them, in validation's dry run as in a run, naming the
 * field's path and the user's function; what validation accepts, a run's report serializes.
 */
import superjson from "superjson";
import { describe, expect, it } from "vitest";
import { SandboxError } from "@/server/sandbox";
import { validateExperimentSource } from "@/server/sandbox/validate";
import { type EnvParts, createPool, envSource, firstError } from "./helpers";

const stepWith = (fields: string) => `return { state: { n: state.n + 1 }, observation: "o", reward: 1, done: state.n + 1 >= 3, ${fields} };`;

/** Each case: the environment's parts, and the path its error names. */
const refused: { what: string; parts: EnvParts; path: string; fn: string; line: number }[] = [
  { what: "info.constructor", parts: { step: stepWith(`info: { constructor: "Ferrari" }`) }, path: "info.constructor", fn: "step", line: 14 },
  {
    what: "a nested __proto__ (from JSON.parse)",
    parts: { step: stepWith(`info: { car: JSON.parse('{"__proto__": {"polluted": true}}') }`) },
    path: "info.car.__proto__",
    fn: "step",
    line: 14,
  },
  { what: "a key in an array in info", parts: { step: stepWith(`info: { laps: [{ prototype: 1 }] }`) }, path: "info.laps[0].prototype", fn: "step", line: 14 },
  { what: "a metric's name", parts: { step: stepWith(`metrics: { constructor: 1 }`) }, path: "metrics.constructor", fn: "step", line: 14 },
];

describe("keys a run cannot report", () => {
  for (const { what, parts, path, line } of refused) {
    it(`refuses ${what} in validation and in a run alike, naming ${path} and step()`, async () => {
      const report = await validateExperimentSource({ "environment.ts": envSource(parts) }, { typeCheck: false });
      expect(report.ok).toBe(false);
      const diagnostic = report.diagnostics.find((d) => d.severity === "error")!;
      expect(diagnostic).toMatchObject({ source: "contract", file: "environment.ts", line });
      expect(diagnostic.message).toContain(
        `step() returned ${path}: '${path
          .split(/[.[\]]+/)
          .filter(Boolean)
          .at(-1)}' is not allowed as a key`,
      );

      const pool = await createPool(parts);
      await pool.resetMany([{ slot: 0, seed: 0 }]); // the dry run's first episode
      const error = await firstError(() => pool.stepMany([{ slot: 0, action: "go" }]));
      expect(error).toBeInstanceOf(SandboxError);
      expect(error.message).toBe(diagnostic.message);
      expect(error.location).toMatchObject({ file: "environment.ts", line });
      pool.dispose();
    });
  }

  it("refuses a reward function named constructor when the environment loads", async () => {
    const parts: EnvParts = { extra: "  rewardFunctions: { constructor: () => 1 }," };
    const report = await validateExperimentSource({ "environment.ts": envSource(parts) }, { typeCheck: false });
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]).toMatchObject({ source: "contract", file: "environment.ts", line: 17 });
    expect(report.diagnostics[0]!.message).toMatch(/^rewardFunctions\.constructor: 'constructor' is not allowed as a key/);
  });

  it("accepts look-alike keys, and what it accepts a run's report serializes", async () => {
    const parts: EnvParts = { step: stepWith(`info: { constructorName: "Ferrari", proto: { prototypes: [1] } }, metrics: { __proto_count: 1 }`) };
    const report = await validateExperimentSource({ "environment.ts": envSource(parts) }, { typeCheck: false });
    expect(report.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    const pool = await createPool(parts);
    await pool.resetMany([{ slot: 0, seed: 1 }]);
    const [step] = await pool.stepMany([{ slot: 0, action: "go" }]);
    expect(step!.info).toEqual({ constructorName: "Ferrari", proto: { prototypes: [1] } });
    // as the worker reports a rollout's turns (server/worker/run-job.ts)
    expect(() => superjson.serialize({ rollouts: [{ turns: [{ info: step!.info }] }], metrics: step!.metrics })).not.toThrow();
    pool.dispose();
  });

  it("is what superjson refuses", () => {
    for (const key of ["__proto__", "constructor", "prototype"]) {
      expect(() => superjson.serialize({ info: JSON.parse(`{"${key}": 1}`) })).toThrow(/prototype pollution/);
    }
  });
});
