/**
 * A Hugging Face model folder imported as a base (`tinkerlab bases import`) serves every job kind as a built-in
 * base does: an SFT run in its own chat template learns (LoRA on the llama projections), sampling reports the
 * logprobs forward computes, legal actions hold its BPE tokens, an RL run starts from the SFT checkpoint, and
 * the checkpoint keeps the model's tokenizer.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { HFTokenizer } from "@/lib/model/hf/tokenizer";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { importedBaseNames, baseModelDir } from "@/server/bases";
import { importHFBase, importHFBaseApart } from "@/server/worker/base-import";
import type { JobSpec } from "@/server/worker/run-job";
import { playColourJob } from "../../support/colour-job";
import { writeHFModelFolder } from "../../support/hf-model-fixtures";

const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-hf-artifacts-"));
process.env.ARTIFACTS_DIR = artifactsDir;
const source = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-hf-source-"));

beforeAll(() => {
  writeHFModelFolder(source, "qwen2", { tokenizer: true, seed: 3 });
  importHFBase(source, { name: "tiny-qwen" });
});

/** An SFT job with LoRA on the imported base (`extra` replaces parts of the spec). */
const play = (config: Record<string, unknown>, extra: Partial<JobSpec> = {}) =>
  playColourJob(
    config,
    {
      job: { id: "job_hf", runId: "run_hf", kind: "sft", mode: "lora", lastCheckpointId: null, attempts: 0 },
      base: { kind: "builtin", name: "tiny-qwen" },
      ...extra,
    } as Partial<JobSpec>,
    undefined,
    artifactsDir,
  );

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

describe("a Hugging Face model imported as a base", () => {
  it("is listed with the bases and loads with its own tokenizer and chat template", () => {
    expect(importedBaseNames()).toContain("tiny-qwen");
    const base = BaseModel.load(baseModelDir("tiny-qwen"));
    expect(base.config).toMatchObject({ architecture: "llama", nKvHeads: 2, tiedEmbeddings: true, qkvBias: true });
    expect(base.tokenizer).toBeInstanceOf(HFTokenizer);
    const rendered = base.tokenizer.renderChat([{ role: "user", content: "red" }], { addGenerationPrompt: true });
    expect(base.tokenizer.decode(rendered.tokens)).toMatch(/<\|im_start\|>user\nred<\|im_end\|>\n<\|im_start\|>assistant\n$/);
    expect(base.tokenizer.decode(base.tokenizer.stopTokens.slice(0, 1))).toBe("<|im_end|>");
  });

  it("samples with the logprobs forward computes, stops at its end of turn, and holds legal actions to BPE tokens", async () => {
    const base = BaseModel.load(baseModelDir("tiny-qwen"));
    const client = new TrainingClient(base, { lora: { rank: 4 }, seed: 2 });
    const prompt = base.tokenizer.renderChat([{ role: "user", content: "blue" }], { addGenerationPrompt: true }).tokens;
    const { samples } = await client.sample([prompt], 4, { maxTokens: 6, temperature: 1, seed: 5 });
    for (const sample of samples[0]!) {
      const { logprobs } = await client.forward({ tokens: [[...prompt, ...sample.tokens]] });
      const tail = logprobs[0]!.slice(prompt.length);
      sample.logprobs.forEach((lp, i) => expect(Math.abs(lp - tail[i]!)).toBeLessThan(1e-4));
    }
    const held = await client.sample([prompt], 6, { maxTokens: 8, temperature: 1.5, seed: 9, constraints: [{ actions: ["red", "blue", "green"] }] });
    for (const sample of held.samples[0]!) {
      expect(["red", "blue", "green"]).toContain(sample.text);
      expect(sample.finishReason).toBe("stop");
      expect(sample.tokens.at(-1)).toBe(base.tokenizer.stopTokens[0]);
    }
  });

  it("learns by SFT with LoRA in its own chat template, and its checkpoint starts an RL run with the same tokenizer", async () => {
    const config = {
      name: "sft",
      environment: "custom",
      agent: { base: "tiny-qwen", training: { mode: "lora", lora: { rank: 8, alpha: 16 } }, sampling: { maxTokens: 4 } },
      algorithm: { name: "sft", steps: 30, learningRate: 1e-2 },
      sft: { batchSize: 16, data: "demonstrator", demonstrations: 60 },
      evaluation: { every: 0, episodes: 24 },
      checkpointEvery: 0,
    };
    const sft = await play(config);
    expect(sft.outcome).toEqual({ outcome: "completed", reason: null });
    const loss = sft.series("loss/sft");
    expect(loss).toHaveLength(30);
    expect(mean(loss.slice(-5))).toBeLessThan(mean(loss.slice(0, 5)) / 2);
    const [before, after] = sft.series("eval/score");
    expect(after!).toBeGreaterThan(before!);
    const checkpoint = sft.saved.at(-1)!;
    expect(JSON.parse(fs.readFileSync(path.join(checkpoint.path, "tokenizer.json"), "utf8")).type).toBe("hf");

    const rl = await play({ ...config, algorithm: { name: "grpo", steps: 2, groupSize: 4, groupsPerStep: 2 } }, {
      job: { id: "job_rl", runId: "run_rl", kind: "rl", mode: "lora", lastCheckpointId: null, attempts: 0 },
      base: {
        kind: "checkpoint",
        id: "ckpt_sft",
        path: checkpoint.path,
        step: 30,
        runId: "run_hf",
        runName: "sft",
        mode: "lora",
        parent: { kind: "builtin", name: "tiny-qwen" },
      },
    } as never);
    expect(rl.outcome).toEqual({ outcome: "completed", reason: null });
    expect(rl.series("reward/mean")).toHaveLength(2);
    expect(rl.series("eval/score")[0]).toBe(after);
  }, 180_000);

  it("imports in a process of its own, as the upload route does: the same base, the caller free to answer meanwhile", async () => {
    let turns = 0;
    const timer = setInterval(() => turns++, 5);
    const record = await importHFBaseApart(source, { name: "tiny-qwen-apart", origin: "an upload by a test" });
    clearInterval(timer);
    expect(turns).toBeGreaterThan(10); // the event loop kept turning while the model converted
    expect(record).toMatchObject({ name: "tiny-qwen-apart", source: "an upload by a test", modelType: "qwen2" });
    const weights = (name: string) => fs.readFileSync(path.join(baseModelDir(name), "weights.safetensors"));
    expect(weights("tiny-qwen-apart").equals(weights("tiny-qwen"))).toBe(true);
    // Its refusals are the import's own, in one line.
    await expect(importHFBaseApart(source, { name: "tiny-qwen" })).rejects.toThrow(
      /^a base named 'tiny-qwen' was imported already; pick another name, or replace it \(--replace\)$/,
    );
  }, 60_000);

  it("refuses a second import under the same name, a built-in base's name, and a folder that is no model", () => {
    expect(() => importHFBase(source, { name: "tiny-qwen" })).toThrow(/imported already; pick another name, or replace it \(--replace\)/);
    expect(() => importHFBase(source, { name: "Bad Name" })).toThrow(/cannot name a base/);
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-hf-empty-"));
    expect(() => importHFBase(empty, { name: "empty" })).toThrow(/config\.json/);
    expect(importedBaseNames()).not.toContain("empty");
  });
});
