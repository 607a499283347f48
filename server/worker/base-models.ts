/**
 * Base models loaded on a worker: one BaseModel per base per process, shared by every LoRA job that names it. A
 * base is a built-in one, or an earlier run's checkpoint (its adapter merged into its own base, loaded first).
 */
import type { BaseSource } from "../jobs";
import { BaseModel, currentBackend } from "../runtime";
import { baseModelDir } from "../bases";

const loaded = new Map<string, BaseModel>();

export function loadBaseModel(source: BaseSource | string): BaseModel {
  const base: BaseSource = typeof source === "string" ? { kind: "builtin", name: source } : source;
  const key = base.kind === "builtin" ? base.name : base.id;
  let model = loaded.get(key);
  if (!model) {
    // The engine of the backend this worker chose (initBackend); the TypeScript engine when none was chosen.
    const engine = currentBackend()?.engine;
    const options = engine ? { engine } : {};
    model =
      base.kind === "builtin"
        ? BaseModel.load(baseModelDir(base.name), options)
        : BaseModel.fromCheckpoint(base.path, base.mode === "lora" ? loadBaseModel(base.parent) : null, options);
    loaded.set(key, model);
  }
  return model;
}
