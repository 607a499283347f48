/**
 * The episode player's sandboxed session (QuickJS in the page's worker) plays environments of several agents as the
 * SDK does in-process: the same seeds and answers give the same trajectories (agents, observations, prompts,
 * per-agent rewards and returns), turn-based with `toAct`, `observe` and per-agent rewards, and simultaneous with
 * `stepTogether`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BrowserSandboxedSession } from "@/components/episode/sandboxed-session";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { type ActRequest, type Protocol, runEpisodes, simultaneous, turnBased } from "@/lib/sdk/protocol";
import { compileEnvironment } from "@/server/sandbox";
import { defaultSandboxLimits } from "@/server/sandbox/browser";
import race from "../sandbox/fixtures/multi-agent-race";
import rps from "../sandbox/fixtures/multi-agent-rps";

const fixture = (file: string) => fileURLToPath(new URL(`../sandbox/fixtures/${file}`, import.meta.url));
const wasm = createRequire(import.meta.url).resolve("@jitl/quickjs-wasmfile-release-sync/wasm");

/** Answers each request from its prompt alone: a legal action picked by a hash, now and then an invalid one. */
async function hashedPolicy(requests: ActRequest[]) {
  return requests.map((request) => {
    let hash = 2166136261;
    const text = request.agent + JSON.stringify(request.messages);
    for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619) >>> 0;
    if (hash % 7 === 0) return { text: "banana" };
    const legal = request.legalActions && "actions" in request.legalActions ? request.legalActions.actions : ["1"];
    return { text: legal[hash % legal.length]! };
  });
}

async function bothWays(file: string, definition: typeof race | typeof rps, protocol: Protocol) {
  const compiled = await compileEnvironment({ [file]: readFileSync(fixture(file), "utf8") }, { entry: file });
  if (!compiled.ok) throw new Error(compiled.diagnostics.map((d) => d.message).join("\n"));
  const session = await BrowserSandboxedSession.load(compiled.compiled.code, defaultSandboxLimits, await WebAssembly.compile(readFileSync(wasm)));
  const seeds = Array.from({ length: 8 }, (_, i) => i);
  const browser = [];
  // One episode at a time, as the player plays them.
  for (const seed of seeds) browser.push(...(await runEpisodes(protocol, [{ session: session as unknown as EnvironmentSession, seed }], hashedPolicy)));
  const native = await runEpisodes(
    protocol,
    seeds.map((seed) => ({ seed, session: new EnvironmentSession(definition as typeof race) })),
    hashedPolicy,
  );
  return { browser, native };
}

describe("the episode player's sandboxed session with several agents", () => {
  it("plays a turn-based game (toAct, observe, per-agent rewards and prompts) as in-process", async () => {
    const { browser, native } = await bothWays("multi-agent-race.ts", race, turnBased(["A", "B"]));
    expect(browser).toEqual(native);
    expect(native.some((trajectory) => trajectory.turns.some((turn, t) => t > 0 && turn.agent === trajectory.turns[t - 1]!.agent))).toBe(true);
    expect(native.every((trajectory) => trajectory.systemPrompts?.B?.startsWith("You are B."))).toBe(true);
  }, 60_000);

  it("plays a simultaneous game (stepTogether, each agent's view and invalid action) as in-process", async () => {
    const { browser, native } = await bothWays("multi-agent-rps.ts", rps, simultaneous(["P", "Q"]));
    expect(browser).toEqual(native);
    expect(native.some((trajectory) => trajectory.turns.some((turn) => turn.rewards))).toBe(true);
  }, 60_000);
});
