/**
 * The playground's backend: "auto" runs WebGPU only on a GPU's adapter and skips a software one (Chromium's
 * SwiftShader, as headless Chromium offers with --enable-unsafe-webgpu, decodes far slower than WASM); by hand
 * either backend is taken where it exists, and a missing adapter says why.
 */
import { describe, expect, it } from "vitest";
import { chooseBackend, parseBackendPreference, probeOfAdapter } from "@/components/playground/backend-choice";

// What Chromium 156 reports for its software adapter, read in this repository's headless Chromium.
const swiftShader = { info: { vendor: "google", architecture: "swiftshader", device: "", description: "", isFallbackAdapter: true } };

describe("the playground's backend", () => {
  it("tells a software adapter from a GPU's, by the fallback flag or by a CPU renderer's name", () => {
    expect(probeOfAdapter(swiftShader)).toEqual({ kind: "software", name: "google swiftshader" });
    expect(probeOfAdapter({ info: { vendor: "mesa", architecture: "", description: "llvmpipe (LLVM 15.0.6, 256 bits)" } }).kind).toBe("software");
    expect(probeOfAdapter({ isFallbackAdapter: true, info: { vendor: "microsoft" } }).kind).toBe("software");
    expect(probeOfAdapter({ info: { vendor: "nvidia", architecture: "hopper", isFallbackAdapter: false } })).toEqual({
      kind: "hardware",
      name: "nvidia hopper",
    });
    expect(probeOfAdapter({})).toEqual({ kind: "hardware", name: "an unnamed adapter" });
  });

  it("skips a software adapter when automatic, and takes WebGPU on a GPU", () => {
    const software = probeOfAdapter(swiftShader);
    expect(chooseBackend("auto", software)).toEqual({ kind: "wasm", why: "WebGPU's only adapter runs in software (google swiftshader), slower than WASM" });
    expect(chooseBackend("auto", { kind: "hardware", name: "nvidia hopper" })).toEqual({ kind: "webgpu", why: null });
    expect(chooseBackend("auto", { kind: "none", reason: "no WebGPU adapter" })).toEqual({ kind: "wasm", why: "no WebGPU adapter" });
  });

  it("takes the backend picked by hand where it exists, and says why when it does not", () => {
    const software = probeOfAdapter(swiftShader);
    expect(chooseBackend("webgpu", software)).toEqual({ kind: "webgpu", why: "chosen by hand; its adapter runs in software (google swiftshader)" });
    expect(chooseBackend("webgpu", { kind: "hardware", name: "nvidia hopper" })).toEqual({ kind: "webgpu", why: null });
    expect(chooseBackend("webgpu", { kind: "none", reason: "this browser has no WebGPU" })).toEqual({
      kind: "wasm",
      why: "WebGPU was asked for, but this browser has no WebGPU",
    });
    expect(chooseBackend("wasm", { kind: "hardware", name: "nvidia hopper" })).toEqual({ kind: "wasm", why: "chosen by hand" });
  });

  it("reads a preference from the address or storage, anything unknown as automatic", () => {
    expect(parseBackendPreference("wasm")).toBe("wasm");
    expect(parseBackendPreference("webgpu")).toBe("webgpu");
    expect(parseBackendPreference("WebGPU")).toBe("auto");
    expect(parseBackendPreference(null)).toBe("auto");
  });
});
