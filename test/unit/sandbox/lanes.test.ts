/**
 * Episodes played in lanes (runSandboxedEpisodes): the policy samples one lane while the sandbox steps another,
 * and the results are those of the same calls made one after another.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { policyActor } from "@/lib/rl/rollouts";
import { Rng } from "@/lib/model/rng";
import { EnvironmentSession } from "@/lib/sdk/environment";
import { type ActRequest, multiTurn, runEpisodes, singleTurn } from "@/lib/sdk/protocol";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { SandboxedEnvironmentPool, defaultLanes, runSandboxedEpisodes } from "@/server/sandbox";
import { LaneSchedule, laneShape, laneStarts } from "@/server/sandbox/lanes";
import { bankSlots } from "@/server/sandbox/sandboxed-environment";
import dice from "./fixtures/dice-env";
import { createPool } from "./helpers";

const diceSource = readFileSync(fileURLToPath(new URL("./fixtures/dice-env.ts", import.meta.url)), "utf8");
const diceFiles = { files: { "dice-env.ts": diceSource } };

/** Six groups of four identical starts, as collectGroups builds them. */
const grouped = Array.from({ length: 24 }, (_, i) => ({ seed: 500 + Math.floor(i / 4) }));

/** A scripted policy drawing per request, in order, and depending on the observation; it logs its calls. */
function scripted(seed: number, calls: number[][] = []) {
  const rng = new Rng(seed);
  return async (requests: ActRequest[]) => {
    calls.push(requests.map((request) => request.episode));
    return requests.map((request) => {
      const pick = Math.floor(rng.uniform() * 8);
      return { text: pick === 7 ? "@remaining()" : pick === 6 ? "seven" : String(1 + ((pick + request.messages.at(-1)!.content.length) % 6)) };
    });
  };
}

function tinyPolicy() {
  const base = BaseModel.create({ vocabSize: 262, contextLength: 160, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 7 });
  return { primitives: new TrainingClient(base, { seed: 7 }), tokenizer: base.tokenizer, contextLength: 160 };
}

/** Each async crossing of `pool`, as `label` writes its ops, in an array that act calls may add to. */
function logCrossings(pool: SandboxedEnvironmentPool, label: (ops: unknown[][]) => string): string[] {
  const events: string[] = [];
  const sandbox = (pool as unknown as { sandbox: { answerAsync: (ops: unknown[][]) => Promise<unknown> } }).sandbox;
  const post = sandbox.answerAsync.bind(sandbox);
  sandbox.answerAsync = (ops, ...rest: unknown[]) => {
    events.push(label(ops));
    return (post as (...args: unknown[]) => Promise<unknown>)(ops, ...rest);
  };
  return events;
}

describe("laneStarts", () => {
  it("cuts into parts of about equal size, only between groups", () => {
    expect(laneStarts(grouped, 2)).toEqual([0, 12]);
    expect(laneStarts(grouped, 3)).toEqual([0, 8, 16]);
    expect(laneStarts(grouped.slice(0, 12), 2)).toEqual([0, 4]); // three groups: 4 + 8
    expect(laneStarts(grouped.slice(0, 4), 2)).toEqual([0]); // one group: one lane
    expect(laneStarts([], 2)).toEqual([0]);
    expect(laneStarts(grouped, 1)).toEqual([0]);
    expect(() => laneStarts(grouped, 0)).toThrow("lanes must be a whole number of at least 1; got 0");
  });

  it("cuts into parts of the relative sizes given, still only between groups", () => {
    // 24 episodes as 12 : 3 : 1 aims at cuts 18 and 22.5; the nearest group ends are 16 (first of a tie) and 20.
    expect(laneStarts(grouped, [12, 3, 1])).toEqual([0, 16, 20]);
    const thirtyTwoGroups = Array.from({ length: 256 }, (_, i) => ({ seed: i >> 3 }));
    expect(laneStarts(thirtyTwoGroups, [12, 3, 1])).toEqual([0, 192, 240]);
    expect(laneShape(singleTurn(), true)).toEqual([9, 5, 2]);
    expect(laneStarts(thirtyTwoGroups, [9, 5, 2])).toEqual([0, 144, 224]);
    expect(laneShape(singleTurn(), false)).toBe(4);
    expect(laneShape(multiTurn(), true)).toBe(2);
    expect(() => laneStarts(grouped, [2, 0])).toThrow("lane sizes must be a list of positive numbers; got [2, 0]");
  });
});

describe("LaneSchedule", () => {
  it("lets a lane read its answer only once every other lane still playing has posted after it, whatever answers first", async () => {
    const schedule = new LaneSchedule(3);
    const read: number[] = [];
    const post = async (lane: number) => (await schedule.crossing(lane, async () => lane)).answer;
    const readLater = (lane: number) => schedule.readTurn(lane).then(() => read.push(lane));
    await post(0);
    schedule.answered(); // lane 0's answer is in: lane 1 may post, but lane 0 reads after lanes 1 and 2 have
    const reading0 = readLater(0);
    await post(1);
    schedule.answered();
    const reading1 = readLater(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(read).toEqual([]);
    await post(2);
    await reading0;
    expect(read).toEqual([0]); // lane 1 waits for lane 0 to post again or finish
    expect(schedule.lastInFlight).toBe(false);
    schedule.finish(0);
    await reading1;
    expect(read).toEqual([0, 1]);
    schedule.finish(1);
    expect(schedule.lastInFlight).toBe(true); // only lane 2's batch is left to wait for
  });

  it("asks for the answer in flight (stall) whenever nothing else can go on, never while another lane runs the protocol's code", async () => {
    let stalls = 0;
    const schedule: LaneSchedule = new LaneSchedule(3, () => {
      stalls++;
      // as the sandbox's answer settles the posting lane's promise: that lane reads it in a microtask
      queueMicrotask(() => schedule.answered());
    });
    await schedule.crossing(0, async () => 0); // lane 0's batch is in flight
    schedule.crossed(1); // lane 1 is in the protocol's code, which may still do something before that answer
    let posted = false;
    const posting = schedule.crossing(2, async () => (posted = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect([stalls, posted]).toEqual([0, false]);
    void schedule.sampleTurn(1); // lane 1 is done with it: nothing goes on before the answer
    await posting;
    expect([stalls, posted]).toEqual([1, true]);
    schedule.finish(0);
    expect(stalls).toBe(1); // lane 1 still plays
    schedule.finish(1);
    expect(stalls).toBe(2); // only lane 2's batch is left to wait for
    let alone = 0;
    const single = new LaneSchedule(1, () => alone++);
    await single.crossing(0, async () => 0);
    expect(alone).toBe(1); // the only lane has posted: nothing else can go on
  });
});

describe("runSandboxedEpisodes in lanes", () => {
  it("gives the native trajectories for a policy that draws per request, with lanes taking turns in order", async () => {
    const native = await runEpisodes(
      multiTurn(),
      grouped.map(({ seed }) => ({ session: new EnvironmentSession(dice), seed })),
      scripted(3),
    );
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    for (const options of [{ lanes: 1 }, { lanes: 2 }, { lanes: 2, overlap: false }, { lanes: 3 }]) {
      const calls: number[][] = [];
      expect(await runSandboxedEpisodes(multiTurn(), pool, grouped, scripted(3, calls), options)).toEqual(native);
      // Each call is one lane's live episodes (global indices, ascending); lanes alternate.
      const laneOf = (episode: number) => laneStarts(grouped, options.lanes).filter((cut) => cut <= episode).length - 1;
      for (const call of calls) {
        expect(new Set(call.map(laneOf)).size).toBe(1);
        expect(call).toEqual([...call].sort((a, b) => a - b));
      }
      if (options.lanes === 2) expect(calls.slice(0, 4).map((call) => laneOf(call[0]!))).toEqual([0, 1, 0, 1]);
    }
    expect(native.some((t) => t.invalidActions > 0) && native.some((t) => t.turns.length > 2)).toBe(true);
    pool.dispose();
  });

  it("posts each lane's resets and steps before the next lane samples, so the sandbox works while it does", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    const events = logCrossings(pool, (ops) => `${String(ops[0]![0])} ${String(ops[0]![1])}`);
    const policy = scripted(4);
    await runSandboxedEpisodes(multiTurn(), pool, grouped, async (requests) => {
      events.push(`act ${requests[0]!.episode}`);
      return policy(requests);
    });
    expect(events.slice(0, 8)).toEqual(["reset 0", "reset 12", "act 0", "step 0", "act 12", "step 12", "act 0", "step 0"]);
    pool.dispose();
  });

  it("resets every lane after the first in one crossing, which runs while the first lane samples", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    const events = logCrossings(pool, (ops) => `${String(ops[0]![0])} ${String(ops[0]![1])} ×${ops.length}`);
    const policy = scripted(4);
    const played = await runSandboxedEpisodes(
      multiTurn(),
      pool,
      grouped,
      async (requests) => {
        events.push(`act ${requests[0]!.episode}`);
        return policy(requests);
      },
      { lanes: 3 },
    );
    // Three lanes of 8: lane 0's resets, then lanes 1 and 2's together; each lane's steps go while the next samples.
    expect(events.slice(0, 9)).toEqual(["reset 0 ×8", "reset 8 ×16", "act 0", "step 0 ×8", "act 8", "step 8 ×8", "act 16", "step 16 ×8", "act 0"]);
    const native = await runEpisodes(
      multiTurn(),
      grouped.map(({ seed }) => ({ session: new EnvironmentSession(dice), seed })),
      scripted(4),
    );
    expect(played).toEqual(native);
    pool.dispose();
  });

  it("plays a single-turn protocol in four lanes and a multi-turn one in two unless told", async () => {
    expect(defaultLanes(singleTurn())).toBe(4);
    expect(defaultLanes(multiTurn())).toBe(2);
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    const calls: number[][] = [];
    const played = await runSandboxedEpisodes(singleTurn(), pool, grouped, scripted(5, calls));
    expect(calls.map((call) => call[0])).toEqual(laneStarts(grouped, 4));
    expect(played).toEqual(
      await runEpisodes(
        singleTurn(),
        grouped.map(({ seed }) => ({ session: new EnvironmentSession(dice), seed })),
        scripted(5),
      ),
    );
    pool.dispose();
  });

  it("samples the same tokens and logprobs overlapped as not, with a real model", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    const play = async (overlap: boolean, temperature: number) =>
      runSandboxedEpisodes(multiTurn("agent", "last"), pool, grouped, policyActor(tinyPolicy(), { maxTokens: 2, temperature, stop: [] }), {
        lanes: 2,
        overlap,
      });
    for (const temperature of [1, 0]) {
      const overlapped = await play(true, temperature);
      expect(await play(false, temperature)).toEqual(overlapped);
      expect(overlapped.flatMap((t) => t.turns.map((turn) => turn.actionTokens.length)).every((n) => n === 2)).toBe(true);
    }
    pool.dispose();
  });

  it("ends episodes that outgrow the context while another lane is being stepped", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    // Full history grows each turn; the cut falls at different turns in different episodes.
    const fitsContext = (messages: { content: string }[]) => messages.reduce((n, m) => n + m.content.length, 0) < 100 + (messages.length % 3) * 20;
    const native = await runEpisodes(
      multiTurn(),
      grouped.map(({ seed }) => ({ session: new EnvironmentSession(dice), seed })),
      scripted(9),
      { fitsContext },
    );
    expect(native.some((t) => t.truncated && t.turns.length > 0)).toBe(true);
    expect(await runSandboxedEpisodes(multiTurn(), pool, grouped, scripted(9), { fitsContext })).toEqual(native);
    pool.dispose();
  });

  it("fails with the first lane's error once every lane has stopped", async () => {
    const pool = await createPool({
      step: `if (action === "boom") throw new Error("boom at " + state.n); return { state: { n: state.n + 1 }, observation: "n", reward: 0, done: state.n >= 3 };`,
    });
    const starts = Array.from({ length: 8 }, (_, i) => ({ seed: i }));
    let calls = 0;
    let sampling = 0;
    const act = async (requests: ActRequest[]) => {
      const call = ++calls;
      sampling++;
      await new Promise((resolve) => setImmediate(resolve));
      sampling--;
      return requests.map((request) => ({ text: call === 3 && request.episode === 0 ? "boom" : "go" }));
    };
    await expect(runSandboxedEpisodes(multiTurn(), pool, starts, act)).rejects.toThrow("boom at 1");
    // Nothing outlives it: no lane sampling, no batch in flight, and no lane that samples again later.
    expect(sampling).toBe(0);
    expect(pool.awaitingAnswer).toBe(false);
    const callsAtFailure = calls;
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toBe(callsAtFailure);
    pool.dispose();
  });

  it("keeps a script alive while it awaits only the sandbox's answer", () => {
    const script = fileURLToPath(new URL("./fixtures/await-only-the-sandbox.ts", import.meta.url));
    const output = execFileSync(process.execPath, ["--import", "tsx", script], { encoding: "utf8", timeout: 30_000 });
    const native = new EnvironmentSession(dice);
    const observation = native.reset(3);
    expect(JSON.parse(output.trim())).toEqual({ observation, reward: native.step("4").reward });
  });

  it("resets the next batch's episodes while this one's first lane samples; that batch then crosses only to step", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    const events = logCrossings(pool, (ops) => `${String(ops[0]![0])} ${String(ops[0]![1])} ×${ops.length}`);
    const logged = (policy: ReturnType<typeof scripted>) => async (requests: ActRequest[]) => {
      events.push(`act ${requests[0]!.episode}`);
      return policy(requests);
    };
    const next = grouped.map(({ seed }) => ({ seed: seed + 100 }));
    const native = async (starts: { seed: number }[], seed: number) =>
      runEpisodes(
        multiTurn(),
        starts.map(({ seed: s }) => ({ session: new EnvironmentSession(dice), seed: s })),
        scripted(seed),
      );
    // The first batch: its own resets in two crossings, the second with the next batch's (in the other bank).
    expect(await runSandboxedEpisodes(multiTurn(), pool, grouped, logged(scripted(3)), { next })).toEqual(await native(grouped, 3));
    expect(events.slice(0, 3)).toEqual(["reset 0 ×12", `reset 12 ×${12 + 24}`, "act 0"]);
    // The next batch: no resets of its own; the policy is asked at once.
    events.length = 0;
    expect(await runSandboxedEpisodes(multiTurn(), pool, next, logged(scripted(4)))).toEqual(await native(next, 4));
    expect(events.slice(0, 3)).toEqual(["act 0", `step ${bankSlots} ×12`, "act 12"]);
    expect(events.some((event) => event.startsWith("reset"))).toBe(false);
    pool.dispose();
  });

  it("keeps prepared episodes through a batch of other starts, and prepares a single-turn batch in tapering lanes", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    const events = logCrossings(pool, (ops) => `${String(ops[0]![0])} ${String(ops[0]![1])} ×${ops.length}`);
    const next = grouped.map(({ seed }) => ({ seed: seed + 100 }));
    const other = grouped.map(({ seed }) => ({ seed: seed + 200 }));
    const native = async (starts: { seed: number }[], seed: number) =>
      runEpisodes(
        singleTurn(),
        starts.map(({ seed: s }) => ({ session: new EnvironmentSession(dice), seed: s })),
        scripted(seed),
      );
    await runSandboxedEpisodes(singleTurn(), pool, grouped, scripted(3), { next });
    // An evaluation in between plays other starts: it resets its own, in the bank the prepared ones are not in.
    events.length = 0;
    expect(await runSandboxedEpisodes(singleTurn(), pool, other, scripted(5))).toEqual(await native(other, 5));
    expect(events[0]).toBe("reset 0 ×4");
    // The prepared batch still finds its episodes, and plays them in lanes of 12, 8 and 4 (9 : 5 : 2).
    events.length = 0;
    const calls: number[][] = [];
    expect(await runSandboxedEpisodes(singleTurn(), pool, next, scripted(4, calls))).toEqual(await native(next, 4));
    expect(events).toEqual([`step ${bankSlots} ×12`, `step ${bankSlots + 12} ×8`, `step ${bankSlots + 20} ×4`]);
    expect(calls.map((call) => call[0])).toEqual([0, 12, 20]);
    // Played again, those starts are no longer prepared: their resets cross as usual.
    events.length = 0;
    await runSandboxedEpisodes(singleTurn(), pool, next, scripted(4));
    expect(events[0]).toMatch(/^reset /);
    pool.dispose();
  });

  it("names episodes by their place in the batch in errors, whichever bank they play in", async () => {
    const pool = await createPool({
      step: `if (action === "boom") throw new Error("boom"); return { state: { n: state.n + 1 }, observation: "n", reward: 0, done: true };`,
    });
    const starts = Array.from({ length: 8 }, (_, i) => ({ seed: i }));
    const next = Array.from({ length: 8 }, (_, i) => ({ seed: 10 + i }));
    await runSandboxedEpisodes(singleTurn(), pool, starts, async (requests) => requests.map(() => ({ text: "go" })), { next });
    const act = async (requests: ActRequest[]) => requests.map((request) => ({ text: request.episode === 5 ? "boom" : "go" }));
    await expect(runSandboxedEpisodes(singleTurn(), pool, next, act)).rejects.toThrow("step 1 of episode 5 (seed 15) threw Error: boom");
    pool.dispose();
  });

  it("fails the batch whose crossing resets the next one's episodes when one of those resets fails", async () => {
    const pool = await createPool({ reset: `if (context.seed === 13) throw new Error("no episode 13"); return { state: { n: 0 }, observation: "start" };` });
    const starts = Array.from({ length: 8 }, (_, i) => ({ seed: i >> 1 }));
    const next = Array.from({ length: 8 }, (_, i) => ({ seed: 10 + (i >> 1) }));
    await expect(runSandboxedEpisodes(multiTurn(), pool, starts, async (requests) => requests.map(() => ({ text: "go" })), { next })).rejects.toThrow(
      "reset of episode 6 (seed 13) threw Error: no episode 13",
    );
    pool.dispose();
  });

  it("rejects a lane count that is not a whole number", async () => {
    const pool = await SandboxedEnvironmentPool.create(diceFiles);
    await expect(runSandboxedEpisodes(multiTurn(), pool, grouped, scripted(1), { lanes: 1.5 })).rejects.toThrow(
      "lanes must be a whole number of at least 1; got 1.5",
    );
    pool.dispose();
  });
});
