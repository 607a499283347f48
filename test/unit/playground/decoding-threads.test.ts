/**
 * The playground's runtime decodes a narrow model on one WebAssembly thread (components/playground/decoding-threads.ts):
 * every shipped base, whatever the page could start; a wide model gets the threads the page offers.
 */
import { describe, expect, it } from "vitest";
import { decodingThreads } from "@/components/playground/decoding-threads";
import { BaseModel } from "@/server/runtime/base-model";
import { baseModelDir, builtinBaseNames } from "@/server/bases";

describe("the playground's decoding threads", () => {
  it("are one for every shipped base, even where four could run", () => {
    const names = builtinBaseNames();
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(decodingThreads(BaseModel.load(baseModelDir(name)).config, 4), name).toBe(1);
  });

  it("are the page's for a wide model, and one where the page offers one", () => {
    expect(decodingThreads({ dModel: 768 }, 4)).toBe(4);
    expect(decodingThreads({ dModel: 768 }, 1)).toBe(1);
  });
});
