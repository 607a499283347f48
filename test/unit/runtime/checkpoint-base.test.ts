/** A run's checkpoint as a base: the new run starts from exactly the policy the old run had at that step. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BaseModel } from "@/server/runtime/base-model";
import { TrainingClient } from "@/server/runtime/training-client";

const dir = mkdtempSync(join(tmpdir(), "tinkerlab-ckpt-base-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const config = { vocabSize: 262, contextLength: 24, dModel: 16, nLayers: 2, nHeads: 2 };
const data = {
  tokens: [
    [257, 72, 105, 33, 261],
    [257, 79, 107, 261, 10],
  ],
};

async function trained(client: TrainingClient) {
  for (let i = 0; i < 8; i++) {
    await client.forwardBackward(data, "cross_entropy");
    await client.optimStep({ lr: 5e-2 });
  }
  return client;
}

describe("a checkpoint as a base", () => {
  it("merges a LoRA run's adapter into its own base: the new base computes what the run's policy did", async () => {
    const parent = BaseModel.create(config, { seed: 4 });
    const lora = await trained(new TrainingClient(parent, { lora: { rank: 4, alpha: 8 }, valueHead: true, seed: 4 }));
    await lora.saveState(join(dir, "lora"));
    const base = BaseModel.fromCheckpoint(join(dir, "lora"), parent);
    const expected = (await lora.forward(data)).logprobs;
    const got = (await new TrainingClient(base).forward(data)).logprobs;
    got.flat().forEach((value, i) => expect(Math.abs(value - expected.flat()[i]!)).toBeLessThan(1e-5));
    // and the adapter really moved the policy: the parent alone computes something else
    const parentOnly = (await new TrainingClient(parent).forward(data)).logprobs.flat();
    expect(parentOnly.some((value, i) => Math.abs(value - expected.flat()[i]!) > 1e-3)).toBe(true);
  });

  it("loads a full-parameter run's training state as it is, and refuses an adapter without its base", async () => {
    const full = await trained(new TrainingClient(BaseModel.create(config, { seed: 5 }), { seed: 5 }));
    await full.saveState(join(dir, "full"));
    const base = BaseModel.fromCheckpoint(join(dir, "full"), null);
    const expected = (await full.forward(data)).logprobs.flat();
    (await new TrainingClient(base).forward(data)).logprobs.flat().forEach((value, i) => expect(Math.abs(value - expected[i]!)).toBeLessThan(1e-6));
    expect(() => BaseModel.fromCheckpoint(join(dir, "lora"), null)).toThrow(/holds a LoRA adapter: load it with the base it was trained on/);
  });
});
