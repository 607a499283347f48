import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { renderChat } from "@/lib/model/chat";
import { listGPTParameters } from "@/lib/model/weights";
import { parseGPTConfig } from "@/lib/model/config";
import { jsEngine } from "@/lib/model/gpt";
import { Rng } from "@/lib/model/rng";
import { BaseModel } from "@/server/runtime/base-model";
import { parseSampleParams, sampleInTurns } from "@/server/runtime/sampler";
import { passBytesPerToken, TrainingClient } from "@/server/runtime/training-client";

const tiny = { vocabSize: 32, contextLength: 16, dModel: 16, nLayers: 2, nHeads: 2 };
const batch = {
  tokens: [
    [1, 5, 9, 13, 17, 21, 25, 29],
    [2, 4, 6, 8, 10, 12],
  ],
};
const dir = mkdtempSync(join(tmpdir(), "tinkerlab-client-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A randomly initialised base cannot be moved far by an adapter (its frozen LM head is tiny and the final
 * LayerNorm bounds the logits), so LoRA tests start from a base that had some full-parameter training first.
 */
async function pretrainedBase(seed: number): Promise<BaseModel> {
  const client = new TrainingClient(BaseModel.create(tiny, { seed }));
  const data = {
    tokens: [
      [3, 1, 4, 1, 5, 9, 2, 6, 5, 3],
      [2, 7, 1, 8, 2, 8, 1, 8, 2, 8],
    ],
  };
  for (let i = 0; i < 30; i++) {
    await client.forwardBackward(data, "cross_entropy");
    await client.optimStep({ lr: 3e-2 });
  }
  const path = join(dir, `pretrained-${seed}`);
  await client.saveWeightsForSampler(path);
  return BaseModel.load(path);
}

const snapshot = (base: BaseModel) => listGPTParameters(base.weights, base.config).map((p) => p.data.slice());

describe("full-parameter SFT", () => {
  it("drives the loss on a small fixed chat dataset near zero", async () => {
    const base = BaseModel.create({ vocabSize: 262, contextLength: 40, dModel: 32, nLayers: 2, nHeads: 2 }, { seed: 1 });
    const chats = [
      ["hi", "hello!"],
      ["2+2", "four"],
      ["color?", "blue"],
      ["bye", "see you"],
    ].map(([q, a]) =>
      renderChat(base.tokenizer, [
        { role: "user", content: q },
        { role: "assistant", content: a },
      ]),
    );
    const data = { tokens: chats.map((c) => c.tokens), weights: chats.map((c) => c.lossMask) };
    const client = new TrainingClient(base);
    const first = await client.forwardBackward(data, "cross_entropy");
    await client.optimStep({ lr: 1e-2 });
    let last = first;
    for (let step = 0; step < 120 && last.loss > 0.02; step++) {
      last = await client.forwardBackward(data, "cross_entropy");
      await client.optimStep({ lr: 1e-2, gradClip: 1 });
    }
    expect(first.loss).toBeGreaterThan(3); // about ln(262) at the start
    expect(last.loss).toBeLessThan(0.05);
    // Greedy sampling now reproduces the trained answer.
    const prompt = renderChat(base.tokenizer, [{ role: "user", content: "2+2" }], { addGenerationPrompt: true });
    const out = await client.sample([prompt.tokens], 1, { temperature: 0, maxTokens: 10 });
    expect(out.samples[0][0].text).toBe("four");
    expect(out.samples[0][0].finishReason).toBe("stop");
  });
});

describe("sampling", () => {
  it("reports the same per-token logprobs that forward computes (1e-4), with truncation and a trained adapter", async () => {
    const base = BaseModel.create(tiny, { seed: 2 });
    const client = new TrainingClient(base, { lora: { rank: 4, alpha: 8 }, seed: 3 });
    for (let i = 0; i < 3; i++) {
      await client.forwardBackward(batch, "cross_entropy");
      await client.optimStep({ lr: 5e-2 });
    }
    const prompts = [[1, 2, 3], [7], [4, 5, 6, 7, 8]];
    for (const params of [{ temperature: 1 }, { temperature: 0.7, topK: 5, topP: 0.9 }]) {
      const out = await client.sample(prompts, 3, { maxTokens: 8, stop: [], seed: 5, ...params });
      const seqs = out.samples.flatMap((group, p) => group.map((s) => ({ prompt: prompts[p], s })));
      expect(seqs.length).toBe(9);
      const fwd = await client.forward({ tokens: seqs.map(({ prompt, s }) => [...prompt, ...s.tokens]) }, { temperature: params.temperature });
      seqs.forEach(({ prompt, s }, i) => {
        expect(s.tokens.length).toBe(Math.min(8, tiny.contextLength - prompt.length));
        const fromForward = fwd.logprobs[i].slice(prompt.length);
        s.logprobs.forEach((lp, t) => expect(Math.abs(lp - fromForward[t])).toBeLessThan(1e-4));
      });
    }
  });

  it("gives the same samples for the same seed and different ones for another seed", async () => {
    const client = new TrainingClient(BaseModel.create(tiny, { seed: 4 }));
    const a = await client.sample([[1, 2], [3]], 4, { maxTokens: 10, seed: 42 });
    const b = await client.sample([[1, 2], [3]], 4, { maxTokens: 10, seed: 42 });
    const c = await client.sample([[1, 2], [3]], 4, { maxTokens: 10, seed: 43 });
    expect(b).toEqual(a);
    expect(c.samples.flat().map((s) => s.tokens)).not.toEqual(a.samples.flat().map((s) => s.tokens));
    // The n samples of one prompt differ from each other (each row draws its own tokens).
    expect(new Set(a.samples[0].map((s) => s.tokens.join(","))).size).toBeGreaterThan(1);
  });

  it("decodes a sample too large for one decoder's cache in turns, whole groups while they fit, with the same greedy replies", async () => {
    const base = BaseModel.create({ ...tiny, vocabSize: 262, contextLength: 64 }, { seed: 6 });
    const view = { config: base.config, weights: base.weights, lora: null, valueHead: null };
    const prompts = [
      [257, 1, 2],
      [257, 3],
      [257, 4, 5, 6],
      [257, 7],
    ];
    const params = parseSampleParams({ maxTokens: 12, temperature: 0, stop: [] });
    // A position costs 2 (keys, values) × 2 layers × 16 floats × 4 bytes; a row holds 4 + 12 positions.
    const perPosition = 2 * 2 * 16 * 4;
    const row = perPosition * 16;
    const sampleWith = async (budget: number, prefillTokens?: number) => {
      const opened: [number, number][] = [];
      const open = (rows: number, capacity: number) => {
        opened.push([rows, capacity]);
        return jsEngine.createDecoder(view, rows, capacity);
      };
      const request = { prompts, n: 4, params, rng: new Rng(1), V: 262, contextLength: 64, tokenizer: base.tokenizer, prefillTokens };
      const out = await sampleInTurns(open, perPosition, request, budget);
      return { opened, out };
    };
    const whole = await sampleWith(16 * row);
    expect(whole.opened).toEqual([[16, 16]]); // one decoder, of only the positions the rows need
    const pairs = await sampleWith(8 * row);
    expect(pairs.opened).toEqual([
      [8, 16],
      [8, 16],
    ]);
    const parts = await sampleWith(3 * row);
    // A prefill in parts of at most 4 prompt tokens (one prompt at a time) gives the same replies too.
    const prefilledInParts = await sampleWith(16 * row, 4);
    expect(parts.opened).toEqual(
      Array.from({ length: 4 }, () => [
        [3, 16],
        [1, 16],
      ]).flat(),
    );
    for (const turns of [pairs, parts, prefilledInParts]) {
      expect(turns.out.samples.map((group) => group.map((s) => s.tokens))).toEqual(whole.out.samples.map((group) => group.map((s) => s.tokens)));
      turns.out.samples.flat().forEach((s, i) => s.logprobs.forEach((lp, t) => expect(lp).toBeCloseTo(whole.out.samples.flat()[i]!.logprobs[t]!, 5)));
    }
    // A decoder holds no more than its capacity.
    expect(() => jsEngine.createDecoder(view, 1, 5).extend([0], [[257, 1, 2, 3, 4, 5]])).toThrow(/holds? 6 tokens, over this decoder's capacity of 5/);
  });

  it("stops at a stop token (kept) or a stop string (cut from the text), else at maxTokens", async () => {
    const client = new TrainingClient(BaseModel.create({ ...tiny, vocabSize: 262, contextLength: 64 }, { seed: 5 }));
    const free = await client.sample([[257]], 1, { maxTokens: 30, seed: 1, stop: [] });
    const tokens = free.samples[0][0].tokens;
    const stopToken = tokens[5];
    const stopped = await client.sample([[257]], 1, { maxTokens: 30, seed: 1, stop: [stopToken] });
    const cut = stopped.samples[0][0];
    expect(cut.finishReason).toBe("stop");
    expect(cut.tokens).toEqual(tokens.slice(0, tokens.indexOf(stopToken) + 1));
    expect(free.samples[0][0].finishReason).toBe("length");
    expect(tokens.length).toBe(30);
    const ascii = tokens.find((t, i) => i > 0 && t >= 32 && t < 127)!;
    const stopString = String.fromCharCode(ascii);
    const byString = (await client.sample([[257]], 1, { maxTokens: 30, seed: 1, stop: [stopString] })).samples[0][0];
    expect(byString.finishReason).toBe("stop");
    expect(byString.tokens).toEqual(tokens.slice(0, tokens.indexOf(ascii) + 1));
    expect(byString.text).toBe(client.base.tokenizer.decode(tokens.slice(0, tokens.indexOf(ascii)), { skipSpecial: true }));
  });
});

describe("a batch too large for one pass", () => {
  it("runs in parts whose gradients add up to the whole batch's: the same loss, metrics and next weights", async () => {
    let passes = 0;
    const counting = { ...jsEngine, run: (request: Parameters<typeof jsEngine.run>[0]) => (passes++, jsEngine.run(request)) };
    const config = { ...tiny, vocabSize: 262, contextLength: 24 };
    const tokens = Array.from({ length: 9 }, (_, b) => Array.from({ length: 6 + b * 2 }, (_, i) => 40 + ((b * 7 + i * 3) % 50)));
    const rl = {
      tokens,
      weights: tokens.map((row) => row.map((_, i) => (i >= 3 ? 1 : 0))),
      samplingLogprobs: tokens.map((row) => row.map((_, i) => (i >= 3 ? -4 - (i % 3) * 0.1 : 0))),
      advantages: tokens.map((row, b) => row.map(() => (b % 3) - 1)),
    };
    const lossConfig = { clipLow: 0.2, clipHigh: 0.2, klCoef: 0.1, entropyCoef: 0.01 };
    const run = async (passBytes?: number) => {
      const client = new TrainingClient(BaseModel.create(config, { seed: 8, engine: counting }), { seed: 2, passBytes });
      passes = 0;
      const result = await client.forwardBackward(rl, "ppo", lossConfig);
      const counted = passes;
      await client.optimStep({ lr: 1e-2 });
      return { result, passes: counted, after: await client.forward({ tokens: [[40, 41, 42, 43]] }) };
    };
    const whole = await run();
    // Room for about 40 tokens a pass: the nine sequences (6 to 22 tokens) go in parts.
    const parts = await run(40 * passBytesPerToken(parseGPTConfig(config), 22));
    expect(whole.passes).toBe(2); // the policy's, and the reference's for the KL penalty
    expect(parts.passes).toBeGreaterThan(6);
    expect(parts.result.loss).toBeCloseTo(whole.result.loss, 6);
    for (const [name, value] of Object.entries(whole.result.metrics)) expect(parts.result.metrics[name], name).toBeCloseTo(value, 5);
    parts.after.logprobs[0]!.forEach((logprob, i) => expect(logprob).toBeCloseTo(whole.after.logprobs[0]![i]!, 5));
  });
});

describe("long work", () => {
  it("gives the event loop a turn once a second has passed, and calls made together still run in the order made", async () => {
    const events: ("pass" | "turn")[] = [];
    const logging = { ...jsEngine, run: (request: Parameters<typeof jsEngine.run>[0]) => (events.push("pass"), jsEngine.run(request)) };
    const config = { vocabSize: 128, contextLength: 16, dModel: 16, nLayers: 2, nHeads: 2 };
    const tokens = Array.from({ length: 24 }, (_, b) => Array.from({ length: 16 }, (_, i) => 40 + ((b * 5 + i * 3) % 60)));
    const run = async (together: boolean) => {
      // Two sequences a pass: the batch takes twelve.
      const passBytes = 2 * 16 * passBytesPerToken(parseGPTConfig(config), 16);
      const client = new TrainingClient(BaseModel.create(config, { seed: 3, engine: logging }), { seed: 1, passBytes });
      if (!together) {
        await client.forwardBackward({ tokens }, "cross_entropy");
        const step = await client.optimStep({ lr: 1e-2 });
        return { step, after: await client.forward({ tokens: tokens.slice(0, 2) }) };
      }
      // Made without awaiting: the passes yield between them, and the step must still wait for all of them.
      const [, step, after] = await Promise.all([
        client.forwardBackward({ tokens }, "cross_entropy"),
        client.optimStep({ lr: 1e-2 }),
        client.forward({ tokens: tokens.slice(0, 2) }),
      ]);
      return { step, after };
    };
    // A simulated clock on which each reading is 0.4 s after the one before: every pass looks long, on any machine.
    let simulatedMs = 0;
    const clock = vi.spyOn(performance, "now").mockImplementation(() => (simulatedMs += 400));
    // An immediate re-queued at every turn of the event loop: work that never gave one would log no turn.
    let looping = true;
    const turn = () => {
      if (!looping) return;
      events.push("turn");
      setImmediate(turn);
    };
    setImmediate(turn);
    let together: Awaited<ReturnType<typeof run>>;
    try {
      together = await run(true);
    } finally {
      looping = false;
      clock.mockRestore();
    }
    const passes = events.filter((event) => event === "pass").length;
    const turns = events.slice(events.indexOf("pass"), events.lastIndexOf("pass")).filter((event) => event === "turn").length;
    expect(passes).toBeGreaterThanOrEqual(12);
    // About one turn every 2.5 passes (1 s of this clock), not one after every pass.
    expect(turns, events.join(" ")).toBeGreaterThanOrEqual(3);
    expect(turns, events.join(" ")).toBeLessThan(passes / 2);
    expect(together).toEqual(await run(false));
  });
});

describe("LoRA clients on one shared base", () => {
  it("leave the base weights bit for bit unchanged while the adapter learns", async () => {
    const base = await pretrainedBase(6);
    const before = snapshot(base);
    const client = new TrainingClient(base, { lora: { rank: 4, alpha: 8, dropout: 0.1 }, seed: 1 });
    const start = await client.forwardBackward(batch, "cross_entropy");
    for (let i = 0; i < 20; i++) {
      await client.forwardBackward(batch, "cross_entropy");
      await client.optimStep({ lr: 3e-2, weightDecay: 0.1 });
    }
    const end = await client.forwardBackward(batch, "cross_entropy");
    expect(end.loss).toBeLessThan(start.loss - 1);
    snapshot(base).forEach((data, k) => expect(Buffer.from(data.buffer).equals(Buffer.from(before[k].buffer))).toBe(true));
  });

  it("train independently: one adapter's updates change nothing the other computes", async () => {
    const shared = BaseModel.create(tiny, { seed: 7 });
    const a = new TrainingClient(shared, { lora: { rank: 2, alpha: 4 }, seed: 1 });
    const b = new TrainingClient(shared, { lora: { rank: 4, alpha: 4, targets: ["mlp_fc"] }, seed: 2 });
    const alone = new TrainingClient(BaseModel.create(tiny, { seed: 7 }), { lora: { rank: 4, alpha: 4, targets: ["mlp_fc"] }, seed: 2 });
    const other = { tokens: [[3, 1, 4, 1, 5, 9, 2, 6]] };
    for (let i = 0; i < 5; i++) {
      // Interleaved: a steps between b's forwardBackward and b's optimStep.
      const rb = await b.forwardBackward(other, "cross_entropy");
      await a.forwardBackward(batch, "cross_entropy");
      await a.optimStep({ lr: 5e-2 });
      await b.optimStep({ lr: 5e-2 });
      const ralone = await alone.forwardBackward(other, "cross_entropy");
      await alone.optimStep({ lr: 5e-2 });
      expect(rb.loss).toBe(ralone.loss);
    }
    expect((await b.forward(other)).logprobs).toEqual((await alone.forward(other)).logprobs);
    expect((await a.forward(other)).logprobs).not.toEqual((await b.forward(other)).logprobs);
    expect((await b.sample([[1]], 2, { seed: 9, maxTokens: 6 })).samples).toEqual((await alone.sample([[1]], 2, { seed: 9, maxTokens: 6 })).samples);
  });
});

describe("KL penalty and value head", () => {
  it("KL against the base is zero before training and grows as the policy moves away", async () => {
    const base = BaseModel.create(tiny, { seed: 8 });
    const client = new TrainingClient(base, { seed: 3 });
    const before = await client.forwardBackward(batch, "cross_entropy", { klCoef: 0.1 });
    expect(before.metrics.kl).toBeCloseTo(0, 10);
    await client.optimStep({ lr: 5e-2 });
    const after = await client.forwardBackward(batch, "cross_entropy", { klCoef: 0.1 });
    expect(after.metrics.kl).toBeGreaterThan(1e-4);
  });

  it("a value head trained with returns predicts them", async () => {
    const client = new TrainingClient(BaseModel.create(tiny, { seed: 9 }), { lora: { rank: 2 }, valueHead: true });
    const returns = batch.tokens.map((r, b) => r.map(() => (b === 0 ? 1 : -1)));
    const data = { ...batch, returns, samplingLogprobs: batch.tokens.map((r) => r.map(() => -3)), advantages: batch.tokens.map((r) => r.map(() => 0)) };
    const first = await client.forwardBackward(data, "ppo", { valueCoef: 1 });
    for (let i = 0; i < 50; i++) {
      await client.forwardBackward(data, "ppo", { valueCoef: 1 });
      await client.optimStep({ lr: 3e-2 });
    }
    const last = await client.forwardBackward(data, "ppo", { valueCoef: 1 });
    expect(first.metrics["loss/value"]).toBeGreaterThan(0.4);
    expect(last.metrics["loss/value"]).toBeLessThan(0.05);
    const { values } = await client.forward(batch);
    expect(values![0][3]).toBeGreaterThan(0.5);
    expect(values![1][3]).toBeLessThan(-0.5);
  });
});

describe("forward", () => {
  it("gives each sequence of a batch too large for one pass the result it gets alone, in the batch's order", async () => {
    const client = new TrainingClient(BaseModel.create(tiny, { seed: 4 }), { valueHead: true });
    // 1,200 sequences of 2..16 tokens: over FORWARD_CHUNK_TOKENS padded, so forward runs them in slices.
    const rows = Array.from({ length: 1200 }, (_, b) => Array.from({ length: 2 + ((b * 7) % 15) }, (_, i) => (b * 3 + i * 5) % 32));
    const all = await client.forward({ tokens: rows });
    expect(all.logprobs).toHaveLength(rows.length);
    for (const b of [0, 1, 17, 599, 1199]) {
      const alone = await client.forward({ tokens: [rows[b]!] });
      expect(all.logprobs[b]).toHaveLength(rows[b]!.length);
      all.logprobs[b]!.forEach((lp, i) => expect(lp).toBeCloseTo(alone.logprobs[0]![i]!, 5));
      all.values![b]!.forEach((v, i) => expect(v).toBeCloseTo(alone.values![0]![i]!, 5));
    }
    await expect(client.forward({ tokens: [...rows, Array(17).fill(1)] })).rejects.toThrow(
      /batch.tokens\[1200\] has 17 tokens, over the model's contextLength=16/,
    );
  });
});

describe("saveState / loadState", () => {
  for (const mode of ["full", "lora"] as const) {
    it(`${mode}: a restored client gives identical logprobs, the identical next step and the same samples`, async () => {
      const base = BaseModel.create(tiny, { seed: 10 });
      const options = mode === "lora" ? { lora: { rank: 4, alpha: 8, dropout: 0.2 }, valueHead: true, seed: 4 } : { valueHead: true, seed: 4 };
      const original = new TrainingClient(base, options);
      const adam = { lr: 3e-2, weightDecay: 0.01, gradClip: 1 };
      for (let i = 0; i < 3; i++) {
        await original.forwardBackward(batch, "cross_entropy");
        await original.optimStep(adam);
      }
      const path = join(dir, `${mode}-state`);
      await original.saveState(path);
      const restored = new TrainingClient(base, { ...options, seed: 99 });
      await restored.loadState(path);
      expect(restored.step).toBe(3);
      expect(await restored.forward(batch)).toEqual(await original.forward(batch));
      // The next step uses the restored optimizer moments and dropout draws: results agree exactly.
      const [fa, fb] = [await original.forwardBackward(batch, "cross_entropy"), await restored.forwardBackward(batch, "cross_entropy")];
      expect(fb).toEqual(fa);
      const [sa, sb] = [await original.optimStep(adam), await restored.optimStep(adam)];
      expect(sb).toEqual(sa);
      expect(await restored.forward(batch)).toEqual(await original.forward(batch));
      expect(await restored.sample([[1, 2]], 2, { maxTokens: 5 })).toEqual(await original.sample([[1, 2]], 2, { maxTokens: 5 }));
    });
  }

  it("merged sampler weights load as a base model that computes what the adapter did", async () => {
    const base = BaseModel.create(tiny, { seed: 11 });
    const client = new TrainingClient(base, { lora: { rank: 2, alpha: 4 } });
    for (let i = 0; i < 3; i++) {
      await client.forwardBackward(batch, "cross_entropy");
      await client.optimStep({ lr: 5e-2 });
    }
    await client.saveWeightsForSampler(join(dir, "merged"), { merge: true });
    await client.saveWeightsForSampler(join(dir, "adapter"));
    const exported = new TrainingClient(BaseModel.load(join(dir, "merged"), { expect: base.config }));
    const want = (await client.forward(batch)).logprobs.flat();
    (await exported.forward(batch)).logprobs.flat().forEach((lp, i) => expect(Math.abs(lp - want[i])).toBeLessThan(1e-5));
    const reloaded = new TrainingClient(base, { lora: { rank: 2, alpha: 4 }, seed: 5 });
    await reloaded.loadState(join(dir, "adapter"));
    expect((await reloaded.forward(batch)).logprobs).toEqual((await client.forward(batch)).logprobs);
    expect(() => BaseModel.load(join(dir, "adapter"))).toThrow(/holds a LoRA adapter, not full weights/);
  });
});
