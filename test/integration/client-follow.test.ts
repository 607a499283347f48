/**
 * The typed client's follow (lib/client `runs.follow`, what `tinkerlab run` shows its bar from) looks at a run again
 * and again with one AbortSignal: however many looks, it leaves no listener behind on the signal, so a long follow
 * never prints Node's MaxListenersExceededWarning into the bar.
 */
import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET, POST } from "@/app/api/trpc/[trpc]/route";
import { createClient } from "@/lib/client";
import { setDatabase } from "@/server/db";
import { openTestDatabase } from "./support/database";

process.env.TINKERLAB_AUTH = "local";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
  setDatabase(db.handle);
});
afterAll(() => db.close());

/** A client whose requests reach the server's tRPC route in-process. */
const client = () =>
  createClient({
    url: "http://127.0.0.1:3000",
    fetch: async (input, init) => {
      const request = new Request(input, init);
      return (request.method === "GET" ? GET : POST)(request);
    },
  });

describe("following a run with the typed client", () => {
  it("leaves no listener on its signal after many looks, and warns of none", async () => {
    const tl = client();
    const { id } = await tl.experiments.create({ name: "followed", template: "arithmetic" });
    const { runId } = await tl.runs.launch(id); // no worker here: it stays queued, looked at again and again
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    const controller = new AbortController();
    const listeners: number[] = [];
    let looks = 0;
    try {
      for await (const update of tl.runs.follow(runId, { intervalMs: 1, signal: controller.signal })) {
        expect(update.run.status).toBe("queued");
        listeners.push(getEventListeners(controller.signal, "abort").length);
        if (++looks === 20) controller.abort();
      }
      // A warning is emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(looks).toBe(20);
    expect(listeners).toEqual(Array(20).fill(0));
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([]);
  });
});
