/**
 * Backend choice, made once per process and reported in one frozen capability object that the rest of the
 * runtime reads instead of probing again.
 *
 *   js        the pure-TypeScript engine (lib/model/gpt.ts): the fastest on CPU for the model sizes here,
 *             measured in docs/RUNTIME.md
 *   node-gpu  @tensorflow/tfjs-node-gpu, used when it loads and a GPU is visible
 *   node      @tensorflow/tfjs-node (native TensorFlow on the CPU)
 *   wasm      @tensorflow/tfjs-backend-wasm
 *   cpu       @tensorflow/tfjs-backend-cpu (tfjs's pure-JS kernels)
 *
 * `auto` tries node-gpu and otherwise takes js. The native packages are optional and loaded with a dynamic
 * import, so a machine without them simply skips them. An explicit choice that cannot load is an error: a
 * user who asked for a backend should not silently get another.
 *
 * The js engine's matrix products run on one of these kernels (`kernel`):
 *   native    native/kernel.ts: AVX-512 or AVX2 with FMA, compiled with g++ on first use (auto takes it when
 *             that works and keeps the WebAssembly kernel otherwise, noting why in `skipped`)
 *   wasm      the WebAssembly SIMD kernel (lib/model/simd-gemm.ts)
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { dirname } from "node:path";
import type { Engine } from "@/lib/model/engine";
import { jsEngine } from "@/lib/model/gpt";
import { simdAvailable } from "@/lib/model/kernels";
import { simdGemm } from "@/lib/model/simd-gemm";
import { loadNativeKernel } from "@/native/kernel";
import { serverEnv } from "../env";
import { startGemmHelper } from "./gemm-threads";
import { createTfjsEngine } from "./tfjs-engine";

export const backendNames = ["js", "node-gpu", "node", "wasm", "cpu"] as const;
export type BackendName = (typeof backendNames)[number];
export type BackendPreference = BackendName | "auto";
export const kernelPreferences = ["auto", "native", "wasm"] as const;
export type KernelPreference = (typeof kernelPreferences)[number];
/** The js engine's matrix kernel: native (by instruction set), WebAssembly SIMD, or plain loops without SIMD. */
type KernelName = "native-avx512" | "native-avx2" | "wasm-simd" | "loops";

export interface RuntimeCapabilities {
  /** the backend in use */
  readonly backend: BackendName;
  /** what was asked for */
  readonly requested: BackendPreference;
  /** true when computation runs on a GPU */
  readonly gpu: boolean;
  /** js: whether the WebAssembly SIMD kernel is in use */
  readonly simd: boolean;
  /** js: threads that compute one matrix product (1, or 2 with the helper thread) */
  readonly threads: number;
  /** js: the kernel that runs the matrix products; null for the tfjs backends */
  readonly kernel: KernelName | null;
  /**
   * the backends tried before this one, and why each was passed over; an entry with `kernel: "native"` is the
   * native kernel passed over within js (the WebAssembly kernel runs instead)
   */
  readonly skipped: readonly { readonly backend: BackendName; readonly kernel?: "native"; readonly reason: string }[];
}

export interface RuntimeBackend {
  readonly capabilities: RuntimeCapabilities;
  readonly engine: Engine;
}

let chosen: RuntimeBackend | null = null;

/**
 * Chooses the backend (once; later calls return the same choice, and asking for a different one is an error,
 * because tfjs's backend is global to the process).
 */
export async function initBackend(
  options: {
    prefer?: BackendPreference;
    /** js: 2 adds a helper thread to large matrix products; default 2 where the machine has two or more cores */
    threads?: number;
    /** js: the matrix kernel (see above); default TINKERLAB_KERNEL from the environment module */
    kernel?: KernelPreference;
  } = {},
): Promise<RuntimeBackend> {
  const requested = options.prefer ?? "auto";
  const threads = options.threads ?? Math.min(2, availableParallelism());
  if (threads !== 1 && threads !== 2) throw new Error(`threads must be 1 or 2, got ${threads}`);
  if (requested !== "auto" && !(backendNames as readonly string[]).includes(requested)) {
    throw new Error(`unknown backend '${requested}'; expected auto or one of ${backendNames.join(", ")}`);
  }
  if (options.kernel !== undefined && !(kernelPreferences as readonly string[]).includes(options.kernel)) {
    throw new Error(`unknown kernel '${options.kernel}'; expected one of ${kernelPreferences.join(", ")}`);
  }
  if (chosen) {
    if (requested === "auto" || requested === chosen.capabilities.backend) return chosen;
    throw new Error(`backend already chosen as '${chosen.capabilities.backend}' in this process; cannot switch to '${requested}'`);
  }
  const candidates: BackendName[] = requested === "auto" ? ["node-gpu", "js"] : [requested];
  const skipped: { backend: BackendName; reason: string }[] = [];
  const kernelRequested = options.kernel ?? serverEnv().TINKERLAB_KERNEL;
  for (const backend of candidates) {
    let loaded: Awaited<ReturnType<typeof load>>;
    try {
      loaded = await load(backend);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      if (requested !== "auto") throw new Error(`backend '${backend}' is not available: ${reason}`);
      skipped.push({ backend, reason });
      continue;
    }
    if (backend !== "js" && kernelRequested === "native") {
      throw new Error(`kernel 'native' runs the js backend's products; the backend chosen is '${backend}'`);
    }
    // The kernel goes in before the helper thread starts: a native kernel brings a native helper.
    const kernel = backend === "js" ? await chooseKernel(kernelRequested, skipped) : null;
    const helper = backend === "js" && threads === 2 && startGemmHelper();
    chosen = Object.freeze({
      capabilities: Object.freeze({
        backend,
        requested,
        gpu: loaded.gpu,
        simd: backend === "js" && simdAvailable(),
        threads: helper ? 2 : 1,
        kernel,
        skipped: Object.freeze(skipped.map((s) => Object.freeze(s))),
      }),
      engine: loaded.engine,
    });
    return chosen;
  }
  throw new Error(`no backend could be loaded: ${skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ")}`);
}

/** Puts the native kernel in place when asked for and available; an explicit `native` that cannot load is an error. */
async function chooseKernel(requested: KernelPreference, skipped: RuntimeCapabilities["skipped"][number][]): Promise<KernelName> {
  if (requested !== "wasm") {
    const native = simdGemm?.sharing ? await loadNativeKernel() : { kernel: null, reason: "no shared WebAssembly memory to work in" };
    if (native.kernel) {
      simdGemm!.setNative(native.kernel);
      return `native-${native.isa}`;
    }
    if (requested === "native") throw new Error(`kernel 'native' is not available: ${native.reason}`);
    skipped.push({ backend: "js", kernel: "native", reason: native.reason });
  }
  return simdAvailable() ? "wasm-simd" : "loops";
}

/** The backend chosen by initBackend, or null before it has run. */
export function currentBackend(): RuntimeBackend | null {
  return chosen;
}

// Package names held in variables so bundlers and type-checkers do not insist that the optional ones exist.
const optionalPackage = {
  "node-gpu": "@tensorflow/tfjs-node-gpu",
  node: "@tensorflow/tfjs-node",
};

/**
 * tfjs-core with the gradient functions registered (the umbrella `@tensorflow/tfjs` package would do this).
 * tfjs-core ships those only as ES modules whose imports omit file extensions, which Node's own loader refuses
 * (bundlers and vitest accept them); for Node, a resolve hook limited to files inside @tensorflow packages
 * supplies the missing ".js". Gradients and the engine live in tfjs's global registry, so they serve whichever
 * copy of tfjs-core the backends use.
 */
async function loadTfjsCore() {
  // Registered before the first import: a failed import stays failed in Node's module cache.
  const { register } = await import("node:module");
  register(`data:text/javascript,${encodeURIComponent(extensionlessResolveHook)}`, import.meta.url);
  const tf = await import("@tensorflow/tfjs-core");
  await import("@tensorflow/tfjs-core/dist/register_all_gradients.js");
  return tf;
}

const extensionlessResolveHook = `
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (error) {
    if (!specifier.startsWith(".") || !String(context.parentURL).includes("/@tensorflow/")) throw error;
    for (const suffix of [".js", "/index.js"]) {
      try {
        return await next(specifier + suffix, context);
      } catch {}
    }
    throw error;
  }
}
`;

async function load(backend: BackendName): Promise<{ engine: Engine; gpu: boolean }> {
  switch (backend) {
    case "js":
      return { engine: jsEngine, gpu: false };
    case "node-gpu":
    case "node": {
      const tf = await import(/* @vite-ignore */ optionalPackage[backend]).catch(() => {
        throw new Error(`${optionalPackage[backend]} is not installed or failed to load`);
      });
      await tf.ready();
      // tfjs-node-gpu quietly runs on the CPU when CUDA finds no device; the driver's control node tells us.
      const gpu = backend === "node-gpu" && existsSync("/dev/nvidiactl");
      if (backend === "node-gpu" && !gpu) throw new Error("tfjs-node-gpu loaded but no GPU is visible");
      return { engine: createTfjsEngine(tf, backend), gpu };
    }
    case "wasm": {
      const tf = await loadTfjsCore();
      const wasm = await import("@tensorflow/tfjs-backend-wasm");
      // In Node the .wasm binaries are read from the package's dist folder.
      const dist = dirname(createRequire(import.meta.url).resolve("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm"));
      wasm.setWasmPaths(dist + "/");
      if (!(await tf.setBackend("wasm"))) throw new Error("tfjs could not start the wasm backend");
      await tf.ready();
      return { engine: createTfjsEngine(tf, "wasm"), gpu: false };
    }
    case "cpu": {
      const tf = await loadTfjsCore();
      await import("@tensorflow/tfjs-backend-cpu");
      if (!(await tf.setBackend("cpu"))) throw new Error("tfjs could not start the cpu backend");
      await tf.ready();
      return { engine: createTfjsEngine(tf, "cpu"), gpu: false };
    }
  }
}
