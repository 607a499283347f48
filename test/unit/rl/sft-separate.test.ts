/**
 * SFT with separate policies (lib/rl/sft.ts): each agent's policy imitates the demonstrations of its own agent's
 * turns only, so two agents taught different replies to one prompt each learn their own; each agent's loss is
 * reported, and evaluation seats each policy at its agent.
 */
import { describe, expect, it } from "vitest";
import { renderChat } from "@/lib/model/chat";
import { kuhnPokerDuel } from "@/lib/envs/kuhn-poker";
import { type Conversation, demonstrationConversations, toAgentConversations, trainSft } from "@/lib/rl/sft";
import { seatOf } from "@/lib/rl/seats";
import type { PolicyModel } from "@/lib/rl/primitives";
import { defineExperiment } from "@/lib/sdk/experiment";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { type Trajectory, turnBased } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { byteDuel, byteDuelProtocol } from "../../support/byte-duel";

const base = BaseModel.create({ vocabSize: 262, contextLength: 32, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 4 });

function adapter(seed: number): PolicyModel {
  const client = new TrainingClient(base, { seed }); // full weights of its own: the tiny random base learns fast
  return { primitives: client, tokenizer: base.tokenizer, contextLength: 32 };
}

/** The policy's log-probability of replying `reply` to "go" (the duel's prompt): over the tokens SFT trains on. */
async function logprobOf(policy: PolicyModel, reply: string): Promise<number> {
  const conversation: Conversation = [
    { role: "system", content: "" },
    { role: "user", content: "go" },
    { role: "assistant", content: reply },
  ];
  const { tokens, lossMask } = renderChat(policy.tokenizer, conversation);
  const { logprobs } = await policy.primitives.forward({ tokens: [tokens] });
  return lossMask.reduce((sum, m, t) => sum + (m === 1 ? logprobs[0]![t]! : 0), 0);
}

const config = (policies: "shared" | "separate") =>
  defineExperiment({
    name: "duel-sft",
    environment: byteDuel.name,
    agent: { base: "random", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 1 } },
    protocol: { name: "turn-based", agents: ["A", "B"], policies },
    algorithm: { name: "sft", steps: 20, learningRate: 1e-2 },
    sft: { batchSize: 4 },
    evaluation: { every: 0, episodes: 4 },
    seed: 3,
  });

/** A demonstrated game: A replies "z", B replies "a". */
const demonstrated: Trajectory = {
  systemPrompt: "",
  turns: [
    { agent: "A", observation: "go", action: "z", reward: 0, actionTokens: [], actionLogprobs: [], info: {} },
    { agent: "B", observation: "go", action: "a", reward: 0, actionTokens: [], actionLogprobs: [], info: {} },
  ],
} as unknown as Trajectory;

describe("SFT with separate policies", () => {
  it("teaches each agent's policy its own agent's replies, reports each one's loss, and evaluates each at its agent", async () => {
    const tagged = toAgentConversations([demonstrated], "last");
    expect(tagged.map((c) => [c.agent, c.conversation.at(-1)!.content])).toEqual([
      ["A", "z"],
      ["B", "a"],
    ]);
    const own = (agent: string) => tagged.filter((c) => c.agent === agent).map((c) => c.conversation);
    const [a, b] = [adapter(1), adapter(2)];
    const before = { a: await logprobOf(a, "z"), b: await logprobOf(b, "a") };
    const metrics: Record<string, number>[] = [];
    const evalSeats = new Set<string>();
    await trainSft({
      config: config("separate"),
      policy: a,
      conversations: [],
      agents: { A: { policy: a, conversations: own("A") }, B: { policy: b, conversations: own("B") } },
      environment: byteDuel,
      protocol: byteDuelProtocol,
      hooks: {
        onMetrics: (_step, m) => void ("loss/sft" in m && metrics.push(m)),
        onRollouts: (_step, _split, groups) => {
          for (const t of groups.flat()) evalSeats.add(`${seatOf(t, "A")?.policy === a ? "a" : "?"}/${seatOf(t, "B")?.policy === b ? "b" : "?"}`);
        },
      },
    });
    // Each learnt its own agent's reply, and not the other's: A's policy says "z" and B's "a", each far more likely
    // than the other agent's reply (one policy taught both would give each about even odds).
    expect(await logprobOf(a, "z")).toBeGreaterThan(Math.max(before.a + 5, Math.log(0.9)));
    expect(await logprobOf(b, "a")).toBeGreaterThan(Math.max(before.b + 5, Math.log(0.9)));
    expect(await logprobOf(a, "a")).toBeLessThan((await logprobOf(a, "z")) - 5);
    expect(await logprobOf(b, "z")).toBeLessThan((await logprobOf(b, "a")) - 5);
    expect(metrics).toHaveLength(20);
    for (const m of metrics) {
      expect(m["train/agent/A/tokens"]).toBeGreaterThan(0);
      expect(m["train/agent/B/tokens"]).toBeGreaterThan(0);
      expect(m["train/tokens"]).toBe(m["train/agent/A/tokens"]! + m["train/agent/B/tokens"]!);
    }
    expect(metrics.at(-1)!["train/agent/A/loss/sft"]).toBeLessThan(metrics[0]!["train/agent/A/loss/sft"]!);
    expect(evalSeats).toEqual(new Set(["a/b"]));
  });

  it("names the agent of each demonstrated conversation, as a custom environment's demonstrator plays them", async () => {
    const protocol = { ...turnBased(["P1", "P2"]), history: "last" as const };
    const starts = Array.from({ length: 12 }, (_, seed) => ({ session: new EnvironmentSession(kuhnPokerDuel), seed }));
    const { conversations, agents } = await demonstrationConversations(protocol, starts, (episode, agent) => starts[episode]!.session.demonstrate(agent));
    expect(agents).toHaveLength(conversations.length);
    expect(new Set(agents)).toEqual(new Set(["P1", "P2"]));
    // Each conversation is under its own agent's prompt ("You are P1" / "You are P2").
    conversations.forEach((conversation, i) => expect(conversation[0]!.content).toContain(`You are ${agents[i]}`));
  });

  it("refuses a separate-policies config without each agent's policy and conversations", async () => {
    await expect(
      trainSft({ config: config("separate"), policy: adapter(1), conversations: [], environment: byteDuel, protocol: byteDuelProtocol }),
    ).rejects.toThrow(/pass trainSft each agent's policy and conversations/);
  });
});
