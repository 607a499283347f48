import { describe, it } from "vitest";
import { simdGemm } from "@/lib/model/simd-gemm";
import { loadNativeKernel } from "@/native/kernel";

// The engine's own tests, run again with the native kernel computing the products: the gradient check against
// finite differences (SIMD "always" sends even its tiny products to the kernel), LoRA, the decoder, the losses, and the
// helper thread (a native one here) giving bit-identical results to one thread.
const native = await loadNativeKernel();
if (native.kernel && simdGemm?.sharing) {
  simdGemm.setNative(native.kernel);
  await import("./gradient-check.test");
  await import("./lora.test");
  await import("./decoder.test");
  await import("../runtime/gemm-threads.test");
  await import("../runtime/losses.test");
  await import("../runtime/chunked-loss.test");
} else {
  describe("the engine on the native kernel", () => {
    it.skip(`skipped: ${native.kernel ? "no shared WebAssembly memory" : native.reason}`, () => {});
  });
}
