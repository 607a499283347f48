import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { decodeSafetensors, encodeSafetensors, readSafetensorsFolder, type TensorMap } from "@/lib/model/safetensors";

/** A safetensors file written by hand: `header` as given, then `data`. */
function rawFile(header: Record<string, unknown>, data: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function halves(bits: number[]): Uint8Array {
  return new Uint8Array(Uint16Array.from(bits).buffer);
}

const roundTrip = (values: number[], dtype: "F16" | "BF16") =>
  Array.from(
    decodeSafetensors(encodeSafetensors(new Map([["x", { shape: [values.length], data: Float32Array.from(values) }]]), {}, { dtype })).tensors.get("x")!.data,
  );

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

describe("safetensors half precision", () => {
  it("reads F16 bit patterns exactly: normals, subnormals, signed zero, infinities and NaN", () => {
    const bits = [0x3c00, 0xc000, 0x7bff, 0x0400, 0x0001, 0x03ff, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3555];
    const { tensors } = decodeSafetensors(rawFile({ h: { dtype: "F16", shape: [bits.length], data_offsets: [0, 2 * bits.length] } }, halves(bits)));
    const values = Array.from(tensors.get("h")!.data);
    expect(values.slice(0, 6)).toEqual([1, -2, 65504, 2 ** -14, 2 ** -24, 1023 * 2 ** -24]);
    expect(Object.is(values[6], -0)).toBe(true);
    expect(values.slice(7, 9)).toEqual([Infinity, -Infinity]);
    expect(values[9]).toBeNaN();
    expect(values[10]).toBe(Math.fround(0x155 / 1024 + 1) / 4);
  });

  it("reads BF16 as the top half of an f32", () => {
    const bits = [0x3f80, 0xc000, 0x7f7f, 0x0001, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x4049];
    const { tensors } = decodeSafetensors(rawFile({ b: { dtype: "BF16", shape: [3, 3], data_offsets: [0, 18] } }, halves(bits)));
    const f32 = new Float32Array(new Uint32Array(bits.map((b) => b << 16)).buffer);
    const values = tensors.get("b")!.data;
    expect(tensors.get("b")!.shape).toEqual([3, 3]);
    expect(Buffer.from(values.buffer).equals(Buffer.from(f32.buffer))).toBe(true);
    expect(values[0]).toBe(1);
    expect(values[3]).toBe(2 ** -133);
    expect(values[7]).toBeNaN();
  });

  it("writes F16 and BF16 exactly where the value is representable", () => {
    const f16 = [0, -0, 1, -2, 0.5, 65504, -65504, 2 ** -14, 2 ** -24, 3 * 2 ** -24, 1023 * 2 ** -24, Infinity, -Infinity, 1 + 2 ** -10];
    expect(roundTrip(f16, "F16").map((v) => (Object.is(v, -0) ? "-0" : v))).toEqual(f16.map((v) => (Object.is(v, -0) ? "-0" : v)));
    const bf16 = [0, 1, -2, 1.5, 2 ** -133, 2 ** -126, 3.3895313892515355e38, -Infinity, Infinity, 1 + 2 ** -7];
    expect(roundTrip(bf16, "BF16")).toEqual(bf16);
    expect(roundTrip([Number.NaN], "F16")[0]).toBeNaN();
    expect(roundTrip([Number.NaN], "BF16")[0]).toBeNaN();
  });

  it("rounds to nearest, ties to even, overflowing to infinity and underflowing through subnormals to zero", () => {
    expect(
      roundTrip([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20, 65519, 65520, -1e6, 2 ** -25, 1.5 * 2 ** -25, 2 ** -26, 2.5 * 2 ** -24], "F16"),
    ).toEqual([1, 1 + 2 ** -9, 1 + 2 ** -10, 65504, Infinity, -Infinity, 0, 2 ** -24, 0, 2 * 2 ** -24]);
    expect(roundTrip([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, 3.4e38, -3.4e38], "BF16")).toEqual([
      1,
      1 + 2 ** -6,
      1 + 2 ** -7,
      Infinity,
      -Infinity,
    ]);
  });

  it("keeps random values within half and bfloat16 precision", () => {
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
    const values = Array.from({ length: 2000 }, () => random() * 10 ** Math.round(random() * 4));
    const f16 = roundTrip(values, "F16");
    const bf16 = roundTrip(values, "BF16");
    values.forEach((v, i) => {
      if (Math.abs(v) >= 2 ** -14) expect(Math.abs(f16[i] - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -11);
      expect(Math.abs(bf16[i] - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -8);
    });
  });

  it("reads F64 and refuses other dtypes, naming the tensor, its dtype and the accepted ones", () => {
    const wide = Float64Array.from([0.1, -3, 1e300]);
    const { tensors } = decodeSafetensors(rawFile({ d: { dtype: "F64", shape: [3], data_offsets: [0, 24] } }, new Uint8Array(wide.buffer)));
    expect(Array.from(tensors.get("d")!.data)).toEqual([Math.fround(0.1), -3, Infinity]);
    expect(() => decodeSafetensors(rawFile({ "model.q": { dtype: "I8", shape: [4], data_offsets: [0, 4] } }, new Uint8Array(4)))).toThrow(
      "tensor 'model.q' has dtype I8; accepted dtypes: F32, F16, BF16, F64",
    );
    expect(() => decodeSafetensors(rawFile({ h: { dtype: "F16", shape: [3], data_offsets: [0, 4] } }, new Uint8Array(4)))).toThrow(
      /do not fit F16 shape \[3\]/,
    );
    expect(() => encodeSafetensors(new Map(), {}, { dtype: "I8" as "F16" })).toThrow("safetensors dtype 'I8' cannot be written; accepted: F32, F16, BF16");
  });
});

describe("readSafetensorsFolder", () => {
  const tensors = (entries: [string, number[]][]): TensorMap =>
    new Map(entries.map(([name, values]) => [name, { shape: [values.length], data: Float32Array.from(values) }]));

  const made: string[] = [];
  afterAll(() => {
    for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
  });

  function folder(files: Record<string, Uint8Array | string>): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "safetensors-"));
    made.push(dir);
    for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content);
    return dir;
  }

  it("reads model.safetensors, or the shards model.safetensors.index.json lists, into one map", () => {
    const single = folder({ "model.safetensors": encodeSafetensors(tensors([["a", [1, 2]]]), {}, { dtype: "BF16" }) });
    expect(Array.from(readSafetensorsFolder(single).get("a")!.data)).toEqual([1, 2]);

    const index = {
      metadata: { total_size: 20 },
      weight_map: { a: "model-00001-of-00002.safetensors", b: "model-00001-of-00002.safetensors", c: "model-00002-of-00002.safetensors" },
    };
    const sharded = folder({
      "model.safetensors.index.json": JSON.stringify(index),
      "model-00001-of-00002.safetensors": encodeSafetensors(
        tensors([
          ["a", [1]],
          ["b", [2, 3]],
        ]),
        {},
        { dtype: "F16" },
      ),
      "model-00002-of-00002.safetensors": encodeSafetensors(tensors([["c", [4, 5, 6]]])),
    });
    const read = readSafetensorsFolder(sharded);
    expect([...read.keys()].sort()).toEqual(["a", "b", "c"]);
    expect(Array.from(read.get("b")!.data)).toEqual([2, 3]);
    expect(Array.from(read.get("c")!.data)).toEqual([4, 5, 6]);
  });

  it("says what is missing: the weights, a shard, or a tensor its shard should hold", () => {
    const empty = folder({});
    expect(() => readSafetensorsFolder(empty)).toThrow(`${empty} has no weights: expected model.safetensors or model.safetensors.index.json`);
    const shard = encodeSafetensors(tensors([["a", [1]]]));
    const missingShard = folder({
      "model.safetensors.index.json": JSON.stringify({ weight_map: { a: "one.safetensors", b: "two.safetensors" } }),
      "one.safetensors": shard,
    });
    expect(() => readSafetensorsFolder(missingShard)).toThrow(
      /shard 'two.safetensors' listed in .*model.safetensors.index.json \(for 1 tensors, e.g. 'b'\) is missing/,
    );
    const missingTensor = folder({
      "model.safetensors.index.json": JSON.stringify({ weight_map: { a: "one.safetensors", z: "one.safetensors" } }),
      "one.safetensors": shard,
    });
    expect(() => readSafetensorsFolder(missingTensor)).toThrow(/tensor 'z' is listed in .* under shard 'one.safetensors' but that shard does not hold it/);
    const badDtype = folder({ "model.safetensors": rawFile({ q: { dtype: "U8", shape: [8], data_offsets: [0, 8] } }, new Uint8Array(8)) });
    expect(() => readSafetensorsFolder(badDtype)).toThrow(/model.safetensors: tensor 'q' has dtype U8; accepted dtypes: F32, F16, BF16, F64/);
  });
});
