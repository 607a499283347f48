/** AdamW over the trainable Float32Arrays of one client, with global-norm gradient clipping. */
import { z } from "zod";
import { nativeOps } from "@/lib/model/native-ops";
import type { NamedParameter } from "@/lib/model/weights";
import type { TensorMap } from "@/lib/model/safetensors";

export const adamParamsSchema = z.object({
  lr: z.number().min(0).describe("learning rate"),
  betas: z
    .tuple([z.number().min(0).max(1), z.number().min(0).max(1)])
    .default([0.9, 0.999])
    .describe("decay rates of the first and second moment estimates"),
  eps: z.number().positive().default(1e-8).describe("added to the root of the second moment"),
  weightDecay: z.number().min(0).default(0).describe("decoupled weight decay (AdamW) on matrices and embeddings; biases and LayerNorm are not decayed"),
  gradClip: z.number().min(0).default(0).describe("rescale gradients whose global L2 norm exceeds this (0 = no clipping)"),
});
export type AdamParams = z.infer<typeof adamParamsSchema>;
export type AdamParamsInput = z.input<typeof adamParamsSchema>;

/** A trainable tensor and the buffer its gradient accumulates in. */
export interface TrainableParameter extends NamedParameter {
  grad: Float32Array;
}

// The loops live in small top-level functions with everything they use in locals: V8 compiles them to much
// tighter code than the same loops inside a closure over the optimizer (measured 2.5x faster).
function sumOfSquares(g: Float32Array): number {
  const native = nativeOps();
  if (native) return native.sumOfSquares(g);
  let sq = 0;
  for (let i = 0; i < g.length; i++) sq += g[i] * g[i];
  return sq;
}

/** m, v and w updated in place: w = w·decay - stepSize·m / (sqrt(v·invBc2) + eps); g is zeroed. */
function adamUpdate(
  w: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  clip: number,
  b1: number,
  b2: number,
  stepSize: number,
  invBc2: number,
  eps: number,
  decay: number,
): void {
  const native = nativeOps();
  if (native) return native.adamw(w, g, m, v, clip, b1, b2, stepSize, invBc2, eps, decay);
  const c1 = 1 - b1,
    c2 = 1 - b2;
  for (let i = 0; i < w.length; i++) {
    const gi = g[i] * clip;
    const mi = b1 * m[i] + c1 * gi;
    const vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * decay - (stepSize * mi) / (Math.sqrt(vi * invBc2) + eps);
  }
  g.fill(0);
}

export class AdamW {
  step = 0;
  private m: Float32Array[];
  private v: Float32Array[];

  constructor(readonly params: TrainableParameter[]) {
    this.m = params.map((p) => new Float32Array(p.data.length));
    this.v = params.map((p) => new Float32Array(p.data.length));
  }

  /** Global L2 norm of the accumulated gradients. */
  gradNorm(): number {
    let sq = 0;
    for (const p of this.params) sq += sumOfSquares(p.grad);
    return Math.sqrt(sq);
  }

  /** One update from the accumulated gradients, which are then zeroed; returns the norm before clipping. */
  apply(input: AdamParamsInput): { gradNorm: number; step: number } {
    const parsed = adamParamsSchema.safeParse(input);
    if (!parsed.success) throw new Error(`invalid optimizer settings: ${z.prettifyError(parsed.error)}`);
    const {
      lr,
      betas: [b1, b2],
      eps,
      weightDecay,
      gradClip,
    } = parsed.data;
    const norm = this.gradNorm();
    if (!Number.isFinite(norm)) throw new Error(`gradient norm is ${norm}; refusing to apply a non-finite update`);
    const clip = gradClip > 0 && norm > gradClip ? gradClip / norm : 1;
    this.step += 1;
    const bc1 = 1 - b1 ** this.step;
    const bc2 = 1 - b2 ** this.step;
    this.params.forEach((p, k) => {
      adamUpdate(p.data, p.grad, this.m[k], this.v[k], clip, b1, b2, lr / bc1, 1 / bc2, eps, p.decay ? 1 - lr * weightDecay : 1);
    });
    return { gradNorm: norm, step: this.step };
  }

  zeroGrad(): void {
    for (const p of this.params) p.grad.fill(0);
  }

  /** The moment estimates as tensors named `m.<param>` and `v.<param>`. */
  stateTensors(): TensorMap {
    const out: TensorMap = new Map();
    this.params.forEach((p, k) => {
      out.set(`m.${p.name}`, { shape: p.shape, data: this.m[k] });
      out.set(`v.${p.name}`, { shape: p.shape, data: this.v[k] });
    });
    return out;
  }

  loadState(tensors: TensorMap, step: number, source: string): void {
    this.params.forEach((p, k) => {
      for (const [prefix, buf] of [
        ["m.", this.m[k]],
        ["v.", this.v[k]],
      ] as const) {
        const t = tensors.get(prefix + p.name);
        if (!t || t.data.length !== buf.length) {
          throw new Error(`${source} has no optimizer tensor '${prefix}${p.name}' of shape [${p.shape}]`);
        }
        buf.set(t.data);
      }
    });
    this.step = step;
  }

  reset(): void {
    this.m.forEach((a) => a.fill(0));
    this.v.forEach((a) => a.fill(0));
    this.step = 0;
  }
}
