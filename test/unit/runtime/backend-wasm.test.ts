import { describe, expect, it } from "vitest";
import { initBackend } from "@/server/runtime/backend";
import { expectSameAsTypeScriptEngine } from "./fixtures/engine-agreement";

describe("backend choice (tfjs wasm)", () => {
  it("loads the wasm backend and computes what the TypeScript engine computes", async () => {
    const { capabilities, engine } = await initBackend({ prefer: "wasm" });
    expect(capabilities.backend).toBe("wasm");
    expectSameAsTypeScriptEngine(engine, "full");
    expectSameAsTypeScriptEngine(engine, "lora");
  });

  it("auto keeps the backend this process already chose", async () => {
    expect((await initBackend({ prefer: "auto" })).capabilities.backend).toBe("wasm");
  });
});
