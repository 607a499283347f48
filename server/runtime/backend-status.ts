import { serverEnv } from "../env";

export type TrainingBackendStatus = {
  /** What the configuration asks for (TINKERLAB_BACKEND). */
  requested: "auto" | "node-gpu" | "node" | "wasm" | "cpu";
  /** The backend this process trains with once the runtime has started, else null. */
  active: string | null;
};

const holder = globalThis as typeof globalThis & { __tinkerlabTrainingBackend?: string };

/** Called by the runtime when it has chosen its backend. */
export function recordActiveTrainingBackend(name: string) {
  holder.__tinkerlabTrainingBackend = name;
}

export function trainingBackendStatus(): TrainingBackendStatus {
  return { requested: serverEnv().TINKERLAB_BACKEND, active: holder.__tinkerlabTrainingBackend ?? null };
}
