/** The managed runtime's public surface: what RL algorithms, workers and user scripts import. */
export { BaseModel, type BaseModelOptions } from "./base-model";
export {
  TrainingClient,
  type TrainingClientOptions,
  type ForwardResult,
  type ForwardBackwardResult,
  type OptimStepResult,
} from "./training-client";
export type { Batch } from "./batch";
export { lossNames, lossConfigSchema, type LossName, type LossConfig, type LossConfigInput } from "./losses";
export { adamParamsSchema, type AdamParams, type AdamParamsInput } from "./optimizer";
export { sampleParamsSchema, type SampleParams, type SampleParamsInput, type SampleResult, type SampledSequence } from "./sampler";
export {
  initBackend,
  currentBackend,
  backendNames,
  kernelPreferences,
  type KernelPreference,
  type BackendName,
  type BackendPreference,
  type RuntimeBackend,
  type RuntimeCapabilities,
} from "./backend";
export { readCheckpoint, writeCheckpoint, checkpointFormat, checkpointVersion, CheckpointCorruptError, type CheckpointManifest } from "./checkpoint-store";
export {
  gptConfigSchema,
  loraConfigSchema,
  loraTargetNames,
  type GPTConfig,
  type LoraConfig,
  type LoraConfigInput,
  type LoraTarget,
} from "@/lib/model/config";
export { ByteTokenizer, specialTokens } from "@/lib/model/tokenizer";
export { renderChat, type ChatMessage, type ChatRole, type RenderedChat } from "@/lib/model/chat";
