import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { listGPTParameters } from "@/lib/model/weights";
import { BaseModel } from "@/server/runtime/base-model";
import { CheckpointCorruptError, readCheckpoint, writeCheckpoint } from "@/server/runtime/checkpoint-store";
import { TrainingClient } from "@/server/runtime/training-client";

const tiny = { vocabSize: 32, contextLength: 16, dModel: 16, nLayers: 1, nHeads: 2 };
const dir = mkdtempSync(join(tmpdir(), "tinkerlab-ckpt-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const visible = (folder: string) => readdirSync(folder).filter((f) => !f.startsWith("."));
const tensorFile = (value: number) => ({
  kind: "tensors" as const,
  tensors: new Map([["x", { shape: [4], data: new Float32Array(4).fill(value) }]]),
});

describe("loading a base", () => {
  it("takes the file's float32 arrays as its weights, not copies of them, and computes as the model saved", async () => {
    // Large enough that Node reads it into a buffer of its own, not its shared pool.
    const saved = BaseModel.create({ ...tiny, vocabSize: 262, dModel: 32, nLayers: 2 }, { seed: 4 });
    const path = join(dir, "as-read");
    await new TrainingClient(saved).saveWeightsForSampler(path);
    const loaded = BaseModel.load(path);
    const arrays = listGPTParameters(loaded.weights, loaded.config).map((p) => p.data);
    expect(new Set(arrays.map((a) => a.buffer)).size).toBe(1); // one buffer: the file's bytes
    expect(arrays[0]!.buffer.byteLength).toBe(readFileSync(join(path, "weights.safetensors")).length);
    const tokens = new Int32Array([257, 40, 41, 42]);
    const logits = (model: BaseModel) =>
      model.engine.run({ model: { config: model.config, weights: model.weights, lora: null, valueHead: null }, tokens, batch: 1, seqLen: 4 }).logits;
    expect(logits(loaded)).toEqual(logits(saved));
  });
});

describe("checkpoint compatibility", () => {
  it("refuses a checkpoint of another model shape, naming each mismatch", async () => {
    const path = join(dir, "d16");
    await new TrainingClient(BaseModel.create(tiny)).saveState(path);
    const wider = new TrainingClient(BaseModel.create({ ...tiny, dModel: 32, nHeads: 4 }));
    await expect(wider.loadState(path)).rejects.toThrow(/checkpoint has dModel=16, model expects dModel=32; checkpoint has nHeads=2, model expects nHeads=4/);
    expect(() => BaseModel.load(path, { expect: { ...tiny, contextLength: 8 } })).toThrow(/checkpoint has contextLength=16, model expects contextLength=8/);
  });

  it("refuses an adapter of another rank or a checkpoint of another mode", async () => {
    const base = BaseModel.create(tiny);
    const path = join(dir, "rank4");
    await new TrainingClient(base, { lora: { rank: 4 } }).saveState(path);
    await expect(new TrainingClient(base, { lora: { rank: 8 } }).loadState(path)).rejects.toThrow(/checkpoint has rank=4, client expects rank=8/);
    await expect(new TrainingClient(base).loadState(path)).rejects.toThrow(/checkpoint holds a LoRA adapter, client trains full weights/);
  });
});

describe("checkpoint checksums", () => {
  it("a truncated, altered or missing file is refused when opened, naming the checkpoint and the file", async () => {
    const save = async (name: string) => {
      const path = join(dir, "checked", name);
      await new TrainingClient(BaseModel.create(tiny)).saveState(path);
      return path;
    };
    const truncated = await save("truncated");
    const weights = join(truncated, "weights.safetensors");
    const size = readFileSync(weights).length;
    truncateSync(weights, size - 100);
    const refusal = (() => {
      try {
        readCheckpoint(truncated);
      } catch (error) {
        return error as Error;
      }
      return null;
    })();
    expect(refusal).toBeInstanceOf(CheckpointCorruptError);
    expect(refusal!.message).toBe(
      `checkpoint '${truncated}' cannot be used: weights.safetensors is ${size - 100} bytes; the manifest says ${size} (truncated?)`,
    );
    await expect(new TrainingClient(BaseModel.create(tiny)).loadState(truncated)).rejects.toThrow(CheckpointCorruptError);

    const altered = await save("altered");
    const bytes = readFileSync(join(altered, "optimizer.safetensors"));
    bytes[bytes.length - 1] ^= 0xff; // one flipped byte, same size
    writeFileSync(join(altered, "optimizer.safetensors"), bytes);
    expect(() => readCheckpoint(altered)).toThrow(/optimizer\.safetensors does not match the checksum in the manifest/);

    const missing = await save("missing");
    rmSync(join(missing, "trainer_state.json"));
    expect(() => readCheckpoint(missing)).toThrow(/trainer_state\.json is missing \(the manifest lists it\)/);
    expect(() => readCheckpoint(join(dir, "checked", "never-written"))).toThrow(/never-written' cannot be used: its folder does not exist/);
    // An intact one opens, and its manifest records every file's size and checksum.
    const intact = readCheckpoint(await save("intact"));
    expect(Object.keys(intact.manifest.checksums!).sort()).toEqual([...intact.manifest.files].sort());
  });
});

describe("atomic checkpoint writes", () => {
  it("a write that fails part-way leaves the previous checkpoint intact and no partial folder", () => {
    const path = join(dir, "atomic", "ckpt");
    writeCheckpoint(path, { kind: "sampler_weights", contents: "full", step: 1 }, { "w.safetensors": tensorFile(1) });
    expect(() =>
      writeCheckpoint(
        path,
        { kind: "sampler_weights", contents: "full", step: 2 },
        { "w.safetensors": tensorFile(2), "v.safetensors": tensorFile(3) },
        {
          afterFile: (name) => {
            if (name === "w.safetensors") throw new Error("disk full");
          },
        },
      ),
    ).toThrow("disk full");
    const ckpt = readCheckpoint(path);
    expect(ckpt.manifest.step).toBe(1);
    expect(ckpt.tensors("w.safetensors").get("x")!.data[0]).toBe(1);
    expect(readdirSync(join(dir, "atomic"))).toEqual(["ckpt"]); // the temporary folder was removed too
  });

  it("a process killed mid-write leaves the previous checkpoint readable under the target name", async () => {
    const parent = join(dir, "killed");
    const path = join(parent, "ckpt");
    writeCheckpoint(path, { kind: "sampler_weights", contents: "full", step: 1 }, { "a.safetensors": tensorFile(1) });
    const script = fileURLToPath(new URL("./fixtures/hang-mid-checkpoint.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", script, path], {
      cwd: fileURLToPath(new URL("../../..", import.meta.url)),
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (chunk) => String(chunk).includes("mid-write") && resolve());
      child.on("exit", (code) => reject(new Error(`writer exited with ${code} before reaching mid-write`)));
    });
    child.kill("SIGKILL");
    await new Promise((resolve) => child.on("exit", resolve));
    expect(visible(parent)).toEqual(["ckpt"]);
    const ckpt = readCheckpoint(path);
    expect(ckpt.manifest.step).toBe(1);
    expect(ckpt.tensors("a.safetensors").get("x")!.data[0]).toBe(1);
    // The dead writer's temporary folder is hidden, so nothing lists it as a checkpoint.
    expect(readdirSync(parent).some((f) => f.startsWith(".ckpt.tmp-"))).toBe(true);
  }, 30_000);

  it("a new checkpoint under an existing name replaces it whole", () => {
    const path = join(dir, "replace", "ckpt");
    writeCheckpoint(path, { kind: "sampler_weights", contents: "full", step: 1 }, { "old.safetensors": tensorFile(1) });
    writeCheckpoint(path, { kind: "sampler_weights", contents: "full", step: 2 }, { "new.safetensors": tensorFile(2) });
    expect(readdirSync(join(dir, "replace"))).toEqual(["ckpt"]);
    expect(readdirSync(path).sort()).toEqual(["manifest.json", "new.safetensors"]);
    expect(readCheckpoint(path).manifest.step).toBe(2);
  });
});
