/** Base models loaded on a worker: one BaseModel per name per process, shared by every LoRA job that names it. */
import { BaseModel, currentBackend } from "../runtime";
import { baseModelDir } from "./base-catalog";

const loaded = new Map<string, BaseModel>();

export function loadBaseModel(name: string): BaseModel {
  let model = loaded.get(name);
  if (!model) {
    // The engine of the backend this worker chose (initBackend); the TypeScript engine when none was chosen.
    const engine = currentBackend()?.engine;
    model = BaseModel.load(baseModelDir(name), engine ? { engine } : {});
    loaded.set(name, model);
  }
  return model;
}
