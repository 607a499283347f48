import { describe, expect, it, vi } from "vitest";
import { parseServerEnv } from "@/server/env";

/** A fresh copy of the runtime (backend choice and kernel are made once per module instance). */
async function freshRuntime() {
  vi.resetModules();
  const [backend, simd, native] = await Promise.all([import("@/server/runtime/backend"), import("@/lib/model/simd-gemm"), import("@/native/kernel")]);
  return { initBackend: backend.initBackend, simdGemm: simd.simdGemm, loadNativeKernel: native.loadNativeKernel };
}

describe("the js backend's matrix kernel", () => {
  it("auto takes the native kernel where it builds, else the WebAssembly one with the reason in skipped", async () => {
    const { initBackend, simdGemm, loadNativeKernel } = await freshRuntime();
    const native = await loadNativeKernel();
    const { capabilities } = await initBackend({ prefer: "js", threads: 1, kernel: "auto" });
    if (native.kernel) {
      expect(capabilities.kernel).toBe(`native-${native.isa}`);
      expect(simdGemm!.native).toBe(native.kernel);
      expect(capabilities.skipped).toEqual([]);
    } else {
      expect(capabilities.kernel).toBe("wasm-simd");
      expect(simdGemm!.native).toBeNull();
      expect(capabilities.skipped).toEqual([{ backend: "js", kernel: "native", reason: native.reason }]);
    }
  });

  it("wasm keeps the WebAssembly kernel (the fallback), with the helper thread a WebAssembly worker", async () => {
    const { initBackend, simdGemm } = await freshRuntime();
    const { capabilities } = await initBackend({ prefer: "js", threads: 2, kernel: "wasm" });
    expect(capabilities).toMatchObject({ backend: "js", kernel: "wasm-simd", threads: 2, skipped: [] });
    expect(simdGemm!.native).toBeNull();
    const { stopGemmHelper } = await import("@/server/runtime/gemm-threads");
    await stopGemmHelper();
  });

  it("native is an error naming why when it cannot be used, and unknown kernels are refused", async () => {
    const { initBackend, loadNativeKernel } = await freshRuntime();
    await expect(initBackend({ prefer: "js", kernel: "gpu" as "auto" })).rejects.toThrow("unknown kernel 'gpu'; expected one of auto, native, wasm");
    const native = await loadNativeKernel();
    if (native.kernel) {
      expect((await initBackend({ prefer: "js", threads: 1, kernel: "native" })).capabilities.kernel).toBe(`native-${native.isa}`);
    } else {
      await expect(initBackend({ prefer: "js", threads: 1, kernel: "native" })).rejects.toThrow(`kernel 'native' is not available: ${native.reason}`);
    }
  });

  it("TINKERLAB_KERNEL accepts auto, native or wasm", () => {
    expect(parseServerEnv({}).TINKERLAB_KERNEL).toBe("auto");
    expect(parseServerEnv({ TINKERLAB_KERNEL: "wasm" }).TINKERLAB_KERNEL).toBe("wasm");
    expect(() => parseServerEnv({ TINKERLAB_KERNEL: "avx" })).toThrow(/TINKERLAB_KERNEL="avx": .*auto.*native.*wasm/);
  });
});
