import { describe, expect, it } from "vitest";
import { kuhnPokerDuel } from "@/lib/envs/kuhn-poker";
import { demonstrationConversations } from "@/lib/rl/sft";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { turnBased } from "@/lib/sdk/protocol";

describe("SFT on a demonstrator with several agents", () => {
  it("asks the demonstrator for the agent whose turn it is, and gives each agent conversations of its own turns under its own prompt", async () => {
    const protocol = { ...turnBased(["P1", "P2"]), history: "last" as const };
    const starts = Array.from({ length: 24 }, (_, seed) => ({ session: new EnvironmentSession(kuhnPokerDuel), seed }));
    const asked: string[] = [];
    const { conversations } = await demonstrationConversations(protocol, starts, (episode, agent) => {
      asked.push(agent);
      return starts[episode]!.session.demonstrate(agent);
    });
    // Both seats were asked, P1 first in every hand.
    expect(new Set(asked)).toEqual(new Set(["P1", "P2"]));
    expect(conversations.length).toBe(asked.length);
    for (const conversation of conversations) {
      const [system, user, assistant] = conversation;
      const seat = /You are (P[12])/.exec(system!.content)?.[1];
      expect(seat, system!.content).toBeDefined();
      // The observation is the seat's own: it names the seat's card, never the other's.
      expect(user!.role).toBe("user");
      expect(assistant!.role).toBe("assistant");
      expect(["check", "bet", "call", "fold"]).toContain(assistant!.content.trim());
    }
    const bySeat = (seat: string) => conversations.filter((c) => c[0]!.content.includes(`You are ${seat}`)).length;
    expect(bySeat("P1")).toBe(asked.filter((a) => a === "P1").length);
    expect(bySeat("P2")).toBe(asked.filter((a) => a === "P2").length);
  });

  it("keeps a whole-episode conversation per agent under full history, holding only that agent's exchanges", async () => {
    const protocol = turnBased(["P1", "P2"]);
    const starts = Array.from({ length: 8 }, (_, seed) => ({ session: new EnvironmentSession(kuhnPokerDuel), seed }));
    const { conversations } = await demonstrationConversations(protocol, starts, (episode, agent) => starts[episode]!.session.demonstrate(agent));
    // Every hand has a move of each seat, so two conversations a hand.
    expect(conversations.length).toBe(16);
    for (const conversation of conversations) {
      expect(conversation[0]!.role).toBe("system");
      const roles = conversation.slice(1).map((m) => m.role);
      // user, assistant, user, assistant...: never two of one agent's moves with the other's between them
      roles.forEach((role, i) => expect(role).toBe(i % 2 === 0 ? "user" : "assistant"));
    }
  });
});
