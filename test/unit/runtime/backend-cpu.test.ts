import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { BaseModel } from "@/server/runtime/base-model";
import { initBackend } from "@/server/runtime/backend";
import { TrainingClient } from "@/server/runtime/training-client";
import { expectSameAsTypeScriptEngine } from "./fixtures/engine-agreement";

const installed = (name: string) => {
  try {
    createRequire(import.meta.url).resolve(name);
    return true;
  } catch {
    return false;
  }
};

describe("backend choice (tfjs cpu)", () => {
  it.skipIf(installed("@tensorflow/tfjs-node"))("an explicit backend that cannot load is an error naming it", async () => {
    await expect(initBackend({ prefer: "node" })).rejects.toThrow(/backend 'node' is not available: @tensorflow\/tfjs-node is not installed/);
  });

  it("reports the choice in one frozen object and keeps it for the process", async () => {
    const { capabilities } = await initBackend({ prefer: "cpu" });
    expect(capabilities).toMatchObject({ backend: "cpu", requested: "cpu", gpu: false });
    expect(Object.isFrozen(capabilities)).toBe(true);
    expect((await initBackend({ prefer: "auto" })).capabilities).toBe(capabilities);
    await expect(initBackend({ prefer: "wasm" })).rejects.toThrow(/already chosen as 'cpu'/);
  });

  it("computes the same logits, values and gradients as the TypeScript engine (full and LoRA with dropout)", async () => {
    const { engine } = await initBackend({ prefer: "cpu" });
    expectSameAsTypeScriptEngine(engine, "full");
    expectSameAsTypeScriptEngine(engine, "lora");
  });

  it("trains a client end to end", async () => {
    const { engine } = await initBackend({ prefer: "cpu" });
    const client = new TrainingClient(BaseModel.create({ vocabSize: 16, contextLength: 8, dModel: 16, nLayers: 1, nHeads: 2 }, { engine }));
    const batch = { tokens: [[1, 2, 3, 4, 5, 6, 7, 8]] };
    const first = await client.forwardBackward(batch, "cross_entropy");
    for (let i = 0; i < 30; i++) {
      await client.forwardBackward(batch, "cross_entropy");
      await client.optimStep({ lr: 3e-2 });
    }
    expect((await client.forwardBackward(batch, "cross_entropy")).loss).toBeLessThan(first.loss / 4);
  });
});
