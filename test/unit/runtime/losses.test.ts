import { describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";
import { type Batch, packBatch, tokenLogprobs } from "@/server/runtime/batch";
import { type LossName, computeLoss, parseLossConfig, requireLossInputs } from "@/server/runtime/losses";

const V = 7;
const rng = new Rng(11);
const batch: Batch = {
  tokens: [
    [1, 4, 2, 6, 0],
    [3, 3, 5],
  ],
};
const packed = packBatch(batch, V, 8);
const logits = Float32Array.from({ length: packed.B * packed.T * V }, () => rng.normal());
const values = Float32Array.from({ length: packed.B * packed.T }, () => rng.normal());
const perToken = (f: () => number) => batch.tokens.map((r) => r.map(f));
const current = tokenLogprobs(logits, packed, V, 0.8);
// Sampling logprobs near the current ones, so some ratios fall inside the clip range and some outside.
const rlBatch: Batch = {
  ...batch,
  weights: [
    [0, 1, 1, 0.5, 1],
    [0, 1, 1],
  ],
  samplingLogprobs: current.map((r) => r.map((lp) => lp + rng.normal() * 0.6)),
  advantages: perToken(() => rng.normal()),
  returns: perToken(() => rng.normal()),
  referenceLogprobs: current.map((r) => r.map((lp) => lp + rng.normal() * 0.5)),
};

function check(loss: LossName, configInput: Parameters<typeof parseLossConfig>[1]) {
  const config = parseLossConfig(loss, configInput);
  const run = (l: Float32Array, v: Float32Array) => computeLoss(loss, config, rlBatch, packed, l, v, V, rlBatch.referenceLogprobs!);
  const out = run(logits, values);
  const eps = 1e-3;
  let nonzero = 0;
  const probe = (arr: Float32Array, grad: Float32Array, i: number, what: string) => {
    const original = arr[i];
    arr[i] = original + eps;
    const up = run(logits, values).loss;
    arr[i] = original - eps;
    const down = run(logits, values).loss;
    arr[i] = original;
    const numeric = (up - down) / (2 * eps);
    if (grad[i] !== 0) nonzero++;
    expect(Math.abs(numeric - grad[i]), `${loss} ${what}[${i}]: analytic ${grad[i]}, numeric ${numeric}`).toBeLessThan(2e-3 * Math.abs(numeric) + 2e-4);
  };
  for (let i = 0; i < logits.length; i++) probe(logits, out.dLogits, i, "logits");
  for (let i = 0; i < values.length; i++) probe(values, out.dValues!, i, "values");
  expect(nonzero).toBeGreaterThan(20);
  return out;
}

describe("losses: gradient on logits and values matches finite differences", () => {
  it("cross_entropy with KL penalty and value loss", () => {
    const out = check("cross_entropy", { temperature: 0.8, klCoef: 0.3, valueCoef: 0.5 });
    expect(out.metrics.kl).toBeGreaterThan(0);
    expect(out.metrics["loss/value"]).toBeGreaterThan(0);
  });
  it("importance_sampling", () => {
    check("importance_sampling", { temperature: 0.8, klCoef: 0.1, valueCoef: 0 });
  });
  it("an entropy bonus on top of ppo: its gradient too, and the loss falls by η·H", () => {
    const plain = check("ppo", { temperature: 0.8, klCoef: 0.1 });
    const bonus = check("ppo", { temperature: 0.8, klCoef: 0.1, entropyCoef: 0.3 });
    // Normalised by the weighted tokens, as every term is: the loss falls by η times the mean entropy.
    expect(bonus.metrics["loss/entropy"]).toBeCloseTo(-0.3 * bonus.metrics.entropy!, 6);
    expect(bonus.loss).toBeCloseTo(plain.loss - 0.3 * bonus.metrics.entropy!, 6);
  });
  it("ppo, reporting the fraction of clipped tokens", () => {
    const out = check("ppo", { temperature: 0.8, clipLow: 0.1, clipHigh: 0.1, klCoef: 0.1 });
    expect(out.metrics.clip_frac).toBeGreaterThan(0);
    expect(out.metrics.clip_frac).toBeLessThan(1);
  });
  it("cispo: the clipped ratio is a constant weight, so unclipped it has importance sampling's gradient", () => {
    // CISPO's surrogate stops the gradient through its weight, so finite differences of its value do not apply.
    const run = (loss: LossName, clip: number) =>
      computeLoss(loss, parseLossConfig(loss, { temperature: 0.8, clipLow: clip, clipHigh: clip }), rlBatch, packed, logits, null, V, null);
    const wide = run("cispo", 1e9);
    const is = run("importance_sampling", 0);
    for (let i = 0; i < logits.length; i++) expect(wide.dLogits[i]).toBeCloseTo(is.dLogits[i], 6);
    const tight = run("cispo", 0.1);
    expect(tight.metrics.clip_frac).toBeGreaterThan(0);
    expect(Array.from(tight.dLogits)).not.toEqual(Array.from(wide.dLogits));
  });
});

describe("losses: values and errors a user sees", () => {
  it("cross_entropy's loss is the weighted mean negative logprob of the targets", () => {
    const config = parseLossConfig("cross_entropy", {});
    const lp = tokenLogprobs(logits, packed, V, 1);
    const out = computeLoss("cross_entropy", config, batch, packed, logits, null, V, null);
    const expected = -(lp[0].slice(1).reduce((a, b) => a + b) + lp[1].slice(1).reduce((a, b) => a + b)) / 6;
    expect(out.loss).toBeCloseTo(expected, 6);
  });
  it("ppo at ratio 1 has loss -mean(advantage) and nothing clipped", () => {
    const lp = tokenLogprobs(logits, packed, V, 1);
    const adv = perToken(() => rng.normal());
    const out = computeLoss("ppo", parseLossConfig("ppo", {}), { ...batch, samplingLogprobs: lp, advantages: adv }, packed, logits, null, V, null);
    const mean = [...adv[0].slice(1), ...adv[1].slice(1)].reduce((a, b) => a + b) / 6;
    expect(out.loss).toBeCloseTo(-mean, 5);
    expect(out.metrics.clip_frac).toBe(0);
    expect(out.metrics["ratio/mean"]).toBeCloseTo(1, 5);
  });
  it("names a missing input and an unknown loss", () => {
    expect(() => parseLossConfig("dpo", {})).toThrow(/unknown loss 'dpo'; expected one of cross_entropy/);
    expect(() => requireLossInputs("ppo", batch, parseLossConfig("ppo", {}))).toThrow(/loss 'ppo' needs batch.samplingLogprobs/);
  });
});
