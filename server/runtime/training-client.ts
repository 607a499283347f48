/**
 * The training primitives every algorithm and user script is written on: forward, forwardBackward, optimStep,
 * sample, saveState / loadState and saveWeightsForSampler. One client trains either one LoRA adapter on a
 * shared, frozen base model or a full copy of the base's weights, optionally with a value head for PPO.
 */
import { type GPTConfig, type LoraConfig, type LoraConfigInput, describeMismatch, modelShape, parseLoraConfig } from "@/lib/model/config";
import type { GradientTargets, ModelView } from "@/lib/model/engine";
import { type LoraAdapter, cloneLoraAdapter, initLoraAdapter, listLoraParameters, mergeLoraAdapter } from "@/lib/model/lora";
import { Rng, type RngState } from "@/lib/model/rng";
import { tokenizerSpec } from "@/lib/model/tokenizer-spec";
import {
  type NamedParameter,
  assignParameters,
  cloneGPTWeights,
  initValueHead,
  listGPTParameters,
  listValueHeadParameters,
  parametersToTensorMap,
} from "@/lib/model/weights";
import { PASS_ACTIVATION_BYTES, STRETCH_FLOPS, turnClock } from "@/lib/model/budgets";
import type { TrainingPrimitives } from "@/lib/rl/primitives";
import type { BaseModel } from "./base-model";
import { type Batch, maskDisallowed, packBatch, tokenLogprobs } from "./batch";
import { type CheckpointFile, readCheckpoint, writeCheckpoint } from "./checkpoint-store";
import { type LossConfig, type LossConfigInput, type LossName, lossAccumulator, lossWeight, parseLossConfig, requireLossInputs } from "./losses";
import { AdamW, type AdamParamsInput, type TrainableParameter } from "./optimizer";
import { type SampleParamsInput, type SampleResult, parseSampleParams, sampleInTurns } from "./sampler";

/**
 * forwardBackward's output layer and loss run this many rows at a time: the logits and their gradient then
 * exist for 256 rows, not the pass's B·T (at a 49,152-word vocabulary, 50 MB each instead of 200 at 1,024 rows);
 * 256 rows keep the output layer's products as fast as one.
 */
const LOSS_CHUNK_ROWS = 256;

/** forward() runs a batch in slices of about this many tokens (padded), so its memory stays bounded. */
export const FORWARD_CHUNK_TOKENS = 16_384;

/**
 * About what one token of a sequence of `length` costs a training pass, in bytes: each layer keeps its inputs,
 * norms, projections and attention row (about 12·dModel + 2·the MLP's width + heads·length floats), and the output
 * its logits, their gradient and the softmax (3·vocabulary). A 135M llama (30 × 576, vocabulary 49,152) at 115
 * tokens: 2.3 MB estimated, 2.0 MB measured.
 */
export function passBytesPerToken(config: GPTConfig, length: number): number {
  const s = modelShape(config);
  const fcOut = s.llama ? 2 * s.dFF : s.dFF;
  return 4 * (config.nLayers * (12 * config.dModel + 2 * fcOut + config.nHeads * length) + 3 * config.vocabSize);
}

/**
 * The batch's rows in passes, shortest first: each pass as many rows as keep (rows × their longest length) within
 * `tokensAtOnce(longest)` tokens, at least one.
 */
function passesOf(tokens: number[][], tokensAtOnce: (length: number) => number): number[][] {
  const order = tokens.map((_, i) => i).sort((a, b) => tokens[a]!.length - tokens[b]!.length);
  const passes: number[][] = [];
  for (let start = 0; start < order.length; ) {
    let end = start + 1;
    while (end < order.length) {
      const length = tokens[order[end]!]!.length;
      if ((end + 1 - start) * length > tokensAtOnce(length)) break;
      end++;
    }
    passes.push(order.slice(start, end));
    start = end;
  }
  return passes;
}

/** The rows of a batch: every per-sequence array of it, cut to those rows in that order. */
function rowsOf(batch: Batch, rows: number[]): Batch {
  const part: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(batch)) part[key] = Array.isArray(value) ? rows.map((row) => value[row]) : value;
  return part as unknown as Batch;
}

/** The passes of one forwardBackward as one: losses and counts add up, means weigh by tokens, extremes stay extreme. */
function combinePasses(results: ForwardBackwardResult[]): ForwardBackwardResult {
  const tokens = results.reduce((sum, r) => sum + (r.metrics.tokens ?? 0), 0);
  const metrics: Record<string, number> = {};
  for (const name of new Set(results.flatMap((r) => Object.keys(r.metrics)))) {
    const values = results.map((r) => r.metrics[name]).filter((v): v is number => v !== undefined);
    if (name === "tokens" || name === "loss" || name.startsWith("loss/")) metrics[name] = values.reduce((a, b) => a + b, 0);
    else if (name === "ratio/min") metrics[name] = Math.min(...values);
    else if (name === "ratio/max") metrics[name] = Math.max(...values);
    else metrics[name] = results.reduce((sum, r) => sum + (r.metrics[name] ?? 0) * (r.metrics.tokens ?? 0), 0) / Math.max(tokens, 1e-12);
  }
  return { loss: metrics.loss!, metrics };
}

export interface TrainingClientOptions {
  /** train a LoRA adapter with these settings on the frozen base; absent: train every parameter */
  lora?: LoraConfigInput;
  /** attach a value head (PPO): `forward` then reports values and batches with `returns` train it */
  valueHead?: boolean;
  /** seeds adapter initialisation, dropout and sampling without an explicit seed */
  seed?: number;
  /** the activations one pass may hold, in bytes (default PASS_ACTIVATION_BYTES): a larger batch runs in parts */
  passBytes?: number;
}

export interface ForwardResult {
  /** [B][L_b] logprob of each token given its prefix (entry 0 is 0) */
  logprobs: number[][];
  /** [B][L_b] value estimate of the state each token was produced from (entry 0 is 0); with a value head */
  values?: number[][];
}

export interface ForwardBackwardResult {
  loss: number;
  metrics: Record<string, number>;
}

export interface OptimStepResult {
  /** global gradient norm before clipping */
  gradNorm: number;
  /** optimizer steps taken so far, this one included */
  step: number;
}

interface TrainerState {
  mode: "full" | "lora";
  lora: LoraConfig | null;
  valueHead: boolean;
  step: number;
  rng: RngState;
}

/** The primitives every algorithm and script is written on (lib/rl/primitives.ts): adding one there fails here until it is implemented. */
export class TrainingClient implements TrainingPrimitives {
  readonly mode: "full" | "lora";
  private readonly view: ModelView;
  /** The KL penalty's reference policy: the base, or the policy where the current stage of training began. */
  private reference: ModelView;
  private readonly grads: GradientTargets;
  private readonly optimizer: AdamW;
  private rng: Rng;
  private readonly passBytes: number;
  /** About what a token costs a forward pass: 2 × parameters. */
  private readonly flopsPerToken: number;
  /** The last call made: the next runs after it (`inTurn`). */
  private calls: Promise<unknown> = Promise.resolve();

  constructor(
    readonly base: BaseModel,
    options: TrainingClientOptions = {},
  ) {
    const { config } = base;
    this.rng = new Rng(options.seed ?? 0);
    this.passBytes = options.passBytes ?? PASS_ACTIVATION_BYTES;
    this.flopsPerToken = 2 * base.parameterCount();
    this.mode = options.lora ? "lora" : "full";
    const valueHead = options.valueHead ? initValueHead(config) : null;
    let lora: LoraAdapter | null = null;
    if (options.lora) {
      lora = initLoraAdapter(base.weights, parseLoraConfig(options.lora), this.rng);
      this.view = { config, weights: base.weights, lora, valueHead };
      this.grads = { lora: cloneLoraAdapter(lora, 0) };
    } else {
      const weights = cloneGPTWeights(base.weights);
      this.view = { config, weights, lora: null, valueHead };
      this.grads = { weights: cloneGPTWeights(weights, 0) };
    }
    if (valueHead) this.grads.valueHead = initValueHead(config);
    this.reference = { config, weights: base.weights, lora: null, valueHead: null };
    const params = this.trainableParameters(this.view);
    const grads = this.trainableParameters({ ...this.view, ...this.gradsAsView() });
    this.optimizer = new AdamW(params.map((p, i) => ({ ...p, grad: grads[i].data }) satisfies TrainableParameter));
  }

  /**
   * Starts a new stage of training from the current policy, as a new run from a checkpoint of it would: the
   * policy as it is now becomes the reference of the KL penalty, and the optimizer starts afresh (its moments
   * belong to the last stage's loss). An RL run after SFT steps calls it between the two.
   */
  /**
   * The primitives, each run after every call made before it: a call made while another is out (the RL loop makes
   * a step's forward-backward passes and its optimizer step together) waits for it. Long work gives the event loop
   * a turn between its stretches (lib/model/budgets.ts), so a worker's heartbeat and stop requests go on meanwhile;
   * the queue keeps those turns from letting another call in.
   *
   * `forward`: per-token logprobs (and values) of a batch, without touching gradients.
   */
  forward(batch: Batch, options: { temperature?: number } = {}): Promise<ForwardResult> {
    return this.inTurn(() => this.forwardNow(batch, options));
  }

  /**
   * Adds the gradient of `loss` on `batch` to the accumulated gradients; optimStep applies and clears them. A batch
   * whose activations would pass `passBytes` runs in parts, each part's loss divided as the whole batch's is, so
   * that the parts' gradients add up to the whole's.
   */
  forwardBackward(batch: Batch, loss: LossName, configInput?: LossConfigInput): Promise<ForwardBackwardResult> {
    return this.inTurn(() => this.forwardBackwardNow(batch, loss, configInput));
  }

  /** One AdamW update from the gradients accumulated since the last step. */
  optimStep(params: AdamParamsInput): Promise<OptimStepResult> {
    return this.inTurn(() => this.optimStepNow(params));
  }

  /** Samples n completions for each prompt with the current weights. */
  sample(prompts: number[][], n: number, paramsInput?: SampleParamsInput): Promise<SampleResult> {
    return this.inTurn(() => this.sampleNow(prompts, n, paramsInput));
  }

  /** Weights (or adapter), optimizer moments, step and RNG state: everything to resume training exactly. */
  saveState(dir: string): Promise<void> {
    return this.inTurn(() => this.saveStateNow(dir));
  }

  /**
   * Weights only, for a sampler or an export: the adapter alone, or (merge) the adapter folded into a copy of
   * the base so the result loads with BaseModel.load. The value head is training machinery and is left out.
   */
  saveWeightsForSampler(dir: string, options: { merge?: boolean } = {}): Promise<void> {
    return this.inTurn(() => this.saveWeightsForSamplerNow(dir, options));
  }

  /**
   * Restores a training state (or sampler weights, with fresh optimizer state) saved by a client of the same
   * shape; a checkpoint of another model, mode, adapter or value-head setting is refused naming what differs.
   */
  loadState(dir: string): Promise<void> {
    return this.inTurn(() => this.loadStateNow(dir));
  }

  /** Runs `work` after every call made before it; a failure fails that call alone. */
  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const result = this.calls.then(work);
    this.calls = result.catch(() => undefined);
    return result;
  }

  beginStage(): void {
    const { config } = this.base;
    this.reference = {
      config,
      weights: this.mode === "full" ? cloneGPTWeights(this.view.weights) : this.base.weights,
      lora: this.view.lora ? cloneLoraAdapter(this.view.lora) : null,
      valueHead: null,
    };
    this.optimizer.reset();
    this.optimizer.zeroGrad();
  }

  /** Optimizer steps taken. */
  get step(): number {
    return this.optimizer.step;
  }

  get loraConfig(): LoraConfig | null {
    return this.view.lora?.config ?? null;
  }

  get hasValueHead(): boolean {
    return this.view.valueHead !== null;
  }

  /** `forward`, when its turn comes. */
  private async forwardNow(batch: Batch, options: { temperature?: number } = {}): Promise<ForwardResult> {
    const temperature = options.temperature ?? 1;
    if (!(temperature > 0)) throw new Error(`temperature must be > 0, got ${temperature}`);
    const { config } = this.base;
    packBatch(batch, config.vocabSize, config.contextLength); // validates every sequence before any work
    // A pass holds activations for every token of the batch at once, so a large batch (PPO's forward over a
    // whole step of turns) runs in slices of at most FORWARD_CHUNK_TOKENS tokens (fewer on a model whose passes
    // would pass `passBytes`), shortest sequences together; each sequence's result is the same whichever slice it is in.
    const result: ForwardResult = { logprobs: new Array<number[]>(batch.tokens.length) };
    const clock = turnClock();
    for (const rows of passesOf(batch.tokens, (length) => this.tokensAtOnce(length, this.flopsPerToken, FORWARD_CHUNK_TOKENS))) {
      if (clock.due()) await clock.turn();
      const packed = packBatch({ tokens: rows.map((i) => batch.tokens[i]!) }, config.vocabSize, config.contextLength);
      const out = this.base.engine.run({ model: this.view, tokens: packed.tokens, batch: packed.B, seqLen: packed.T });
      maskDisallowed(out.logits, batch.allowedTokens, packed, config.vocabSize, rows);
      const chunkLogprobs = tokenLogprobs(out.logits, packed, config.vocabSize, temperature);
      if (out.values) result.values ??= new Array<number[]>(batch.tokens.length);
      rows.forEach((row, b) => {
        result.logprobs[row] = chunkLogprobs[b]!;
        if (out.values) result.values![row] = Array.from({ length: packed.lengths[b]! }, (_, i) => (i === 0 ? 0 : out.values![b * packed.T + i - 1]!));
      });
    }
    return result;
  }

  /**
   * Tokens one pass may hold at sequences of `length`: within `passBytes` of activations and one stretch of work
   * (STRETCH_FLOPS, at `flopsPerToken`), at most `cap`.
   */
  private tokensAtOnce(length: number, flopsPerToken: number, cap = Number.POSITIVE_INFINITY): number {
    return Math.min(cap, Math.floor(this.passBytes / passBytesPerToken(this.base.config, length)), Math.floor(STRETCH_FLOPS / flopsPerToken));
  }

  /** `forwardBackward`, when its turn comes. */
  private async forwardBackwardNow(batch: Batch, loss: LossName, configInput?: LossConfigInput): Promise<ForwardBackwardResult> {
    const config = parseLossConfig(loss, configInput);
    requireLossInputs(loss, batch, config);
    const passes = passesOf(batch.tokens, (length) => this.tokensAtOnce(length, 3 * this.flopsPerToken));
    if (passes.length === 1) return this.backwardPass(batch, loss, config);
    // Every sequence is checked before any part runs, so that a bad one leaves no part's gradients behind. A 135M
    // model's 64 sequences of 115 tokens would hold about 15 GB in one pass (2.0 MB a token, measured at 16).
    packBatch(batch, this.base.config.vocabSize, this.base.config.contextLength);
    const denominator = config.normalize === "tokens" ? Math.max(lossWeight(batch), 1e-12) : 1;
    const clock = turnClock();
    const results: ForwardBackwardResult[] = [];
    for (const rows of passes) {
      if (clock.due()) await clock.turn();
      results.push(this.backwardPass(rowsOf(batch, rows), loss, config, denominator));
    }
    return combinePasses(results);
  }

  /** One pass of forwardBackward over `batch` (a part of the caller's, whose loss is divided by `denominator`). */
  private backwardPass(batch: Batch, loss: LossName, config: LossConfig, denominator?: number): ForwardBackwardResult {
    const { config: model } = this.base;
    const packed = packBatch(batch, model.vocabSize, model.contextLength);
    let referenceLogprobs: number[][] | null = null;
    if (config.klCoef > 0 && batch.referenceLogprobs) referenceLogprobs = batch.referenceLogprobs;
    else if (config.klCoef > 0) {
      const reference = this.base.engine.run({ model: this.reference, tokens: packed.tokens, batch: packed.B, seqLen: packed.T }).logits;
      maskDisallowed(reference, batch.allowedTokens, packed, model.vocabSize);
      referenceLogprobs = tokenLogprobs(reference, packed, model.vocabSize, config.temperature);
    }
    const accumulator = lossAccumulator(loss, config, batch, packed, model.vocabSize, referenceLogprobs, denominator);
    this.base.engine.run({
      model: this.view,
      tokens: packed.tokens,
      batch: packed.B,
      seqLen: packed.T,
      dropoutRng: this.rng,
      backward: {
        grads: this.grads,
        chunkRows: LOSS_CHUNK_ROWS,
        lossGradient: (logits, values, rowStart, rowCount) => {
          maskDisallowed(logits, batch.allowedTokens, packed, model.vocabSize, undefined, { rowStart, rowCount });
          return accumulator.rows(logits, values, rowStart, rowCount);
        },
      },
    });
    const { loss: value, metrics } = accumulator.finish();
    return { loss: value, metrics };
  }

  /** `optimStep`, when its turn comes. */
  private async optimStepNow(params: AdamParamsInput): Promise<OptimStepResult> {
    return this.optimizer.apply(params);
  }

  /** `sample`, when its turn comes. */
  private async sampleNow(prompts: number[][], n: number, paramsInput?: SampleParamsInput): Promise<SampleResult> {
    const params = parseSampleParams(paramsInput);
    const { config } = this.base;
    const rng = params.seed === undefined ? this.rng : new Rng(params.seed);
    // Keys and values of every layer, each position a row of dModel floats (the cache's heads are all written out).
    const cacheBytesPerPosition = 2 * config.nLayers * config.dModel * 4;
    const open = (rows: number, capacity: number) => this.base.engine.createDecoder(this.view, rows, capacity);
    return sampleInTurns(open, cacheBytesPerPosition, {
      // A prefill part is one stretch of work (lib/model/budgets.ts).
      prefillTokens: Math.max(1, Math.floor(STRETCH_FLOPS / this.flopsPerToken)),
      prompts,
      n,
      params,
      rng,
      V: config.vocabSize,
      contextLength: config.contextLength,
      tokenizer: this.base.tokenizer,
    });
  }

  /** `saveState`, when its turn comes. */
  private async saveStateNow(dir: string): Promise<void> {
    const state: TrainerState = {
      mode: this.mode,
      lora: this.loraConfig,
      valueHead: this.hasValueHead,
      step: this.optimizer.step,
      rng: this.rng.getState(),
    };
    writeCheckpoint(
      dir,
      { kind: "training_state", contents: this.mode, step: this.optimizer.step },
      {
        ...this.describingFiles(),
        "trainer_state.json": { kind: "json", value: state },
        "weights.safetensors": { kind: "tensors", tensors: parametersToTensorMap(this.trainableParameters(this.view)) },
        "optimizer.safetensors": { kind: "tensors", tensors: this.optimizer.stateTensors() },
      },
    );
  }

  /** `saveWeightsForSampler`, when its turn comes. */
  private async saveWeightsForSamplerNow(dir: string, options: { merge?: boolean } = {}): Promise<void> {
    const { config } = this.base;
    let contents: "full" | "lora" | "merged";
    let params: NamedParameter[];
    if (this.view.lora && !options.merge) {
      contents = "lora";
      params = listLoraParameters(this.view.lora, this.view.weights);
    } else if (this.view.lora) {
      contents = "merged";
      params = listGPTParameters(mergeLoraAdapter(this.view.weights, this.view.lora, config), config);
    } else {
      contents = "full";
      params = listGPTParameters(this.view.weights, config);
    }
    writeCheckpoint(
      dir,
      { kind: "sampler_weights", contents, step: this.optimizer.step },
      {
        ...this.describingFiles(contents === "lora"),
        "weights.safetensors": { kind: "tensors", tensors: parametersToTensorMap(params) },
      },
    );
  }

  /** `loadState`, when its turn comes. */
  private async loadStateNow(dir: string): Promise<void> {
    const ckpt = readCheckpoint(dir);
    const { manifest } = ckpt;
    const problems = describeMismatch(ckpt.json("model_config.json"), this.base.config);
    const found = manifest.contents === "merged" ? "full" : manifest.contents;
    if (found !== this.mode) {
      problems.push(
        `checkpoint holds ${found === "lora" ? "a LoRA adapter" : "full weights"}, client trains ${this.mode === "lora" ? "a LoRA adapter" : "full weights"}`,
      );
    }
    if (this.mode === "lora" && found === "lora") {
      problems.push(...describeMismatch(ckpt.json("lora_config.json"), this.loraConfig!, "client"));
    }
    if (manifest.kind === "training_state") {
      const state = ckpt.json<TrainerState>("trainer_state.json");
      if (state.valueHead !== this.hasValueHead) {
        problems.push(`checkpoint has valueHead=${state.valueHead}, client expects valueHead=${this.hasValueHead}`);
      }
    }
    if (problems.length > 0) throw new Error(`cannot load '${dir}': ${problems.join("; ")}`);

    const source = `checkpoint '${dir}'`;
    if (manifest.kind === "training_state") {
      const state = ckpt.json<TrainerState>("trainer_state.json");
      assignParameters(this.trainableParameters(this.view), ckpt.tensors("weights.safetensors"), source);
      this.optimizer.loadState(ckpt.tensors("optimizer.safetensors"), state.step, source);
      this.rng = Rng.fromState(state.rng);
    } else {
      const params = this.view.lora !== null ? listLoraParameters(this.view.lora, this.view.weights) : listGPTParameters(this.view.weights, this.base.config);
      assignParameters(params, ckpt.tensors("weights.safetensors"), source);
      this.optimizer.reset();
    }
    this.optimizer.zeroGrad();
  }

  // ---- plumbing ----

  /** The files that say what a checkpoint is a checkpoint of. */
  private describingFiles(withLora = this.mode === "lora"): Record<string, CheckpointFile> {
    const files: Record<string, CheckpointFile> = {
      "model_config.json": { kind: "json", value: this.base.config },
      "tokenizer.json": { kind: "json", value: tokenizerSpec(this.base.tokenizer) },
    };
    if (withLora) files["lora_config.json"] = { kind: "json", value: this.loraConfig };
    return files;
  }

  /** The tensors this client trains, in a fixed order (the gradient view lists its buffers in the same order). */
  private trainableParameters(view: ModelView): NamedParameter[] {
    const params = view.lora ? listLoraParameters(view.lora, this.base.weights) : listGPTParameters(view.weights, this.base.config);
    return view.valueHead ? [...params, ...listValueHeadParameters(view.valueHead)] : params;
  }

  private gradsAsView(): Partial<ModelView> {
    const out: Partial<ModelView> = { valueHead: this.grads.valueHead ?? null };
    if (this.grads.lora) out.lora = this.grads.lora;
    if (this.grads.weights) out.weights = this.grads.weights;
    return out;
  }
}
