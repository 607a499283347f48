/**
 * Use case 5: a text world. One house of six rooms joined by doors; an object lies in one room and must be
 * brought to another. Each step costs 0.02, so short solutions score higher. A potential-based progress term pays
 * 0.1 for every action that shortens the shortest plan still to go (walk to the object, take it, walk to the goal,
 * drop it) and charges 0.1 for every one that lengthens it: the difference of the potential −0.1·(plan length)
 * between consecutive states, so every delivery earns the same 0.1·(first plan length) of it in all and the best
 * policy is unchanged (Ng, Harada & Russell, 1999); what it changes is which step gets the credit, which a
 * multi-turn estimator otherwise has to infer from a delivery that may come 8 steps later. The house is the same in every
 * episode (a policy can learn its map, as a player learns a game's level); where the agent starts, which object,
 * where it lies and where it must go come from the seed. The observation says where the object is, where the
 * agent is and which exits the room has, so the latest observation is the whole state.
 *
 * Actions: `go north|south|east|west`, `take OBJECT`, `drop OBJECT`.
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment, type ParseResult } from "@/lib/sdk/environment";

const OBJECTS = ["key", "lamp", "book", "coin"] as const;
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

/** Weight of the progress term: this much per action of the shortest remaining plan gained or lost. */
const PROGRESS_PER_ACTION = 0.1;

/** Shortest number of moves between two rooms (breadth-first over the doors). */
export function distance(from: string, to: string): number {
  let frontier = [from];
  const seen = new Set(frontier);
  for (let d = 0; frontier.length; d++) {
    if (frontier.includes(to)) return d;
    const next: string[] = [];
    for (const room of frontier) {
      for (const neighbour of Object.values(HOUSE[room]!)) {
        if (!seen.has(neighbour!)) {
          seen.add(neighbour!);
          next.push(neighbour!);
        }
      }
    }
    frontier = next;
  }
  throw new Error(`no path from ${from} to ${to}`);
}

/** The length of the shortest plan that delivers the object from this state: moves, take, moves, drop. */
export function planLength(state: WorldState): number {
  if (state.done) return 0;
  if (state.objectAt === "hand") return distance(state.at, state.goal) + 1;
  return distance(state.at, state.objectAt) + 1 + distance(state.objectAt, state.goal) + 1;
}

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
    const goal = pick(
      ROOMS.filter((room) => room !== objectAt),
      rng,
    );
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
    if (next.objectAt === next.goal) next.done = true;
    const progress = PROGRESS_PER_ACTION * (planLength(state) - planLength(next));
    if (next.done) return { state: next, reward: 1 + progress, done: true, metrics: { success: 1 } };
    return { state: next, observation: describe(next), reward: progress, done: false };
  },
  render: describe,
  score: ({ state }) => (state.done ? 1 : 0),
});
