/**
 * `runs.launch` refuses what the experiment editor refuses, in the editor's words, before any run exists: the
 * editor's check (server/validation/browser.ts) on the version's config, files and validation. A config that
 * imitates a demonstrator its environment does not define used to launch and fail on the worker minutes later.
 */
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runs } from "@/server/db";
import { closeValidationProcesses, launchRefusal, refusalMessage } from "@/server/validation";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  closeValidationProcesses();
  await db.close();
});

/** A take-away game with no demonstrate(state); `extra` adds members to its definition. */
const game = (extra = "") => `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ left: number }, number>({
  name: "stones",
  data: { kind: "free" },
  systemPrompt: "Take 1, 2 or 3 stones; whoever takes the last one wins.",
  maxTurns: 5,
  actions: ["1", "2", "3"],
  reset: () => ({ state: { left: 7 }, observation: "7 stones" }),
  parseAction: (text) => (/^[123]$/.test(text) ? { ok: true, action: Number(text) } : { ok: false, error: "1, 2 or 3" }),
  step: (state, take) => {
    const left = Math.max(state.left - take, 0);
    return { state: { left }, reward: left === 0 ? 1 : 0, done: left === 0, observation: left + " stones" };
  },${extra}
});
`;
const withDemonstrator = game(`\n  demonstrate: (state) => String(state.left % 4 || 1),`);

const agent = { base: "generalist-base", sampling: { maxTokens: 4 } };
const editorsWords =
  "sft.data: the run takes SFT steps on the environment's demonstrator, but environment.ts defines no demonstrate(state): add one, set sft.steps to 0 (and, to learn from the reward alone, algorithm.klCoef to 0 and algorithm.entropyCoef to 0.01: explore, not stay near the base), or imitate an uploaded dataset";

async function experiment(name: string, files: Record<string, string>, config: Omit<ExperimentConfigInput, "name">) {
  const caller = callerFor(db.handle);
  const { id } = await caller.experiments.create({ name, files, config: { name, ...config } });
  return id;
}

const runsOf = (experimentId: string) => db.handle.db.select({ id: runs.id }).from(runs).where(eq(runs.experimentId, experimentId));

/** The launch's refusal, and that it left no run behind. */
async function refused(experimentId: string) {
  const error = await callerFor(db.handle)
    .runs.launch({ experimentId })
    .then(
      () => null,
      (e: { code: string; message: string }) => e,
    );
  expect(error, "the launch was not refused").not.toBeNull();
  expect(error!.code).toBe("BAD_REQUEST");
  expect(await runsOf(experimentId)).toEqual([]);
  return error!.message;
}

describe("runs.launch refuses what the editor refuses", () => {
  it("refuses SFT steps on a demonstrator the environment does not define, with the editor's words, and launches no run", async () => {
    const files = { "environment.ts": game() };
    const config: Omit<ExperimentConfigInput, "name"> = {
      environment: "custom",
      agent,
      algorithm: { name: "grpo", steps: 2 },
      sft: { data: "demonstrator", steps: 5 },
    };
    const id = await experiment("sft-steps", files, config);
    const message = await refused(id);
    expect(message.split("\n")).toEqual(["Fix first: the config has 1 error; nothing was launched", editorsWords]);

    // The editor's own check, on the report its live validation gets, says the same words.
    const report = await callerFor(db.handle).experiments.validate({ experimentId: id, files, base: agent.base, maxTokens: agent.sampling.maxTokens });
    expect(report.ok).toBe(true);
    expect(report.environment?.hasDemonstrator).toBe(false);
    expect(refusalMessage(launchRefusal({ name: "sft-steps", ...config }, { files, report })!)).toBe(message);
  });

  it("refuses an sft run that imitates the missing demonstrator", async () => {
    const id = await experiment("sft-run", { "environment.ts": game() }, { environment: "custom", agent, algorithm: { name: "sft" as const, steps: 3 } });
    expect((await refused(id)).split("\n")).toEqual(["Fix first: the config has 1 error; nothing was launched", editorsWords]);
  });

  it("launches the same config once the environment defines demonstrate(state), or when SFT takes no steps", async () => {
    const caller = callerFor(db.handle);
    const config: Omit<ExperimentConfigInput, "name"> = {
      environment: "custom",
      agent,
      algorithm: { name: "grpo", steps: 2 },
      sft: { data: "demonstrator", steps: 5 },
    };
    const demonstrated = await experiment("demonstrated", { "environment.ts": withDemonstrator }, config);
    const { runId, diagnostics } = await caller.runs.launch({ experimentId: demonstrated });
    expect(await runsOf(demonstrated)).toEqual([{ id: runId }]);
    expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);

    const noSft = await experiment("no-sft", { "environment.ts": game() }, { ...config, sft: { data: "demonstrator", steps: 0 } });
    await expect(caller.runs.launch({ experimentId: noSft })).resolves.toMatchObject({ runId: expect.stringMatching(/^run_/) });
  });

  it("refuses a source whose validation has errors, each as file:line:column: message", async () => {
    const broken = game().replace(
      'reset: () => ({ state: { left: 7 }, observation: "7 stones" }),',
      'reset: () => {\n    throw new Error("no reset for you");\n  },',
    );
    expect(broken).toContain("no reset for you");
    const id = await experiment("broken", { "environment.ts": broken }, { environment: "custom", agent });
    const [reason, ...problems] = (await refused(id)).split("\n");
    expect(reason).toMatch(/^Fix first: the source has \d+ errors?; nothing was launched$/);
    expect(problems).toContainEqual(expect.stringMatching(/^environment\.ts:9:\d+: .*no reset for you/));
  });

  it("refuses the config's own errors, a custom environment without environment.ts, and an unknown built-in one", async () => {
    // A config with its own errors is not even saved (experiments.create and save parse it), in the same words.
    const badSteps = experiment("bad-steps", {}, { environment: "arithmetic", agent: { base: "arithmetic-base" }, algorithm: { steps: 0 } });
    await expect(badSteps).rejects.toThrow(/^config\.algorithm\.steps: must be a whole number from 1 to 1000000 \(got 0\)$/);
    const noSource = await experiment("no-source", {}, { environment: "custom", agent });
    expect(await refused(noSource)).toMatch(
      /^Fix first: the config has 1 error; .*\nenvironment: 'custom' runs the experiment's own environment\.ts, and the experiment has no source files/,
    );
    const elsewhere = await experiment("elsewhere", { "game.ts": game() }, { environment: "custom", agent });
    expect(await refused(elsewhere)).toMatch(
      /\nenvironment: 'custom' runs the experiment's own environment\.ts, and there is no file of that name among game\.ts$/,
    );
    const unknown = await experiment("unknown", {}, { environment: "arithmetics", agent: { base: "arithmetic-base" } });
    expect(await refused(unknown)).toMatch(/\nenvironment: no built-in environment 'arithmetics'; the built-in ones are arithmetic, .*, or 'custom'/);
  });

  it("reuses the editor's validation of the same source, base and reply length, whatever the order of its files", async () => {
    const caller = callerFor(db.handle);
    const id = await experiment("reused", {}, { environment: "arithmetic", agent: { base: "arithmetic-base" } });
    const helper = "export const HELP = 1;\n";
    const first = await caller.experiments.validate({
      experimentId: id,
      files: { "environment.ts": withDemonstrator, "help.ts": helper },
      base: "generalist-base",
    });
    const again = await caller.experiments.validate({
      experimentId: id,
      files: { "help.ts": helper, "environment.ts": withDemonstrator },
      base: "generalist-base",
    });
    expect(again).toBe(first);
    const otherBase = await caller.experiments.validate({
      experimentId: id,
      files: { "environment.ts": withDemonstrator, "help.ts": helper },
      base: "arithmetic-base",
    });
    expect(otherBase).not.toBe(first);
  });

  it("refuses a job whose cost bound is over the server's limit, with the numbers that make it, and launches nothing", async () => {
    // 1,000,000 steps of 64 × 64 episodes of the game (5 turns of 4 tokens each) on the generalist base
    const huge = await experiment(
      "huge",
      { "environment.ts": withDemonstrator },
      {
        environment: "custom",
        agent,
        algorithm: { name: "grpo", steps: 1_000_000, groupSize: 64, groupsPerStep: 64 },
      },
    );
    const message = await refused(huge);
    expect(message).toMatch(/^This job could cost up to \d\.\de\d+ floating-point operations: 4\.1e9 episodes × up to 5 turns/);
    expect(message).toMatch(/TINKERLAB_MAX_JOB_FLOPS/);
    // The same game at the starter's size is within it.
    const small = await experiment(
      "small",
      { "environment.ts": withDemonstrator },
      {
        environment: "custom",
        agent,
        algorithm: { name: "grpo", steps: 40, groupSize: 8, groupsPerStep: 16 },
      },
    );
    const { runId } = await callerFor(db.handle).runs.launch({ experimentId: small });
    expect(runId).toMatch(/^run_/);
  });
});
