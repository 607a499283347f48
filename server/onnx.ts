/**
 * Models as ONNX files (lib/onnx/export.ts), for download and for the browser: a built-in base, or a run's state
 * checkpoint with its lineage loaded as a worker loads it (a LoRA adapter merged into the base it was trained on).
 * Each file is exported once and kept in `<artifactsDir>/onnx/v<layout>/<name>.onnx` (ONNX_GRAPH_LAYOUT: a file of an
 * earlier layout is not served, and is exported again): written to a temporary file and renamed, so a reader never
 * sees half of one; a built-in base whose weights are newer than its file is exported again.
 *
 * It loads the runtime, which Next cannot bundle: a route imports it at run time (app/api/models/[file]/route.ts).
 */
import fs from "node:fs";
import path from "node:path";
import { exportGptToOnnx, ONNX_GRAPH_LAYOUT } from "@/lib/onnx/export";
import type { Database } from "./db";
import { describeLineage, isCheckpointBase, resolveBase, UnknownBaseError } from "./jobs";
import { baseModelDir, baseNameRule, baseNames } from "./bases";
import { loadBaseModel } from "./worker/base-models";

export { UnknownBaseError };

interface OnnxFile {
  path: string;
  size: number;
  /** true when the file was already there, false when this call exported it */
  cached: boolean;
}

/** What a model file may be called: `<built-in base>.onnx` or `<ckpt_…>.onnx`, in words for an error message. */
const ONNX_NAMES_ACCEPTED = "a base, built-in or imported ('<name>.onnx', e.g. 'arithmetic-base.onnx'), or a run's checkpoint ('ckpt_….onnx')";

const checkpointId = /^ckpt_[A-Za-z0-9]+$/;

/** Exports in progress, by file: a second request for the same model waits for the first. */
const inFlight = new Map<string, Promise<OnnxFile>>();

/** The name's ONNX file, exported on first use; UnknownBaseError for a name that is no model (or one refused as a base). */
export async function onnxFileFor(db: Database, artifactsDir: string, name: string): Promise<OnnxFile> {
  const builtin = !isCheckpointBase(name);
  if (builtin ? !baseNameRule.test(name) || !baseNames().includes(name) : !checkpointId.test(name)) {
    throw new UnknownBaseError(`No model named '${name}'. A model file is ${ONNX_NAMES_ACCEPTED}.`);
  }
  // Resolved before the cache is looked at: a checkpoint set aside since its file was made is refused all the same.
  const source = await resolveBase(db, name);
  const file = path.join(path.resolve(artifactsDir), "onnx", `v${ONNX_GRAPH_LAYOUT}`, `${name}.onnx`);
  const existing = statOrNull(file);
  if (existing && !(builtin && isOlderThanBase(existing, name))) return { path: file, size: existing.size, cached: true };

  let pending = inFlight.get(file);
  if (!pending) {
    pending = (async () => {
      const model = loadBaseModel(source);
      const bytes = exportGptToOnnx(model.config, model.weights, {
        tokenizer: model.tokenizer,
        metadata: {
          "tinkerlab.model": name,
          "tinkerlab.lineage": describeLineage(source),
        },
      });
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const temp = `${file}.${process.pid}.${Date.now().toString(36)}.tmp`;
      try {
        fs.writeFileSync(temp, bytes);
        fs.renameSync(temp, file);
      } finally {
        fs.rmSync(temp, { force: true });
      }
      return { path: file, size: bytes.length, cached: false };
    })().finally(() => inFlight.delete(file));
    inFlight.set(file, pending);
  }
  return pending;
}

function statOrNull(file: string): fs.Stats | null {
  try {
    return fs.statSync(file);
  } catch {
    return null;
  }
}

/** Whether a built-in base's weights were replaced (bin/make-base-models.ts) after its file was exported. */
function isOlderThanBase(file: fs.Stats, name: string): boolean {
  const weights = statOrNull(path.join(baseModelDir(name), "weights.safetensors"));
  return weights !== null && weights.mtimeMs > file.mtimeMs;
}
