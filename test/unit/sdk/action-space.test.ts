/** Action spaces: the automaton a list or a pattern compiles to, and the SDK's legal actions of a turn. */
import { describe, expect, it } from "vitest";
import { ActionAutomaton } from "@/lib/sdk/action-space";
import { EnvironmentSession, defineEnvironment, legalActionsOf } from "@/lib/sdk/environment";

const matches = (constraint: ConstructorParameters<typeof ActionAutomaton>[0], texts: string[]) => {
  const automaton = new ActionAutomaton(constraint);
  return texts.map((text) => automaton.matches(text));
};

describe("action automata", () => {
  it("a list accepts exactly its actions, prefixes of each other included", () => {
    expect(matches({ actions: ["1", "10", "take 2", "é"] }, ["1", "10", "take 2", "é", "", "1 ", "100", "take", "e"])).toEqual([
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it("a pattern matches whole actions only", () => {
    expect(matches({ pattern: "\\d{1,3}" }, ["7", "42", "999", "1000", "", "4a"])).toEqual([true, true, true, false, false, false]);
    expect(matches({ pattern: "(left|right) [a-c]+" }, ["left a", "right cab", "left", "up a", "right d"])).toEqual([true, true, false, false, false]);
    expect(matches({ pattern: "[^,]+,[^,]+" }, ["a,b", "hello, world", ",b", "a,b,c"])).toEqual([true, true, false, false]);
    expect(matches({ pattern: "x?y*z+" }, ["z", "xz", "yyzz", "xyz", "x", "zx"])).toEqual([true, true, true, true, false, false]);
    expect(matches({ pattern: "a.c" }, ["abc", "a c", "a\nc"])).toEqual([true, true, false]);
  });

  it("names what it cannot accept", () => {
    expect(() => new ActionAutomaton({ pattern: "^\\d+$" })).toThrow(/anchors \('\^'\) are not needed/);
    expect(() => new ActionAutomaton({ pattern: "(a|b" })).toThrow(/a group is not closed at position 4/);
    expect(() => new ActionAutomaton({ pattern: "a{3,1}" })).toThrow(/a repeat must be \{n,m\} with n ≤ m/);
    expect(() => new ActionAutomaton({ pattern: "(?=a)b" })).toThrow(/lookarounds/);
    expect(() => new ActionAutomaton({ actions: [] })).toThrow(/at least one legal action/);
    expect(() => new ActionAutomaton({ actions: ["a", ""] })).toThrow(/actions\[1\] must be a non-empty string/);
  });

  it("lists the next bytes and whether the action may end, step by step", () => {
    const automaton = new ActionAutomaton({ actions: ["ab", "a"] });
    const s = automaton.start;
    expect(automaton.bytes(s)).toEqual([97]);
    expect(automaton.accepting(s)).toBe(false);
    const a = automaton.next(s, 97);
    expect(automaton.bytes(a)).toEqual([98]);
    expect(automaton.accepting(a)).toBe(true);
    expect(automaton.next(a, 99)).toBe(-1);
  });
});

describe("an environment's legal actions", () => {
  const base = {
    name: "take-away",
    data: { kind: "free" as const },
    systemPrompt: "Take 1 to 3.",
    maxTurns: 5,
    reset: () => ({ state: { left: 5 }, observation: "5 left" }),
    parseAction: (text: string) => ({ ok: true as const, action: Number(text) }),
    step: (state: { left: number }, take: number) => ({
      state: { left: state.left - take },
      reward: 0,
      done: state.left - take <= 0,
      observation: `${state.left - take} left`,
    }),
  };

  it("follows the state when actions is a function, and is null once the episode ends", () => {
    const definition = defineEnvironment({ ...base, actions: (state: { left: number }) => ["1", "2", "3"].filter((n) => Number(n) <= state.left) });
    const session = new EnvironmentSession(definition);
    session.reset(0);
    expect(session.legalActions()).toEqual({ actions: ["1", "2", "3"] });
    session.step("3");
    expect(session.legalActions()).toEqual({ actions: ["1", "2"] });
    session.step("2");
    expect(session.legalActions()).toBeNull();
  });

  it("keeps tool calls legal beside the actions", () => {
    const definition = defineEnvironment({ ...base, actions: ["1", "2"], tools: { peek: { description: "", run: () => "5" } } });
    const constraint = legalActionsOf(definition, { left: 5 })!;
    const automaton = new ActionAutomaton(constraint);
    expect(["1", "2", "@peek()", "@peek(x y)", "3", "@other()"].map((t) => automaton.matches(t))).toEqual([true, true, true, true, false, false]);
  });

  it("refuses a malformed pattern when the environment is defined, naming the field", () => {
    expect(() => defineEnvironment({ ...base, actions: { pattern: "[a-" } })).toThrow(/defineEnvironment: actions: action pattern/);
  });
});
