/**
 * A signalling game (Lewis, 1969): the speaker sees a target, one of four colours, and sends one of four signals;
 * the listener sees only the signal and names a colour. Both earn 1 when it is the target, else 0: the reward is
 * shared, so the two succeed only by agreeing on a code. The signals are letters that spell no colour, so a code
 * must be learned, not read.
 *
 * Turn-based, the speaker first: the listener must have the signal before it names anything, so the two cannot act
 * at once in one round, and one message each way is all the game needs.
 *
 * Three environments: `signal-speaker` (the policy speaks to a scripted listener that decodes the fixed code
 * below), `signal-listener` (a scripted speaker sends the fixed code, the policy names the colour), and
 * `signal-game` (two agents, speaker and listener, who may settle on any code of their own).
 */
import type { Rng } from "@/lib/model/rng";
import { defineEnvironment, type EnvironmentDefinition, type ParseResult } from "@/lib/sdk/environment";

export const COLOURS = ["red", "green", "blue", "gold"] as const;
export const SIGNALS = ["w", "x", "y", "z"] as const;
export type Colour = (typeof COLOURS)[number];
export type Signal = (typeof SIGNALS)[number];
export type SignalRole = "speaker" | "listener";
export const SIGNAL_ROLES: readonly [SignalRole, SignalRole] = ["speaker", "listener"];

/** The scripted partners' code: a fixed pairing that follows no order of either list. */
export const CODE: Readonly<Record<Colour, Signal>> = { red: "y", green: "w", blue: "z", gold: "x" };
const DECODE = Object.fromEntries(Object.entries(CODE).map(([colour, signal]) => [signal, colour])) as Record<Signal, Colour>;

/**
 * A round: the target, then the signal sent and the colour named once each is made. `coin`, a uniform draw at
 * the start that only the demonstrators read, decides whether they slip in this round (a demonstrator is a
 * function of the state, and needs its own randomness).
 */
export type SignalState = { target: Colour; signal: Signal | null; guess: Colour | null; coin: number };

/** The scripted speaker's signal for a colour. */
export const speakFixedCode = (target: Colour): Signal => CODE[target];
/** The scripted listener's colour for a signal. */
export const listenFixedCode = (signal: Signal): Colour => DECODE[signal];

/** How often the demonstrators confuse gold with blue: in three rounds of five. */
const GOLD_SLIP = 0.6;

/**
 * The demonstrators: the fixed code, except that in three rounds of five (`coin` below 0.6) they confuse gold with
 * blue: the speaker sends blue's signal for gold, the listener reads gold's signal as blue. With a scripted partner
 * each succeeds 0.85 of the time; a base SFT'd on them makes the slip greedily (0.75), while the right answer stays
 * within what it samples for RL to find.
 */
export const demonstrateSpeaker = (target: Colour, coin: number): Signal => CODE[target === "gold" && coin < GOLD_SLIP ? "blue" : target];
export const demonstrateListener = (signal: Signal, coin: number): Colour => (DECODE[signal] === "gold" && coin < GOLD_SLIP ? "blue" : DECODE[signal]);

/** What each role sees: the speaker its target and signals, the listener the signal and the colours. */
export function describeFor(state: SignalState, role: SignalRole): string {
  if (role === "speaker") return `Target: ${state.target}. Send one of ${SIGNALS.join(" ")}.`;
  return `Signal: ${state.signal ?? "none yet"}. Name one of ${COLOURS.join(" ")}.`;
}

export function renderRound(state: SignalState): string {
  const outcome = state.guess === null ? "" : ` → ${state.guess} (${state.guess === state.target ? "right" : "wrong"})`;
  return `target ${state.target} · signal ${state.signal ?? "-"}${outcome}`;
}

/** Who acts in `state`: the speaker until it has signalled, then the listener. */
export const roleToAct = (state: SignalState): SignalRole => (state.signal === null ? "speaker" : "listener");

function parseWord<T extends string>(text: string, words: readonly T[]): ParseResult<T> {
  const word = text.trim().toLowerCase();
  if ((words as readonly string[]).includes(word)) return { ok: true, action: word as T };
  return { ok: false, error: `expected one of ${words.join(" ")}, got ${JSON.stringify(text.trim().slice(0, 20))}` };
}

const PROMPT: Record<SignalRole, string> = {
  speaker: "You are the speaker: signal the target to the listener.",
  listener: "You are the listener: name the colour the speaker signals.",
};

function newRound(rng: Rng): SignalState {
  return { target: COLOURS[Math.floor(rng.uniform() * COLOURS.length)]!, signal: null, guess: null, coin: rng.uniform() };
}

/** The round's end: 1 when the listener named the target. */
function finished(state: SignalState) {
  const success = state.guess === state.target ? 1 : 0;
  return { state, reward: success, done: true, metrics: { success } };
}

export const signalSpeaker = defineEnvironment<SignalState, string>({
  name: "signal-speaker",
  description: "Signal a colour to a scripted listener that knows a fixed code of four letters. Both earn 1 when it names the target.",
  data: { kind: "free" },
  systemPrompt: PROMPT.speaker,
  maxTurns: 1,
  scoreName: "success",
  reset({ rng }) {
    const state = newRound(rng);
    return { state, observation: describeFor(state, "speaker") };
  },
  parseAction: (text) => parseWord(text, SIGNALS),
  actions: SIGNALS,
  step(state, signal) {
    return finished({ ...state, signal: signal as Signal, guess: listenFixedCode(signal as Signal) });
  },
  demonstrate: (state) => demonstrateSpeaker(state.target, state.coin),
  render: renderRound,
  score: ({ state }) => (state.guess === state.target ? 1 : 0),
});

export const signalListener = defineEnvironment<SignalState, string>({
  name: "signal-listener",
  description: "Name the colour a scripted speaker signals with a fixed code of four letters. Both earn 1 when it is the target.",
  data: { kind: "free" },
  systemPrompt: PROMPT.listener,
  maxTurns: 1,
  scoreName: "success",
  reset({ rng }) {
    const round = newRound(rng);
    const state = { ...round, signal: speakFixedCode(round.target) };
    return { state, observation: describeFor(state, "listener") };
  },
  parseAction: (text) => parseWord(text, COLOURS),
  actions: COLOURS,
  step(state, colour) {
    return finished({ ...state, guess: colour as Colour });
  },
  demonstrate: (state) => demonstrateListener(state.signal!, state.coin),
  render: renderRound,
  score: ({ state }) => (state.guess === state.target ? 1 : 0),
});

/**
 * The game for two agents, speaker and listener (`turnBased(["speaker", "listener"])`): each sees its own view
 * (`observe`), and both earn the round's reward (`rewards`).
 */
export const signalGame: EnvironmentDefinition<SignalState, string> = defineEnvironment<SignalState, string>({
  name: "signal-game",
  description: "A speaker sees a colour and sends one of four letters; a listener names the colour. Both earn 1 when it is right.",
  data: { kind: "free" },
  // any other name (a tool asking before the seats are known) gets the game's rule alone
  systemPrompt: (_sample, agent) => PROMPT[agent as SignalRole] ?? "Speaker signals a colour, listener names it.",
  maxTurns: 2,
  scoreName: "success",
  reset({ rng }) {
    const state = newRound(rng);
    return { state, observation: describeFor(state, "speaker") };
  },
  toAct: roleToAct,
  observe: (state, agent) => describeFor(state, asRole(agent)),
  parseAction: (text, state) => (roleToAct(state) === "speaker" ? parseWord(text, SIGNALS) : parseWord(text, COLOURS)),
  actions: (state) => (roleToAct(state) === "speaker" ? SIGNALS : COLOURS),
  step(state, word) {
    if (roleToAct(state) === "speaker") {
      const next = { ...state, signal: word as Signal };
      return { state: next, observation: describeFor(next, "listener"), reward: 0, done: false };
    }
    // shared: the speaker earns the listener's success
    const outcome = finished({ ...state, guess: word as Colour });
    return { ...outcome, rewards: { speaker: outcome.reward, listener: outcome.reward } };
  },
  demonstrate: (state, agent) => (asRole(agent) === "speaker" ? demonstrateSpeaker(state.target, state.coin) : demonstrateListener(state.signal!, state.coin)),
  render: renderRound,
  score: ({ state }) => (state.guess === state.target ? 1 : 0),
});

function asRole(agent: string): SignalRole {
  if (agent === "speaker" || agent === "listener") return agent;
  throw new Error(`signal-game seats a speaker and a listener; got agent '${agent}'`);
}
