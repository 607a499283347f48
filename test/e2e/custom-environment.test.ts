/** A user's own environment, written in TypeScript, trained through the sandbox on a real worker. */
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { callProcedure, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
beforeAll(async () => {
  const basesDir = tempDir("bases");
  const base = BaseModel.create({ vocabSize: 262, contextLength: 48, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 3 });
  await new TrainingClient(base).saveWeightsForSampler(path.join(basesDir, "tiny-base"));
  server = await startServer({ TINKERLAB_BASES_DIR: basesDir, TINKERLAB_EXAMPLES: "off", ARTIFACTS_DIR: tempDir("artifacts") });
});
afterAll(() => server?.stop());

const call = <T>(procedure: string, input: unknown, method: "GET" | "POST" = "POST") => callProcedure<T>(server, procedure, input, method);

const source = `import { defineEnvironment } from "tinkerlab";
// Reward 1 for any reply that starts with a digit.
export default defineEnvironment<{ said: string }, string>({
  name: "say-a-digit",
  data: { kind: "free" },
  systemPrompt: "Say a digit.",
  maxTurns: 1,
  reset: () => ({ state: { said: "" }, observation: "go" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state, text) => ({ state: { said: text }, reward: /^[0-9]/.test(text) ? 1 : 0, done: true }),
});
`;

it("trains an experiment's own environment in the sandbox", async () => {
  const { id } = await call<{ id: string }>("experiments.create", {
    name: "custom",
    files: { "environment.ts": source },
    config: {
      name: "custom",
      environment: "custom",
      agent: { base: "tiny-base", sampling: { maxTokens: 2 } },
      algorithm: { name: "grpo", steps: 6, groupSize: 4, groupsPerStep: 2 },
      evaluation: { every: 0, episodes: 4 },
    },
  });
  const { runId } = await call<{ runId: string }>("runs.launch", { experimentId: id });
  let run = { status: "queued", step: 0, reason: null as string | null };
  for (let i = 0; i < 400 && !["completed", "failed"].includes(run.status); i++) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    run = await call("runs.byId", { id: runId }, "GET");
  }
  expect(run).toMatchObject({ status: "completed", step: 6 });
  const rollouts = await call<{ items: { turns: { observation: string }[] }[] }>("runs.rollouts", { runId }, "GET");
  expect(rollouts.items[0]!.turns[0]!.observation).toBe("go");
}, 240_000);
