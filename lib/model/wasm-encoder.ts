/**
 * A tiny WebAssembly encoder: just what the generated SIMD kernels (simd-gemm.ts, simd-ops.ts) need, so they
 * are built as bytes at load time without a toolchain. Instructions are arrays of bytes, concatenated.
 */

export const op = {
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  else: 0x05,
  br: 0x0c,
  brIf: 0x0d,
  end: 0x0b,
  call: 0x10,
  drop: 0x1a,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  i32Load: 0x28,
  f32Load: 0x2a,
  f32Store: 0x38,
  i32Const: 0x41,
  f32Const: 0x43,
  i32Eqz: 0x45,
  i32Eq: 0x46,
  i32Ne: 0x47,
  i32LtU: 0x49,
  i32GeU: 0x4f,
  i32Add: 0x6a,
  i32Sub: 0x6b,
  i32Mul: 0x6c,
  i32DivU: 0x6e,
  i32Shl: 0x74,
  i32ShrU: 0x76,
  f32Sqrt: 0x91,
  f32Add: 0x92,
  f32Sub: 0x93,
  f32Mul: 0x94,
  f32Div: 0x95,
  f32Max: 0x97,
  f32ConvertI32U: 0xb3,
};

export const simd = {
  load: [0xfd, 0x00],
  load32Splat: [0xfd, 0x09],
  store: [0xfd, 0x0b],
  const: [0xfd, 0x0c],
  splat: [0xfd, 0x13],
  extractLane: (lane: number) => [0xfd, 0x1f, lane],
  sqrt: [0xfd, 0xe3, 0x01],
  add: [0xfd, 0xe4, 0x01],
  sub: [0xfd, 0xe5, 0x01],
  mul: [0xfd, 0xe6, 0x01],
  div: [0xfd, 0xe7, 0x01],
  gt: [0xfd, 0x44],
  ge: [0xfd, 0x46],
  nearest: [0xfd, 0x6a],
  andnot: [0xfd, 0x4f],
  bitselect: [0xfd, 0x52],
  i32x4Shl: [0xfd, 0xab, 0x01],
  i32x4Add: [0xfd, 0xae, 0x01],
  i32x4TruncSatF32x4: [0xfd, 0xf8, 0x01],
  /** pmin(a, b) = b < a ? b : a; pmax(a, b) = a < b ? b : a (one instruction each, unlike min/max) */
  pmin: [0xfd, 0xea, 0x01],
  pmax: [0xfd, 0xeb, 0x01],
};

export const voidBlock = 0x40;
export const i32 = 0x7f,
  f32 = 0x7d,
  v128 = 0x7b;

export function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) return [...out, byte];
    out.push(byte | 0x80);
  }
}

const f32Bytes = (v: number) => Array.from(new Uint8Array(Float32Array.of(v).buffer));
const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];
const name = (s: string) => [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
const vector = (items: number[][]) => [...uleb(items.length), ...items.flat()];

export const get = (l: number) => [op.localGet, ...uleb(l)];
export const set = (l: number) => [op.localSet, ...uleb(l)];
export const c32 = (v: number) => [op.i32Const, ...sleb(v)];
export const f32c = (v: number) => [op.f32Const, ...f32Bytes(v)];
/** a v128 constant with v in all four float lanes */
export const f32x4c = (v: number) => f32x4Lanes([v, v, v, v]);
/** a v128 constant of four float lanes */
export const f32x4Lanes = (lanes: number[]) => [...simd.const, ...lanes.flatMap(f32Bytes)];
/** a v128 constant with v in all four int32 lanes */
export const i32x4c = (v: number) => [...simd.const, ...Array.from(new Uint8Array(Int32Array.of(v, v, v, v).buffer))];
export const memarg = (align: number, offset: number) => [align, ...uleb(offset)];
/** local += value (an i32 expression) */
export const addTo = (l: number, value: number[]) => [...get(l), ...value, op.i32Add, ...set(l)];
/** `block { loop { if (exit) break; body; continue } }` */
export const whileNot = (exit: number[], body: number[]) => [op.block, voidBlock, op.loop, voidBlock, ...exit, op.brIf, 1, ...body, op.br, 0, op.end, op.end];
/** `if (condition) { then }` */
export const when = (condition: number[], then: number[]) => [...condition, op.if, voidBlock, ...then, op.end];

export interface WasmFunction {
  /** exported under this name, when given */
  name?: string;
  params: number[];
  /** local declarations after the parameters, as [count, type] groups */
  locals: [number, number][];
  body: number[];
}

/**
 * A module of these functions (called by index in this order) on an imported `env.memory`, shared (with a
 * maximum of maxPages) or private.
 */
export function encodeModule(functions: WasmFunction[], memory: { shared: boolean; maxPages: number }): Uint8Array<ArrayBuffer> {
  const types: number[][] = [];
  const typeOf = (params: number[]) => {
    const found = types.findIndex((t) => t.length === params.length && t.every((p, i) => p === params[i]));
    return found >= 0 ? found : types.push(params) - 1;
  };
  const typeIndices = functions.map((f) => typeOf(f.params));
  // memory limits: shared memories must declare a maximum (flag 3), private ones need only a minimum (flag 0)
  const limits = memory.shared ? [0x03, ...uleb(1), ...uleb(memory.maxPages)] : [0x00, ...uleb(1)];
  const exports = functions.flatMap((f, i) => (f.name ? [[...name(f.name), 0x00, ...uleb(i)]] : []));
  const code = functions.map((f) => {
    const body = [...vector(f.locals.map(([count, type]) => [...uleb(count), type])), ...f.body, op.end];
    return [...uleb(body.length), ...body];
  });
  return Uint8Array.from([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vector(types.map((t) => [0x60, ...vector(t.map((p) => [p])), 0x00]))),
    ...section(2, vector([[...name("env"), ...name("memory"), 0x02, ...limits]])),
    ...section(3, vector(typeIndices.map((t) => uleb(t)))),
    ...section(7, vector(exports)),
    ...section(10, vector(code)),
  ]);
}
