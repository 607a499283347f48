/**
 * The browser's idempotency keys (components/trpc/keyed-mutation.ts): a double click on Launch, or a click again
 * after an answer was lost, sends the same key, so the server launches once; a launch after a success, or with
 * another input, is a new request with a new key.
 */
import { describe, expect, it } from "vitest";
import { ActionKeys } from "@/components/trpc/keyed-mutation";

describe("ActionKeys", () => {
  it("gives every try of one action the same key, and a new one after a success", () => {
    const keys = new ActionKeys();
    const first = keys.keyFor({ experimentId: "exp_1" });
    expect(first).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys.keyFor({ experimentId: "exp_1" })).toBe(first);
    keys.done();
    expect(keys.keyFor({ experimentId: "exp_1" })).not.toBe(first);
  });

  it("gives another input a new key, so a corrected form is never refused as the same key with different input", () => {
    const keys = new ActionKeys();
    const first = keys.keyFor({ name: "sums", testShare: 0.2 });
    const corrected = keys.keyFor({ name: "sums", testShare: 0.1 });
    expect(corrected).not.toBe(first);
    expect(keys.keyFor({ name: "sums", testShare: 0.1 })).toBe(corrected);
  });
});
