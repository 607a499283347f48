/**
 * Use case 5: a text world. One house of six rooms joined by doors; an object lies in one room and must be
 * brought to another. Each step costs 0.02, so short solutions score higher. The house is the same in every
 * episode (a policy can learn its map, as a player learns a game's level); where the agent starts, which object,
 * where it lies and where it must go come from the seed. The observation says where the object is, where the
 * agent is and which exits the room has, so the latest observation is the whole state.
 *
 * Actions: `go north|south|east|west`, `take OBJECT`, `drop OBJECT`.
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment, type ParseResult } from "@/lib/sdk/environment";

export const OBJECTS = ["key", "lamp", "book", "coin"] as const;
export type Direction = "north" | "south" | "east" | "west";

/**
 *   kitchen — hall — study
 *      |       |       |
 *   garden — cellar — attic
 */
export const HOUSE: Record<string, Partial<Record<Direction, string>>> = {
  kitchen: { east: "hall", south: "garden" },
  hall: { west: "kitchen", east: "study", south: "cellar" },
  study: { west: "hall", south: "attic" },
  garden: { north: "kitchen", east: "cellar" },
  cellar: { west: "garden", north: "hall", east: "attic" },
  attic: { west: "cellar", north: "study" },
};
const ROOMS = Object.keys(HOUSE);

export type WorldState = {
  object: string;
  /** the room the object lies in, or "hand" */
  objectAt: string;
  at: string;
  goal: string;
  done: boolean;
};

export type WorldAction = { verb: "go"; direction: Direction } | { verb: "take" | "drop"; object: string };

function pick<T>(items: readonly T[], rng: Rng): T {
  return items[Math.floor(rng.uniform() * items.length)]!;
}

function describe(state: WorldState): string {
  const where = state.objectAt === "hand" ? "in hand" : `in ${state.objectAt}`;
  return `${state.object} to ${state.goal}. ${state.object} ${where}. you in ${state.at}. exits: ${Object.keys(HOUSE[state.at]!).join(" ")}.`;
}

/** Every action that the current state allows, as text: the moves of a legal-but-aimless player. */
export function legalActions(state: WorldState): string[] {
  const actions = Object.keys(HOUSE[state.at]!).map((direction) => `go ${direction}`);
  if (state.objectAt === state.at) actions.push(`take ${state.object}`);
  if (state.objectAt === "hand") actions.push(`drop ${state.object}`);
  return actions;
}

function parse(text: string, state: WorldState): ParseResult<WorldAction> {
  const [verb, argument, ...rest] = text.trim().toLowerCase().split(/\s+/);
  if (rest.length || !argument) return { ok: false, error: "expected go DIR, take X or drop X" };
  if (verb === "go") {
    if (!["north", "south", "east", "west"].includes(argument)) return { ok: false, error: `no direction '${argument}'` };
    if (!HOUSE[state.at]![argument as Direction]) return { ok: false, error: `no exit ${argument}` };
    return { ok: true, action: { verb, direction: argument as Direction } };
  }
  if (verb === "take" || verb === "drop") {
    if (argument !== state.object) return { ok: false, error: `no ${argument} here` };
    if (verb === "take" && state.objectAt !== state.at) return { ok: false, error: `no ${argument} here` };
    if (verb === "drop" && state.objectAt !== "hand") return { ok: false, error: `not holding ${argument}` };
    return { ok: true, action: { verb, object: argument } };
  }
  return { ok: false, error: `unknown verb '${verb}'` };
}

export const textWorld = defineEnvironment<WorldState, WorldAction>({
  name: "text-world",
  description: "Bring an object to a room of a six-room house; every step costs 0.02.",
  data: { kind: "free" },
  systemPrompt: "Deliver it.",
  maxTurns: 16,
  stepCost: -0.02,
  invalidAction: { penalty: -0.1, endEpisode: false },
  scoreName: "success",
  reset({ rng }) {
    const object = pick(OBJECTS, rng);
    const objectAt = pick(ROOMS, rng);
    const goal = pick(ROOMS.filter((room) => room !== objectAt), rng);
    const state: WorldState = { object, objectAt, at: pick(ROOMS, rng), goal, done: false };
    return { state, observation: describe(state) };
  },
  // The session follows an error with the latest observation, the whole state: with "last" history it is all
  // the agent sees on its next turn.
  parseAction: parse,
  step(state, action) {
    const next: WorldState = { ...state };
    if (action.verb === "go") next.at = HOUSE[state.at]![action.direction]!;
    else next.objectAt = action.verb === "take" ? "hand" : state.at;
    if (next.objectAt === next.goal) {
      next.done = true;
      return { state: next, reward: 1, done: true, metrics: { success: 1 } };
    }
    return { state: next, observation: describe(next), reward: 0, done: false };
  },
  render: describe,
  score: ({ state }) => (state.done ? 1 : 0),
});

export default textWorld;
