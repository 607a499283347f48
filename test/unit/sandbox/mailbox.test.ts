/**
 * The mailbox: the memory a crossing's batch and answer travel in between the host thread and the sandbox's
 * thread (server/sandbox/mailbox.ts), and the port it falls back to for what does not fit.
 */
import { MessagePort } from "node:worker_threads";
import { describe, expect, it, vi } from "vitest";
import * as mailbox from "@/server/sandbox/mailbox";
import { SandboxedEnvironmentPool } from "@/server/sandbox";
import type { SandboxLimitsInput } from "@/server/sandbox/limits";

const poolOf = (source: string, limits?: SandboxLimitsInput) => SandboxedEnvironmentPool.create({ files: { "environment.ts": source } }, { limits });

describe("the mailbox", () => {
  it("gives every slot of its header its own bytes, and its areas their own", () => {
    const int32 = ["ANSWERED", "CURRENT_OP", "REQUESTED", "REQUEST_BYTES", "REQUEST_COUNT", "UNIFORM_BUDGET", "ANSWER_BYTES", "ANSWER_COUNT"] as const;
    const float64 = ["OP_STARTED_AT", "OP_CPU_AT", "BUDGET_MS", "ANSWER_MEMORY_MB"] as const;
    const ranges: { name: string; from: number; to: number }[] = [
      ...int32.map((name) => ({ name, from: mailbox[name] * 4, to: mailbox[name] * 4 + 4 })),
      ...float64.map((name) => ({ name, from: mailbox[name] * 8, to: mailbox[name] * 8 + 8 })),
    ];
    const views = mailbox.sharedViews(new SharedArrayBuffer(mailbox.sharedBytes));
    const header = views.control.byteLength;
    for (const range of ranges) expect(range.to, range.name).toBeLessThanOrEqual(Math.min(header, views.clock.byteLength));
    ranges.push({ name: "numbers", from: views.numbers.byteOffset, to: views.numbers.byteOffset + views.numbers.byteLength });
    ranges.push({ name: "text", from: views.text.byteOffset, to: views.text.byteOffset + views.text.byteLength });
    for (const a of ranges) for (const b of ranges) if (a !== b) expect(a.to <= b.from || b.to <= a.from, `${a.name} overlaps ${b.name}`).toBe(true);
    expect(views.text.byteOffset + views.text.byteLength).toBe(mailbox.sharedBytes);
  });

  it("writes text as UTF-8 and says when it does not fit", () => {
    const text = mailbox.sharedViews(new SharedArrayBuffer(mailbox.sharedBytes)).text;
    const value = JSON.stringify(["é😀", "a\ud800b"]);
    const bytes = mailbox.writeText(text, value);
    expect(mailbox.readText(text, bytes)).toBe(value);
    expect(mailbox.writeText(text, "x".repeat(text.length))).toBe(text.length);
    expect(mailbox.writeText(text, "x".repeat(text.length + 1))).toBe(mailbox.ON_PORT);
    // fewer units than bytes, more bytes than fit: three bytes each
    expect(mailbox.writeText(text, "€".repeat(text.length / 2))).toBe(mailbox.ON_PORT);
  });

  it("carries lone surrogates exactly in both directions", async () => {
    const pool = await poolOf(`import { defineEnvironment } from "tinkerlab";
export default defineEnvironment({ name: "s", data: { kind: "free" }, systemPrompt: "p", maxTurns: 2,
  reset: () => ({ state: 0, observation: "a\\ud800b\\udfffc😀" }),
  parseAction: (t) => ({ ok: true, action: t }),
  step: (s, a) => ({ state: s + 1, observation: "echo " + a, reward: 0, done: s + 1 >= 2 }) });`);
    try {
      const posted = vi.spyOn(MessagePort.prototype, "postMessage");
      const [reset] = await pool.resetMany([{ slot: 0, seed: 1 }]);
      expect(reset!.observation).toBe("a\ud800b\udfffc😀");
      expect(posted).not.toHaveBeenCalled(); // it crossed in the mailbox
      posted.mockRestore();
      const [step] = await pool.stepMany([{ slot: 0, action: "x\udc00y" }]);
      expect(step!.observation).toBe("echo x\udc00y");
    } finally {
      pool.dispose();
    }
  });

  it("sends a batch with more ops than it holds, each with its own budget, as a message, and answers it alike", async () => {
    // what is left of each episode's CPU (cpuMsPerEpisode) is its budget: after a reset, no two are the same
    const pool = await poolOf(
      `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment({ name: "n", data: { kind: "free" }, systemPrompt: "p", maxTurns: 3,
  reset: ({ seed }) => ({ state: seed, observation: "seed " + seed }),
  parseAction: (t) => ({ ok: true, action: t }),
  step: (s, a) => ({ state: s, observation: a + " at " + s, reward: s % 7, done: false }) });`,
      { cpuMsPerCall: 1_000, cpuMsPerEpisode: 1_000 },
    );
    try {
      const n = mailbox.mailboxOps + 5;
      const starts = Array.from({ length: n }, (_, slot) => ({ slot, seed: slot }));
      expect((await pool.resetMany(starts)).map((reset) => reset.observation)).toEqual(starts.map(({ seed }) => `seed ${seed}`));
      await pool.stepMany(starts.filter(({ slot }) => slot % 2 === 0).map(({ slot }) => ({ slot, action: "a" })));
      const posted = vi.spyOn(MessagePort.prototype, "postMessage");
      const steps = await pool.stepMany(starts.map(({ slot }) => ({ slot, action: "b" })));
      expect(posted).toHaveBeenCalledTimes(1);
      posted.mockRestore();
      expect(steps.map((step) => [step.observation, step.reward])).toEqual(starts.map(({ seed }) => [`b at ${seed}`, seed % 7]));
    } finally {
      pool.dispose();
    }
  });
});
