/**
 * Which backend the playground's model runs on. WebGPU is fast on a real GPU, but a browser without one may still
 * offer an adapter: a software rasteriser (Chromium's SwiftShader, Mesa's llvmpipe or lavapipe, Windows' WARP) that
 * runs the shaders on the CPU, where onnxruntime-web's WebAssembly kernels decode far faster (tiny-base, headless
 * Chromium on 2 cores: docs/BROWSER.md). So "auto" takes WebGPU only on a hardware adapter; the user may still pick
 * either by hand. "server" decodes nowhere in the browser: the prompt goes to the workbench's `/v1/chat/completions`,
served by an inference job on a worker (server-generation.ts).
 */

export const BACKEND_PREFERENCES = ["auto", "webgpu", "wasm", "server"] as const;
export type BackendPreference = (typeof BACKEND_PREFERENCES)[number];
/** The preferences that run the model in this browser (onnxruntime-web), which its inference worker takes. */
export type BrowserBackend = Exclude<BackendPreference, "server">;

/** Where the preference lives: the page's `?backend=` (a link says which), else this browser's last choice. */
export const BACKEND_PARAM = "backend";
export const BACKEND_STORAGE_KEY = "tinkerlab.playground.backend";

/** A preference from the URL or storage; anything else (absent, misspelt) is "auto". */
export function parseBackendPreference(text: string | null | undefined): BackendPreference {
  return BACKEND_PREFERENCES.includes(text as BackendPreference) ? (text as BackendPreference) : "auto";
}

/** What WebGPU offers here: no adapter (and why), or an adapter on a GPU or in software, named. */
export type WebGpuProbe = { kind: "none"; reason: string } | { kind: "hardware" | "software"; name: string };

/** The parts of a GPUAdapter (and its GPUAdapterInfo) read here; older browsers put isFallbackAdapter on the adapter. */
export interface AdapterLike {
  isFallbackAdapter?: boolean;
  info?: { vendor?: string; architecture?: string; device?: string; description?: string; isFallbackAdapter?: boolean };
}

/** Adapters that are CPU renderers whatever they call themselves. */
const SOFTWARE_ADAPTER = /swiftshader|llvmpipe|lavapipe|softpipe|software|basic render driver|\bwarp\b/i;

/** An adapter as a probe: software when the browser says it is a fallback adapter or its name is a CPU renderer's. */
export function probeOfAdapter(adapter: AdapterLike): WebGpuProbe {
  const info = adapter.info ?? {};
  const name = [info.vendor, info.architecture, info.description].filter((part) => part).join(" ") || "an unnamed adapter";
  const software = info.isFallbackAdapter === true || adapter.isFallbackAdapter === true || SOFTWARE_ADAPTER.test(name);
  return { kind: software ? "software" : "hardware", name };
}

/** The backend to create the session on, and why when it is not the one the preference would suggest first. */
export function chooseBackend(preference: BrowserBackend, webGpu: WebGpuProbe): { kind: "webgpu" | "wasm"; why: string | null } {
  if (preference === "wasm") return { kind: "wasm", why: "chosen by hand" };
  if (webGpu.kind === "none") return { kind: "wasm", why: preference === "webgpu" ? `WebGPU was asked for, but ${webGpu.reason}` : webGpu.reason };
  if (preference === "webgpu")
    return { kind: "webgpu", why: webGpu.kind === "software" ? `chosen by hand; its adapter runs in software (${webGpu.name})` : null };
  if (webGpu.kind === "software") return { kind: "wasm", why: `WebGPU's only adapter runs in software (${webGpu.name}), slower than WASM` };
  return { kind: "webgpu", why: null };
}
