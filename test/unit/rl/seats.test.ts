/**
 * Seats in the RL step: two LoRA adapters on one tiny base play the two agents of a zero-sum duel. Each policy is
 * updated on its own agent's turns alone, a frozen seat never changes, and per-agent credit still mirrors.
 */
import { describe, expect, it } from "vitest";
import type { StepContext } from "@/lib/rl/algorithm";
import type { PolicyModel } from "@/lib/rl/primitives";
import { toTrainingBatch } from "@/lib/rl/rollouts";
import { fixedSeats, seatOf, separateSeats } from "@/lib/rl/seats";
import { rlAlgorithms } from "@/lib/rl/train";
import { policyUpdate } from "@/lib/rl/update";
import { type AlgorithmName, defineExperiment } from "@/lib/sdk/experiment";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { byteDuel, byteDuelProtocol } from "../../support/byte-duel";

const protocol = byteDuelProtocol;
const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 1 });

function adapter(seed: number, valueHead = false): { client: TrainingClient; policy: PolicyModel } {
  const client = new TrainingClient(base, { lora: { rank: 4, alpha: 8 }, valueHead, seed });
  return { client, policy: { primitives: client, tokenizer: base.tokenizer, contextLength: 32 } };
}

/** The policy's logprobs of a fixed probe: equal before and after exactly when its weights did not move. */
async function probe(policy: PolicyModel): Promise<number[]> {
  const tokens = [
    [257, 259, 103, 111, 260, 49, 261],
    [257, 259, 103, 111, 260, 120, 261],
  ];
  const { logprobs } = await policy.primitives.forward({ tokens });
  return logprobs.flat();
}

function context(name: Exclude<AlgorithmName, "sft">, policy: PolicyModel, seats: StepContext["seats"], step = 0): StepContext {
  const config = defineExperiment({
    name: "seats",
    environment: byteDuel.name,
    agent: { base: "random", training: { mode: "lora" }, sampling: { temperature: 1, maxTokens: 1 } },
    algorithm: { name, groupSize: 8, groupsPerStep: 4, learningRate: 5e-2 },
  });
  return {
    policy,
    seats,
    environment: byteDuel,
    protocol,
    specs: Array.from({ length: 4 }, (_, g) => ({ seed: 100 * step + g })),
    config: config.algorithm,
    sampling: { ...config.agent.sampling, seed: 7 + step },
    memory: {},
  };
}

describe("seats in the RL step", () => {
  it.each(["grpo", "grpo-per-turn", "ppo", "rloo", "reinforce"] as const)("%s: a frozen seat is played, never trained; the learner moves", async (name) => {
    const learner = adapter(1, name === "ppo");
    const frozen = adapter(2);
    const baseBefore = Array.from(base.weights.lmHead.slice(0, 64));
    const [learnerBefore, frozenBefore] = [await probe(learner.policy), await probe(frozen.policy)];
    const seats = fixedSeats({ A: { id: "learner", policy: learner.policy, trains: true }, B: { id: "frozen", policy: frozen.policy, trains: false } });
    let played = 0;
    for (let step = 0; step < 3; step++) {
      const output = await rlAlgorithms[name](context(name, learner.policy, seats, step));
      played += output.groups.flat().filter((t) => t.turns.some((turn) => turn.agent === "B")).length;
      for (const trajectory of output.groups.flat()) expect(seatOf(trajectory, "B")?.id).toBe("frozen");
    }
    expect(played).toBeGreaterThan(0);
    expect(await probe(frozen.policy)).toEqual(frozenBefore);
    expect(await probe(learner.policy)).not.toEqual(learnerBefore);
    expect(frozen.client.step).toBe(0);
    // The adapters share the base; no update writes into it.
    expect(Array.from(base.weights.lmHead.slice(0, 64))).toEqual(baseBefore);
  });

  it("each agent's adapter is updated on its own agent's turns alone", async () => {
    const a = adapter(1);
    const b = adapter(2);
    const dir = `${process.env.TMPDIR ?? "/tmp"}/seats-test-${process.pid}`;
    await a.client.saveState(`${dir}/a`);
    await b.client.saveState(`${dir}/b`);
    const bBefore = await probe(b.policy);
    const ctx = context("grpo", a.policy, separateSeats({ A: a.policy, B: b.policy }));
    const output = await rlAlgorithms.grpo(ctx);
    expect(output.metrics["train/agent/A/grad_norm"]).toBeGreaterThan(0);
    expect(output.metrics["train/agent/B/grad_norm"]).toBeGreaterThan(0);

    // Replayed by hand from the same starting adapters: A's update on A's turns alone, B's on B's, gives exactly the
    // adapters the step left; so B's turns never reached A's adapter, nor A's turns B's.
    for (const [agent, trained, saved] of [
      ["A", a, "a"],
      ["B", b, "b"],
    ] as const) {
      const replay = adapter(9);
      await replay.client.loadState(`${dir}/${saved}`);
      const own = toTrainingBatch(output.groups, output.advantages, undefined, (_, turn) => turn.agent === agent);
      expect(own.tokens.length).toBe(output.groups.flat().length);
      await policyUpdate(replay.client, own, ctx.config, ctx.sampling.temperature);
      expect(await probe(replay.policy)).toEqual(await probe(trained.policy));
    }
    expect(await probe(b.policy)).not.toEqual(bBefore);
  });

  it("opposite rewards still give opposite advantages with two policies", async () => {
    const a = adapter(3);
    const b = adapter(4);
    const output = await rlAlgorithms.grpo(context("grpo", a.policy, separateSeats({ A: a.policy, B: b.policy })));
    let nonZero = 0;
    for (const [g, group] of output.groups.entries()) {
      for (const [i, trajectory] of group.entries()) {
        expect(trajectory.agentReturns.A! + trajectory.agentReturns.B!).toBe(0);
        const [advantageA, advantageB] = output.advantages[g]![i]!;
        expect(advantageA).toBeCloseTo(-advantageB!, 9);
        if (advantageA !== 0) nonZero += 1;
      }
    }
    expect(nonZero).toBeGreaterThan(0);
  });
});
