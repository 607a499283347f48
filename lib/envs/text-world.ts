/**
 * Use case 5: a text world. A few rooms joined by doors, objects lying about, and a goal: bring one object to one
 * room. Each step costs 0.02, so short solutions score higher. Layouts, objects and goals come from the seed.
 *
 * Actions: `go north|south|east|west`, `take OBJECT`, `drop OBJECT`.
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment } from "@/lib/sdk/environment";

const ROOMS = ["kitchen", "hall", "garden", "cellar", "study", "attic"] as const;
const OBJECTS = ["key", "lamp", "book", "coin"] as const;
const DIRECTIONS = { north: [0, -1], south: [0, 1], east: [1, 0], west: [-1, 0] } as const;
type Direction = keyof typeof DIRECTIONS;

export type WorldState = {
  /** room name → its exits */
  exits: Record<string, Partial<Record<Direction, string>>>;
  /** object → the room it lies in, or "hand" */
  objects: Record<string, string>;
  at: string;
  goal: { object: string; room: string };
  done: boolean;
};

type Action = { verb: "go"; direction: Direction } | { verb: "take" | "drop"; object: string };

function pick<T>(items: readonly T[], rng: Rng): T {
  return items[Math.floor(rng.uniform() * items.length)]!;
}

/** Lays 4-5 rooms on a grid as a random tree: every room reachable, doors both ways. */
function layout(rng: Rng): WorldState["exits"] {
  const count = 4 + Math.floor(rng.uniform() * 2);
  const names = [...ROOMS].sort(() => rng.uniform() - 0.5).slice(0, count);
  const position = new Map<string, [number, number]>([[names[0]!, [0, 0]]]);
  const exits: WorldState["exits"] = { [names[0]!]: {} };
  const opposite: Record<Direction, Direction> = { north: "south", south: "north", east: "west", west: "east" };
  for (const name of names.slice(1)) {
    for (let attempt = 0; attempt < 100; attempt++) {
      const from = pick([...position.keys()], rng);
      const direction = pick(Object.keys(DIRECTIONS) as Direction[], rng);
      const [x, y] = position.get(from)!;
      const [dx, dy] = DIRECTIONS[direction];
      const spot: [number, number] = [x + dx, y + dy];
      if ([...position.values()].some(([px, py]) => px === spot[0] && py === spot[1])) continue;
      position.set(name, spot);
      exits[name] = { [opposite[direction]]: from };
      exits[from]![direction] = name;
      break;
    }
  }
  return exits;
}

function describe(state: WorldState): string {
  const exits = Object.keys(state.exits[state.at]!).join(" ");
  const here = Object.entries(state.objects).filter(([, where]) => where === state.at).map(([o]) => o);
  const held = Object.entries(state.objects).filter(([, where]) => where === "hand").map(([o]) => o);
  return `goal: ${state.goal.object} to ${state.goal.room}. ${state.at}. exits: ${exits}. items: ${here.join(" ") || "none"}. holding: ${held.join(" ") || "none"}.`;
}

export const textWorld = defineEnvironment<WorldState, Action>({
  name: "text-world",
  description: "Bring an object to a room in a small house of 4-5 rooms; every step costs 0.02.",
  data: { kind: "free" },
  systemPrompt: "Reach the goal. Actions: go DIR, take X, drop X.",
  maxTurns: 16,
  stepCost: -0.02,
  invalidAction: { penalty: -0.1, endEpisode: false },
  scoreName: "success",
  reset({ rng }) {
    const exits = layout(rng);
    const rooms = Object.keys(exits);
    const objects: Record<string, string> = {};
    for (const object of [...OBJECTS].sort(() => rng.uniform() - 0.5).slice(0, 2)) objects[object] = pick(rooms, rng);
    const goalObject = pick(Object.keys(objects), rng);
    const goalRoom = pick(rooms.filter((room) => room !== objects[goalObject]), rng);
    const state: WorldState = { exits, objects, at: pick(rooms, rng), goal: { object: goalObject, room: goalRoom }, done: false };
    return { state, observation: describe(state) };
  },
  parseAction(text, state) {
    const [verb, argument, ...rest] = text.trim().toLowerCase().split(/\s+/);
    if (rest.length || !argument) return { ok: false, error: `expected "go DIR", "take X" or "drop X", got ${JSON.stringify(text.trim().slice(0, 30))}` };
    if (verb === "go") {
      if (!(argument in DIRECTIONS)) return { ok: false, error: `no direction '${argument}'` };
      if (!state.exits[state.at]![argument as Direction]) return { ok: false, error: `no exit ${argument}` };
      return { ok: true, action: { verb, direction: argument as Direction } };
    }
    if (verb === "take" || verb === "drop") {
      const where = state.objects[argument];
      if (where === undefined) return { ok: false, error: `no ${argument} here` };
      if (verb === "take" && where !== state.at) return { ok: false, error: `no ${argument} here` };
      if (verb === "drop" && where !== "hand") return { ok: false, error: `not holding ${argument}` };
      return { ok: true, action: { verb, object: argument } };
    }
    return { ok: false, error: `unknown verb '${verb}'` };
  },
  step(state, action) {
    const next: WorldState = { ...state, objects: { ...state.objects } };
    if (action.verb === "go") next.at = state.exits[state.at]![action.direction]!;
    else next.objects[action.object] = action.verb === "take" ? "hand" : state.at;
    if (next.objects[next.goal.object] === next.goal.room) {
      next.done = true;
      return { state: next, reward: 1, done: true, metrics: { success: 1 } };
    }
    return { state: next, observation: describe(next), reward: 0, done: false };
  },
  render: describe,
  score: ({ state }) => (state.done ? 1 : 0),
});

export default textWorld;
