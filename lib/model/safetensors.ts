/**
 * A minimal safetensors reader and writer (float32 only), the format of Hugging Face checkpoints:
 * an 8-byte little-endian header length N, N bytes of JSON `{name: {dtype, shape, data_offsets}, __metadata__}`
 * padded with spaces to a multiple of 8, then the raw little-endian tensor bytes.
 */
export interface NamedTensor {
  shape: number[];
  data: Float32Array;
}

export type TensorMap = Map<string, NamedTensor>;

export function encodeSafetensors(tensors: TensorMap, metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of tensors) {
    const expected = t.shape.reduce((a, b) => a * b, 1);
    if (expected !== t.data.length) {
      throw new Error(`tensor '${name}' has shape [${t.shape}] (${expected} values) but ${t.data.length} values`);
    }
    header[name] = { dtype: "F32", shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((8 + json.length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let pos = 8 + headerBytes.length;
  for (const t of tensors.values()) {
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), pos);
    pos += t.data.byteLength;
  }
  return out;
}

export function decodeSafetensors(bytes: Uint8Array): { tensors: TensorMap; metadata: Record<string, string> } {
  if (bytes.length < 8) throw new Error(`safetensors file is ${bytes.length} bytes, shorter than its 8-byte header`);
  const headerLength = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (8 + headerLength > bytes.length) {
    throw new Error(`safetensors header claims ${headerLength} bytes but the file has ${bytes.length - 8} after it`);
  }
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as Record<string, any>;
  const dataStart = 8 + headerLength;
  const tensors: TensorMap = new Map();
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    if (info.dtype !== "F32") throw new Error(`tensor '${name}' has dtype ${info.dtype}; only F32 is supported`);
    const [start, end] = info.data_offsets as [number, number];
    const count = (info.shape as number[]).reduce((a, b) => a * b, 1);
    if (end - start !== count * 4 || dataStart + end > bytes.length) {
      throw new Error(`tensor '${name}' offsets [${start}, ${end}] do not fit shape [${info.shape}] in this file`);
    }
    // Copy into a fresh, aligned buffer: the file's bytes need not sit at a multiple of 4.
    const data = new Float32Array(count);
    new Uint8Array(data.buffer).set(bytes.subarray(dataStart + start, dataStart + end));
    tensors.set(name, { shape: info.shape, data });
  }
  return { tensors, metadata: (header.__metadata__ as Record<string, string>) ?? {} };
}
