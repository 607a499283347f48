/**
 * Sampling under legal actions: a policy held to a list or a pattern never writes anything else, and the logprob
 * it reports for each token is the constrained distribution's, which `forward` and `forwardBackward` recompute
 * from the same allowed sets (the importance ratio of a fresh sample is 1).
 */
import { describe, expect, it } from "vitest";
import { renderChat } from "@/lib/model/chat";
import { ByteTokenizer, specialTokens } from "@/lib/model/tokenizer";
import { ActionAutomaton, type ActionConstraint } from "@/lib/sdk/action-space";
import { BaseModel } from "@/server/runtime/base-model";
import { TrainingClient } from "@/server/runtime/training-client";

const tokenizer = new ByteTokenizer();
const prompt = (text: string) => renderChat(tokenizer, [{ role: "user", content: text }], { addGenerationPrompt: true }).tokens;

describe("constrained sampling", () => {
  const client = new TrainingClient(BaseModel.create({ vocabSize: 262, contextLength: 64, dModel: 32, nLayers: 2, nHeads: 2 }, { seed: 3 }), { seed: 3 });
  const constraints: ActionConstraint[] = [{ actions: ["1", "2", "3", "12"] }, { pattern: "(left|right) \\d" }, { actions: ["yes", "no"] }];

  it("never yields an illegal action, at any temperature", async () => {
    for (const temperature of [0, 0.7, 1.5]) {
      const { samples } = await client.sample([prompt("a"), prompt("b"), prompt("c")], 16, { maxTokens: 12, temperature, constraints, seed: 7 });
      samples.forEach((row, p) => {
        const automaton = new ActionAutomaton(constraints[p]!);
        for (const sample of row) {
          expect(automaton.matches(sample.text), `${JSON.stringify(sample.text)} under ${JSON.stringify(constraints[p])}`).toBe(true);
          expect(sample.tokens.at(-1)).toBe(specialTokens.endOfTurn);
          expect(sample.allowedTokens).toHaveLength(sample.tokens.length);
        }
      });
    }
  });

  it("reports logprobs that forward and forwardBackward recompute to 1e-4 from the allowed sets", async () => {
    const prompts = [prompt("a"), prompt("b"), prompt("c")];
    const { samples } = await client.sample(prompts, 4, { maxTokens: 12, temperature: 1, constraints, seed: 11 });
    const flat = samples.flatMap((row, p) => row.map((sample) => ({ prompt: prompts[p]!, sample })));
    const batch = {
      tokens: flat.map(({ prompt, sample }) => [...prompt, ...sample.tokens]),
      allowedTokens: flat.map(({ prompt, sample }) => [...prompt.map(() => null), ...sample.allowedTokens!]),
      weights: flat.map(({ prompt, sample }) => [...prompt.map(() => 0), ...sample.tokens.map(() => 1)]),
      samplingLogprobs: flat.map(({ prompt, sample }) => [...prompt.map(() => 0), ...sample.logprobs]),
      advantages: flat.map(({ prompt, sample }) => [...prompt.map(() => 0), ...sample.tokens.map(() => 1)]),
    };
    const { logprobs } = await client.forward(batch);
    let constrainedTokens = 0;
    flat.forEach(({ prompt, sample }, b) => {
      sample.logprobs.forEach((logprob, i) => {
        expect(Math.abs(logprobs[b]![prompt.length + i]! - logprob)).toBeLessThan(1e-4);
        if (sample.allowedTokens![i]!.length === 1) expect(logprob).toBeCloseTo(0, 6);
        else constrainedTokens++;
      });
    });
    expect(constrainedTokens).toBeGreaterThan(0);
    // Without the allowed sets the same tokens are less likely: the constraint is really in the quantity.
    const { logprobs: free } = await client.forward({ tokens: batch.tokens });
    expect(free[0]!.reduce((a, b) => a + b, 0)).toBeLessThan(logprobs[0]!.reduce((a, b) => a + b, 0));
    const { metrics } = await client.forwardBackward(batch, "ppo");
    expect(Math.abs(metrics["ratio/mean"]! - 1)).toBeLessThan(1e-4);
    expect(Math.abs(metrics["ratio/max"]! - 1)).toBeLessThan(1e-4);
  });

  it("refuses a token its allowed set does not hold, and a constraint list of the wrong length", async () => {
    await expect(client.forward({ tokens: [[1, 2, 3]], allowedTokens: [[null, [5], null]] })).rejects.toThrow(
      /batch.tokens\[0\]\[1\] is token 2, which batch.allowedTokens\[0\]\[1\] does not allow/,
    );
    await expect(client.sample([prompt("a")], 1, { constraints: [] })).rejects.toThrow(/give one \(or null\) per prompt/);
  });
});
