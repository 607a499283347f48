import { describe, expect, it } from "vitest";
import { decodeSafetensors, encodeSafetensors } from "@/lib/model/safetensors";

describe("safetensors", () => {
  it("round-trips named float32 tensors and metadata bit for bit", () => {
    const a = Float32Array.from([1.5, -2, Math.PI, 1e-30, -0]);
    const b = Float32Array.from({ length: 6 }, (_, i) => i / 7);
    const bytes = encodeSafetensors(
      new Map([
        ["layer.a", { shape: [5], data: a }],
        ["layer.b", { shape: [2, 3], data: b }],
      ]),
      { note: "test" },
    );
    const { tensors, metadata } = decodeSafetensors(bytes);
    expect(metadata).toEqual({ note: "test" });
    expect(tensors.get("layer.b")!.shape).toEqual([2, 3]);
    expect(Buffer.from(tensors.get("layer.a")!.data.buffer).equals(Buffer.from(a.buffer))).toBe(true);
    expect(Array.from(tensors.get("layer.b")!.data)).toEqual(Array.from(b));
  });

  it("lays the file out as the safetensors spec says: u64 header length, JSON header, aligned data", () => {
    const bytes = encodeSafetensors(new Map([["x", { shape: [2], data: Float32Array.from([1, 2]) }]]));
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect((8 + headerLength) % 8).toBe(0);
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    expect(header.x).toEqual({ dtype: "F32", shape: [2], data_offsets: [0, 8] });
    expect(new Float32Array(bytes.slice(8 + headerLength).buffer)).toEqual(Float32Array.from([1, 2]));
  });

  it("refuses a shape that does not match the data, and a truncated file", () => {
    expect(() => encodeSafetensors(new Map([["x", { shape: [3], data: new Float32Array(2) }]]))).toThrow(/'x' has shape \[3\] \(3 values\) but 2 values/);
    const bytes = encodeSafetensors(new Map([["x", { shape: [4], data: new Float32Array(4) }]]));
    expect(() => decodeSafetensors(bytes.subarray(0, bytes.length - 4))).toThrow(/do not fit/);
  });
});
