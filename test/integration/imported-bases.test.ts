/**
 * A Hugging Face model imported on the server is a base like a built-in one: listed (as imported, with its shape
 * and where it came from), accepted by a launch, and its runs' token strips are written in its own tokens.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HFTokenizer } from "@/lib/model/hf/tokenizer";
import { rollouts, type DatabaseHandle } from "@/server/db";
import { importHFBase } from "@/server/worker/base-import";
import { writeHFModelFolder } from "../support/hf-model-fixtures";
import { callerFor, openTestDatabase } from "./support/database";

const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-imported-"));
process.env.ARTIFACTS_DIR = path.join(folder, "artifacts");
const source = path.join(folder, "SmolThing-Instruct");

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  writeHFModelFolder(source, "llama3", { tokenizer: true, seed: 4 });
  importHFBase(source, { contextLength: 32 });
});
afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

describe("imported bases", () => {
  it("are listed as imported, named after their folder, with their shape and origin", async () => {
    const bases = await callerFor(handle).checkpoints.bases();
    expect(bases.builtin.find((b) => b.name === "smolthing-instruct")).toMatchObject({
      imported: true,
      origin: `imported llama model from ${source}`,
      shape: { contextLength: 32 },
    });
    expect(bases.builtin.find((b) => b.name === "arithmetic-base")).toMatchObject({ imported: false });
  });

  it("start a run, whose rollouts' tokens come with their text in the model's own vocabulary", async () => {
    const caller = callerFor(handle);
    const experiment = await caller.experiments.create({
      name: "on an imported model",
      config: {
        name: "on an imported model",
        environment: "arithmetic",
        agent: { base: "smolthing-instruct", training: { mode: "lora" }, sampling: { maxTokens: 5 } },
      },
    });
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    const tokenizer = HFTokenizer.fromFolder(source);
    const tokens = [...tokenizer.encode(" 42"), tokenizer.stopTokens[0]!];
    await handle.db.insert(rollouts).values({
      runId,
      step: 1,
      groupIndex: 0,
      sampleIndex: 0,
      turns: [{ observation: "40 + 2", action: " 42" }],
      rewards: { correct: 1 },
      totalReward: 1,
      tokens,
      tokenLogprobs: tokens.map(() => -0.5),
    });
    const { items } = await caller.runs.rollouts({ runId });
    expect(items[0]!.tokenTexts).toEqual(tokens.map((t) => tokenizer.tokenText(t)));
    expect(items[0]!.tokenTexts!.join("")).toBe(" 42<|eot_id|>");
  });

  it("refuses a context longer than the model was made for", async () => {
    expect(() => importHFBase(source, { name: "too-long", contextLength: 1_000_000 })).toThrow(/context/i);
  });
});
