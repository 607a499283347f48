/**
 * A base model held once per process: its config, tokenizer and weights, and the engine that computes it.
 * Any number of TrainingClients sit on one BaseModel; LoRA clients read its weights without copying them,
 * full-parameter clients train a copy, and both use it, frozen, as the reference policy of the KL penalty.
 */
import { type GPTConfig, describeMismatch, parseGPTConfig, parseLoraConfig } from "@/lib/model/config";
import { initLoraAdapter, listLoraParameters, mergeLoraAdapter } from "@/lib/model/lora";
import type { Engine } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { Rng } from "@/lib/model/rng";
import { ByteTokenizer, type Tokenizer } from "@/lib/model/tokenizer";
import { tokenizerFromSpec } from "@/lib/model/tokenizer-spec";
import { type GPTWeights, assignParameters, gptWeightsFromTensors, initGPTWeights, listGPTParameters } from "@/lib/model/weights";
import { currentBackend } from "./backend";
import { readCheckpoint } from "./checkpoint-store";

export interface BaseModelOptions {
  /** how to compute the model; default: the engine initBackend chose, or the TypeScript engine before it ran */
  engine?: Engine;
}

/** The engine asked for; else the one initBackend chose; else the TypeScript engine. */
const engineOf = (options: BaseModelOptions): Engine => options.engine ?? currentBackend()?.engine ?? jsEngine;

export class BaseModel {
  private constructor(
    readonly config: GPTConfig,
    readonly weights: GPTWeights,
    readonly engine: Engine,
    /** the byte tokenizer for the project's own bases; an imported model's own */
    readonly tokenizer: Tokenizer,
  ) {}

  /** A freshly initialised model (GPT-2 initialisation from `seed`). */
  static create(config: unknown, options: BaseModelOptions & { seed?: number; tokenizer?: Tokenizer } = {}): BaseModel {
    const parsed = parseGPTConfig(config);
    return new BaseModel(parsed, initGPTWeights(parsed, new Rng(options.seed ?? 0)), engineOf(options), options.tokenizer ?? new ByteTokenizer());
  }

  /**
   * Loads full weights from a checkpoint folder (a full-parameter training state, or sampler weights that are
   * full or merged). With `expect` given, a checkpoint of another shape is refused with the fields that differ.
   */
  static load(dir: string, options: BaseModelOptions & { expect?: GPTConfig } = {}): BaseModel {
    const ckpt = readCheckpoint(dir);
    if (ckpt.manifest.contents === "lora") {
      throw new Error(`'${dir}' holds a LoRA adapter, not full weights; load it into a TrainingClient on its base model`);
    }
    const config = parseGPTConfig(ckpt.json("model_config.json"));
    if (options.expect) {
      const problems = describeMismatch(config, options.expect);
      if (problems.length > 0) throw new Error(`cannot load '${dir}': ${problems.join("; ")}`);
    }
    const tokenizer = tokenizerFromSpec(ckpt.json("tokenizer.json"), `checkpoint '${dir}'`);
    // The file's float32 arrays become the weights themselves: the load's peak is the file's size, not three times it.
    const weights = gptWeightsFromTensors(config, ckpt.tensors("weights.safetensors", { views: true }), `checkpoint '${dir}'`);
    return new BaseModel(config, weights, engineOf(options), tokenizer);
  }

  /**
   * An earlier run's checkpoint as a base: its full weights as they are, or its LoRA adapter folded into
   * `parent` (the base that run trained on), so a new run starts from that run's policy.
   */
  static fromCheckpoint(dir: string, parent: BaseModel | null, options: BaseModelOptions = {}): BaseModel {
    const ckpt = readCheckpoint(dir);
    if (ckpt.manifest.contents !== "lora") return BaseModel.load(dir, options);
    if (!parent) throw new Error(`'${dir}' holds a LoRA adapter: load it with the base it was trained on`);
    const problems = describeMismatch(ckpt.json("model_config.json"), parent.config, "its base");
    if (problems.length > 0) throw new Error(`cannot load '${dir}' on its base: ${problems.join("; ")}`);
    const adapter = initLoraAdapter(parent.weights, parseLoraConfig(ckpt.json("lora_config.json")), new Rng(0));
    assignParameters(listLoraParameters(adapter, parent.weights), ckpt.tensors("weights.safetensors"), `checkpoint '${dir}'`);
    return new BaseModel(parent.config, mergeLoraAdapter(parent.weights, adapter, parent.config), options.engine ?? parent.engine, parent.tokenizer);
  }

  parameterCount(): number {
    return listGPTParameters(this.weights, this.config).reduce((n, p) => n + p.data.length, 0);
  }
}
