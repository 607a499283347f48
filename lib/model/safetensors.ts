/**
 * A safetensors reader and writer, the format of Hugging Face checkpoints: an 8-byte little-endian header length N,
 * N bytes of JSON `{name: {dtype, shape, data_offsets}, __metadata__}` padded with spaces to a multiple of 8, then
 * the raw little-endian tensor bytes. Tensors are always float32 in memory; F16, BF16 and F64 files are converted on
 * read, and the writer can store F16 or BF16 (rounded to nearest even).
 */
import { nodeFs } from "./node-fs";
interface NamedTensor {
  shape: number[];
  data: Float32Array;
}

export type TensorMap = Map<string, NamedTensor>;

export type SafetensorsDtype = "F32" | "F16" | "BF16";
const readableDtypes = ["F32", "F16", "BF16", "F64"] as const;
type ReadableDtype = (typeof readableDtypes)[number];
const bytesPerValue: Record<ReadableDtype, number> = { F32: 4, F16: 2, BF16: 2, F64: 8 };

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export function encodeSafetensors(tensors: TensorMap, metadata: Record<string, string> = {}, options: { dtype?: SafetensorsDtype } = {}): Uint8Array {
  const parts = safetensorsParts(tensors, metadata, options);
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let pos = 0;
  for (const part of parts) {
    out.set(part, pos);
    pos += part.length;
  }
  return out;
}

/**
 * A safetensors file as its pieces in order: the header (with its length), then each tensor's bytes, float32 ones
 * as views of the tensors themselves. A writer that writes them one after another never holds the file whole.
 */
export function safetensorsParts(tensors: TensorMap, metadata: Record<string, string> = {}, options: { dtype?: SafetensorsDtype } = {}): Uint8Array[] {
  const dtype = options.dtype ?? "F32";
  if (!["F32", "F16", "BF16"].includes(dtype)) throw new Error(`safetensors dtype '${dtype}' cannot be written; accepted: F32, F16, BF16`);
  const width = bytesPerValue[dtype];
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of tensors) {
    const expected = t.shape.reduce((a, b) => a * b, 1);
    if (expected !== t.data.length) {
      throw new Error(`tensor '${name}' has shape [${t.shape}] (${expected} values) but ${t.data.length} values`);
    }
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length * width] };
    offset += t.data.length * width;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((8 + json.length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const head = new Uint8Array(8 + headerBytes.length);
  new DataView(head.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  head.set(headerBytes, 8);
  const parts: Uint8Array[] = [head];
  for (const t of tensors.values()) {
    const raw = dtype === "F32" ? t.data : Uint16Array.from(t.data, dtype === "F16" ? f32ToF16Bits : f32ToBf16Bits);
    parts.push(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength));
  }
  return parts;
}

/**
 * The tensors of a safetensors file's bytes. With `views`, a float32 tensor aligned in `bytes` is a view of them,
 * not a copy (the caller hands the bytes over: writing a tensor writes them); others are copies either way.
 */
export function decodeSafetensors(bytes: Uint8Array, options: { views?: boolean } = {}): { tensors: TensorMap; metadata: Record<string, string> } {
  const { header, dataStart } = parseHeader(bytes.subarray(0, 8), (length) => bytes.subarray(8, 8 + length), bytes.length);
  const tensors: TensorMap = new Map();
  for (const [name, info] of tensorEntries(header)) {
    const [start, end] = checkEntry(name, info, bytes.length - dataStart);
    const part = bytes.subarray(dataStart + start, dataStart + end);
    const view = options.views && info.dtype === "F32" && part.byteOffset % 4 === 0 && littleEndian;
    tensors.set(name, {
      shape: info.shape,
      data: view ? new Float32Array(part.buffer, part.byteOffset, part.length / 4) : toFloat32(info.dtype as ReadableDtype, part),
    });
  }
  return { tensors, metadata: (header.__metadata__ as Record<string, string>) ?? {} };
}

/**
 * The weights of a Hugging Face model folder: `model.safetensors`, or the shards that `model.safetensors.index.json`
 * lists in its `weight_map` (tensor name → shard file). Files are read tensor by tensor, so a shard larger than
 * Node's 2 GiB single-read limit still loads.
 */
export function readSafetensorsFolder(dir: string): TensorMap {
  const fs = nodeFs("reading safetensors files; elsewhere use decodeSafetensors on the bytes");
  const single = `${dir}/model.safetensors`;
  if (fs.existsSync(single)) return readSafetensorsFile(single);
  const indexPath = `${dir}/model.safetensors.index.json`;
  if (!fs.existsSync(indexPath)) {
    throw new Error(`${dir} has no weights: expected model.safetensors or model.safetensors.index.json (with its shards)`);
  }
  const weightMap = (JSON.parse(fs.readFileSync(indexPath, "utf8")) as { weight_map?: Record<string, string> }).weight_map;
  if (!weightMap || typeof weightMap !== "object") throw new Error(`${indexPath} has no weight_map object (tensor name → shard file)`);
  const byShard = new Map<string, string[]>();
  for (const [name, shard] of Object.entries(weightMap)) byShard.set(shard, [...(byShard.get(shard) ?? []), name]);
  const tensors: TensorMap = new Map();
  for (const [shard, names] of byShard) {
    const path = `${dir}/${shard}`;
    if (!fs.existsSync(path)) throw new Error(`shard '${shard}' listed in ${indexPath} (for ${names.length} tensors, e.g. '${names[0]}') is missing`);
    const shardTensors = readSafetensorsFile(path);
    for (const name of names) {
      const tensor = shardTensors.get(name);
      if (!tensor) throw new Error(`tensor '${name}' is listed in ${indexPath} under shard '${shard}' but that shard does not hold it`);
      tensors.set(name, tensor);
    }
  }
  return tensors;
}

/** One safetensors file, read header first and then tensor by tensor. */
function readSafetensorsFile(path: string): TensorMap {
  const fs = nodeFs("reading safetensors files; elsewhere use decodeSafetensors on the bytes");
  const fd = fs.openSync(path, "r");
  try {
    const size = fs.fstatSync(fd).size;
    const readAt = (position: number, length: number) => {
      const buffer = new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const n = fs.readSync(fd, buffer, done, length - done, position + done);
        if (n === 0) throw new Error(`${path} ended early: wanted ${length} bytes at ${position}`);
        done += n;
      }
      return buffer;
    };
    const { header, dataStart } = parseHeader(readAt(0, Math.min(8, size)), (length) => readAt(8, length), size);
    const tensors: TensorMap = new Map();
    for (const [name, info] of tensorEntries(header)) {
      const [start, end] = checkEntry(name, info, size - dataStart);
      tensors.set(name, { shape: info.shape, data: toFloat32(info.dtype as ReadableDtype, readAt(dataStart + start, end - start)) });
    }
    return tensors;
  } catch (error) {
    throw new Error(`${path}: ${(error as Error).message}`);
  } finally {
    fs.closeSync(fd);
  }
}

function parseHeader(first8: Uint8Array, readHeader: (length: number) => Uint8Array, size: number) {
  if (size < 8) throw new Error(`safetensors file is ${size} bytes, shorter than its 8-byte header`);
  const headerLength = Number(new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true));
  if (8 + headerLength > size) {
    throw new Error(`safetensors header claims ${headerLength} bytes but the file has ${size - 8} after it`);
  }
  const header = JSON.parse(new TextDecoder().decode(readHeader(headerLength))) as Record<string, unknown>;
  return { header, dataStart: 8 + headerLength };
}

function tensorEntries(header: Record<string, unknown>): [string, HeaderEntry][] {
  return Object.entries(header).filter(([name]) => name !== "__metadata__") as [string, HeaderEntry][];
}

/** Refuses dtypes this engine cannot hold as float32, and offsets that do not match the shape or the file. */
function checkEntry(name: string, info: HeaderEntry, dataLength: number): [number, number] {
  if (!(readableDtypes as readonly string[]).includes(info.dtype)) {
    throw new Error(`tensor '${name}' has dtype ${info.dtype}; accepted dtypes: ${readableDtypes.join(", ")}`);
  }
  const [start, end] = info.data_offsets;
  const count = info.shape.reduce((a, b) => a * b, 1);
  if (end - start !== count * bytesPerValue[info.dtype as ReadableDtype] || end > dataLength) {
    throw new Error(`tensor '${name}' offsets [${start}, ${end}] do not fit ${info.dtype} shape [${info.shape}] in this file`);
  }
  return [start, end];
}

/** Copies through fresh, aligned buffers: a tensor's bytes need not sit at a multiple of its width in the file. */
/** Safetensors is little-endian; a float32 view of its bytes reads right only on a little-endian machine. */
const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function toFloat32(dtype: ReadableDtype, bytes: Uint8Array): Float32Array {
  const count = bytes.length / bytesPerValue[dtype];
  if (dtype === "F32") {
    const out = new Float32Array(count);
    new Uint8Array(out.buffer).set(bytes);
    return out;
  }
  if (dtype === "F64") {
    const wide = new Float64Array(count);
    new Uint8Array(wide.buffer).set(bytes);
    return Float32Array.from(wide);
  }
  const halves = new Uint16Array(count);
  new Uint8Array(halves.buffer).set(bytes);
  const out = new Float32Array(count);
  if (dtype === "BF16") {
    // bf16 is the top half of an f32, so widening is a shift.
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) bits[i] = halves[i] << 16;
  } else {
    const table = f16Table();
    for (let i = 0; i < count; i++) out[i] = table[halves[i]];
  }
  return out;
}

let f16Values: Float32Array | undefined;
/** All 65536 half-precision values, so a large tensor converts by lookup. */
function f16Table(): Float32Array {
  if (f16Values) return f16Values;
  f16Values = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const mantissa = h & 0x3ff;
    if (exponent === 0) f16Values[h] = sign * mantissa * 2 ** -24;
    else if (exponent === 31) f16Values[h] = mantissa ? Number.NaN : sign * Number.POSITIVE_INFINITY;
    else f16Values[h] = sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
  }
  return f16Values;
}

const scratch = new DataView(new ArrayBuffer(4));
function f32Bits(x: number): number {
  scratch.setFloat32(0, x);
  return scratch.getUint32(0);
}

/** Nearest-even rounding of an f32 to bf16; NaN stays NaN (a quiet one) rather than rounding to infinity. */
export function f32ToBf16Bits(x: number): number {
  const bits = f32Bits(x);
  if ((bits & 0x7fffffff) > 0x7f800000) return (bits >>> 16) | 0x40;
  return (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
}

/** Nearest-even rounding of an f32 to IEEE half: overflow becomes infinity, tiny values become subnormals or zero. */
function f32ToF16Bits(x: number): number {
  const bits = f32Bits(x);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >>> 13) : 0);
  const e = exponent - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  let shift = 13;
  let base = e << 10;
  if (e <= 0) {
    if (e < -10) return sign;
    // Subnormal: the implicit leading 1 becomes explicit and the value is shifted down to a multiple of 2^-24.
    mantissa |= 0x800000;
    shift = 14 - e;
    base = 0;
  }
  let half = base + Math.floor(mantissa / 2 ** shift);
  const rest = mantissa % 2 ** shift;
  const midpoint = 2 ** (shift - 1);
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (rest > midpoint || (rest === midpoint && half & 1)) half++;
  return sign | half;
}
