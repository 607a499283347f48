/**
 * A WebAssembly SIMD matrix multiply, generated here as bytes (no toolchain needed; encoder in wasm-encoder.ts),
 * for the engine's big matmuls: V8 runs it about 35x faster than the best plain-TypeScript loop, because each
 * instruction does four float32 multiply-adds and a 4×8 tile of the result stays in registers.
 *
 * The kernel computes C[M, N] (+)= scale * A[M, K] @ B[K, N] for any M and N a multiple of 8 (wider products
 * go through padded scratch), reading A through row and column strides, one of which must be 1 (so A may be a
 * transpose), B by contiguous rows and C with a row stride. Operands that already live in WebAssembly memory
 * (allocated from `wasmArena`, as the engine's activations are) are used in place; others are copied in with
 * memcpy-speed `set` calls. The same module holds the elementwise operations of simd-ops.ts.
 *
 * The memory is shared where SharedArrayBuffer exists, so a helper thread (server/runtime/gemm-threads.ts) can
 * compute half the rows of a large product in the same memory: each element is still computed by one thread
 * in the same order, so results do not depend on the number of threads.
 *
 * In Node, a native kernel (native/kernel.ts: AVX-512 or AVX2 with fused multiply-add, several times faster)
 * can take over the products through `setNative`: it reads and writes this same memory in place, so the
 * operands are prepared exactly as for the WebAssembly kernel and only the call that computes changes.
 */

import { type NativeOps, setNativeOps } from "./native-ops";
import { type SimdOps, bindOps, opFunctions } from "./simd-ops";
import { type WasmFunction, addTo, c32, encodeModule, f32, get, i32, memarg, op, set, simd, uleb, v128, voidBlock, whileNot } from "./wasm-encoder";

// Every function takes the same parameters: three byte addresses (A, B, C), three sizes, four strides, the
// accumulate flag and the scale. The exported `gemm` takes M and strides in floats; the tile functions take a
// count of row tiles and strides in bytes.
const [PA0, PB0, PC0, SIZE_M, SIZE_K, SIZE_N, S_ROW, S_COL, S_B, S_C, ACCUM, SCALE] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
const paramTypes = [...new Array<number>(11).fill(i32), f32];
/**
 * Rows in a register tile. 4 rows × 8 columns is 8 accumulators + 2 B vectors + 1 A splat: V8 keeps them all in
 * registers. Taller tiles (5 or 6 rows, 13 to 15 vectors) and unrolling the k loop made V8 spill registers and
 * ran 20-45% slower (measured: docs/RUNTIME.md).
 */
const tileRows = 4;

/**
 * One tile function: for each of `tiles` bands of R rows, for each 8 columns, accumulates the R×8 tile of C
 * over the whole inner dimension in registers, then stores scale·tile (+ C). A is read in one of two layouts:
 * "row" (A[i][k] at a + i·rowStride + 4k: R row pointers) or "col" (A[i][k] at a + 4i + k·colStride: one
 * pointer, the R rows at constant offsets). Each A value is loaded straight into all four lanes
 * (v128.load32_splat, one instruction) and B's 8 columns are two vector loads.
 */
function tileFunction(R: number, layout: "row" | "col"): WasmFunction {
  // i32 locals: tile counter, j, k counter, B pointer, C pointer, A and C band starts, a scratch pointer, R row pointers
  const [TILE, J, KC, PB, PC, ABAND, CBAND, PT, PA] = [12, 13, 14, 15, 16, 17, 18, 19, 20];
  const nI32 = 8 + R;
  const ACC = 12 + nI32,
    B0 = ACC + 2 * R,
    B1 = B0 + 1,
    AV = B0 + 2,
    SC = B0 + 3;
  const rows = Array.from({ length: R }, (_, r) => r);
  // one k step: B's row k into two vectors, then each row's A value times both
  const step = (aPtr: (r: number) => number, aOffset: (r: number) => number) => [
    ...get(PB),
    ...simd.load,
    ...memarg(4, 0),
    ...set(B0),
    ...get(PB),
    ...simd.load,
    ...memarg(4, 16),
    ...set(B1),
    ...rows.flatMap((r) => [
      ...get(aPtr(r)),
      ...simd.load32Splat,
      ...memarg(2, aOffset(r)),
      ...set(AV),
      ...get(ACC + 2 * r),
      ...get(AV),
      ...get(B0),
      ...simd.mul,
      ...simd.add,
      ...set(ACC + 2 * r),
      ...get(ACC + 2 * r + 1),
      ...get(AV),
      ...get(B1),
      ...simd.mul,
      ...simd.add,
      ...set(ACC + 2 * r + 1),
    ]),
    ...addTo(PB, get(S_B)),
  ];
  const kLoop =
    layout === "row"
      ? [
          ...get(ABAND),
          ...set(PA),
          ...rows.slice(1).flatMap((r) => [...get(PA + r - 1), ...get(S_ROW), op.i32Add, ...set(PA + r)]),
          ...whileNot(
            [...get(KC), op.i32Eqz],
            [
              ...step(
                (r) => PA + r,
                () => 0,
              ),
              ...rows.flatMap((r) => addTo(PA + r, c32(4))),
              ...get(KC),
              ...c32(1),
              op.i32Sub,
              ...set(KC),
            ],
          ),
        ]
      : [
          ...get(ABAND),
          ...set(PA),
          ...whileNot(
            [...get(KC), op.i32Eqz],
            [
              ...step(
                () => PA,
                (r) => 4 * r,
              ),
              ...addTo(PA, get(S_COL)),
              ...get(KC),
              ...c32(1),
              op.i32Sub,
              ...set(KC),
            ],
          ),
        ];
  const body = [
    ...get(SCALE),
    ...simd.splat,
    ...set(SC),
    ...get(PA0),
    ...set(ABAND),
    ...get(PC0),
    ...set(CBAND),
    ...get(SIZE_M),
    ...set(TILE),
    ...whileNot(
      [...get(TILE), op.i32Eqz],
      [
        ...c32(0),
        ...set(J),
        ...get(CBAND),
        ...set(PC),
        ...whileNot(
          [...get(J), ...get(SIZE_N), op.i32GeU],
          [
            ...Array.from({ length: 2 * R }, (_, t) => [...simd.const, ...new Array(16).fill(0), ...set(ACC + t)]).flat(),
            ...get(PB0),
            ...get(J),
            ...c32(2),
            op.i32Shl,
            op.i32Add,
            ...set(PB),
            ...get(SIZE_K),
            ...set(KC),
            ...kLoop,
            // C tile = scale * acc (+ C tile when accumulating)
            ...get(PC),
            ...set(PT),
            ...rows.flatMap((r) => [
              ...[0, 1].flatMap((h) => [
                ...get(ACC + 2 * r + h),
                ...get(SC),
                ...simd.mul,
                ...set(ACC + 2 * r + h),
                ...get(ACCUM),
                op.if,
                voidBlock,
                ...get(ACC + 2 * r + h),
                ...get(PT),
                ...simd.load,
                ...memarg(4, 16 * h),
                ...simd.add,
                ...set(ACC + 2 * r + h),
                op.end,
                ...get(PT),
                ...get(ACC + 2 * r + h),
                ...simd.store,
                ...memarg(4, 16 * h),
              ]),
              ...addTo(PT, get(S_C)),
            ]),
            ...addTo(J, c32(8)),
            ...addTo(PC, c32(32)),
          ],
        ),
        ...addTo(ABAND, layout === "row" ? [...get(S_ROW), ...c32(R), op.i32Mul] : c32(4 * R)),
        ...addTo(CBAND, [...get(S_C), ...c32(R), op.i32Mul]),
        ...get(TILE),
        ...c32(1),
        op.i32Sub,
        ...set(TILE),
      ],
    ),
  ];
  return {
    params: paramTypes,
    locals: [
      [nI32, i32],
      [2 * R + 4, v128],
    ],
    body,
  };
}

/** Function index of the tile function for R rows in a layout (index 0 is `gemm`). */
const tileIndex = (R: number, layout: "row" | "col") => (layout === "row" ? 0 : tileRows) + R;

/**
 * The exported entry: C[M, N] (+)= scale * A[M, K] @ B[K, N] for N a multiple of 8 and any M, with A's column
 * stride 1 (row layout) or its row stride 1 (col layout). Bands of 6 rows, then one band of the rest.
 */
function gemmFunction(): WasmFunction {
  const [RS, KS, FULL, REM, A2, C2, LAYOUT] = [12, 13, 14, 15, 16, 17, 18];
  const call = (fn: (layout: "row" | "col") => number, a: number, c: number, tiles: number[]) => [
    ...get(LAYOUT),
    op.if,
    voidBlock,
    ...args(a, c, tiles),
    op.call,
    ...uleb(fn("row")),
    op.else,
    ...args(a, c, tiles),
    op.call,
    ...uleb(fn("col")),
    op.end,
  ];
  const args = (a: number, c: number, tiles: number[]) => [
    ...get(a),
    ...get(PB0),
    ...get(c),
    ...tiles,
    ...get(SIZE_K),
    ...get(SIZE_N),
    ...get(RS),
    ...get(KS),
    ...get(S_B),
    ...c32(2),
    op.i32Shl,
    ...get(S_C),
    ...c32(2),
    op.i32Shl,
    ...get(ACCUM),
    ...get(SCALE),
  ];
  const body = [
    // row layout when A's columns are adjacent, else col layout (the caller guarantees A's rows are then adjacent)
    ...get(S_COL),
    ...c32(1),
    op.i32Eq,
    ...set(LAYOUT),
    ...get(LAYOUT),
    op.if,
    voidBlock,
    ...get(S_ROW),
    ...c32(2),
    op.i32Shl,
    ...set(RS),
    ...c32(4),
    ...set(KS),
    op.else,
    ...c32(4),
    ...set(RS),
    ...get(S_COL),
    ...c32(2),
    op.i32Shl,
    ...set(KS),
    op.end,
    ...get(SIZE_M),
    ...c32(tileRows),
    op.i32DivU,
    ...set(FULL),
    ...get(SIZE_M),
    ...get(FULL),
    ...c32(tileRows),
    op.i32Mul,
    op.i32Sub,
    ...set(REM),
    ...call((l) => tileIndex(tileRows, l), PA0, PC0, get(FULL)),
    ...get(PA0),
    ...get(FULL),
    ...c32(tileRows),
    op.i32Mul,
    ...get(RS),
    op.i32Mul,
    op.i32Add,
    ...set(A2),
    ...get(PC0),
    ...get(FULL),
    ...c32(tileRows),
    op.i32Mul,
    ...get(S_C),
    ...c32(2),
    op.i32Shl,
    op.i32Mul,
    op.i32Add,
    ...set(C2),
    ...Array.from({ length: tileRows - 1 }, (_, i) => i + 1).flatMap((R) => [
      ...get(REM),
      ...c32(R),
      op.i32Eq,
      op.if,
      voidBlock,
      ...call((l) => tileIndex(R, l), A2, C2, c32(1)),
      op.end,
    ]),
  ];
  return { name: "gemm", params: paramTypes, locals: [[7, i32]], body };
}

/** The kernel's functions: `gemm` (index 0), then the tile functions. */
function gemmFunctions(): WasmFunction[] {
  const functions = [gemmFunction()];
  for (const layout of ["row", "col"] as const) for (let R = 1; R <= tileRows; R++) functions.push(tileFunction(R, layout));
  return functions;
}

// 4 GiB of address space is reserved, not committed: pages are only touched as the arena grows.
const maxPages = 65536;

// ---- the TypeScript side ----

/**
 * A matrix operand read through an offset and strides, so a transpose is swapped strides and one head of a
 * [T, 3C] qkv block is an offset and a row stride.
 */
export interface MatrixView {
  data: Float32Array;
  offset: number;
  rows: number;
  cols: number;
  rowStride: number;
  colStride: number;
}

/** data[offset + i*rowStride + j] as an [rows, cols] matrix. */
export const rowMajor = (data: Float32Array, rows: number, cols: number, offset = 0, rowStride = cols): MatrixView => ({
  data,
  offset,
  rows,
  cols,
  rowStride,
  colStride: 1,
});

/** The transpose [cols, rows] of the row-major [rows, cols] matrix at data[offset], rows rowStride apart. */
export const transposed = (data: Float32Array, rows: number, cols: number, offset = 0, rowStride = cols): MatrixView => ({
  data,
  offset,
  rows: cols,
  cols: rows,
  rowStride: 1,
  colStride: rowStride,
});

/**
 * A kernel call: byte addresses of A, B, C; M, K, N; strides in floats (A's rows and columns, B's rows and
 * columns, C's rows); accumulate flag; scale. B's column stride is 1 except for the native kernel.
 */
export type GemmArgs = [
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  /** native kernel only: where A, B and C lie (0: this memory; i + 1: the i-th array passed with the calls) */
  aSource?: number,
  bSource?: number,
  cSource?: number,
];

/**
 * A native kernel working in place in this module's shared memory (native/src/addon.cc). Calls are written
 * to `calls`, 16 slots each as GemmArgs (the scale as float32 bits, the sources 0 when absent), and run together;
 * operands outside the memory are passed as `arrays` and used in place (their addresses are byte offsets into
 * them), so the native kernel never copies a weight or a gradient.
 */
export interface NativeGemm extends NativeOps {
  /** heap: a view of the whole memory; calls: the slots `run` reads */
  bind(heap: Float32Array, calls: Int32Array): void;
  /** runs the first `count` calls (each call whole on one thread, or cut by rows and columns between two) */
  run(count: number, arrays?: Float32Array[]): void;
  /** 1, or 2 with a native helper thread */
  setThreads(threads: 1 | 2): void;
  /** pieces of products the helper thread has computed so far */
  helperPieces(): number;
}

/** Another thread that can run the kernel on the same shared memory (see server/runtime/gemm-threads.ts). */
interface GemmHelper {
  /**
   * Runs every call, sharing them out between this thread (through `runHere`) and the helper: each call runs
   * whole on one thread. Returns when all are done.
   */
  runAll(calls: GemmArgs[], runHere: (args: GemmArgs) => void): void;
}

/**
 * Stack-like scratch memory inside the kernel's WebAssembly memory: arrays allocated here are multiplied in
 * place, without copies. Without shared memory (a browser page that is not cross-origin isolated) growing
 * would detach earlier arrays, so there the arena hands out ordinary arrays and products copy their operands.
 */
interface WasmArena {
  /**
   * an array of n floats, valid until the mark taken before it is released; zero-filled unless `zero` is
   * false, in which case it holds whatever the last user left (for arrays that are written in full)
   */
  alloc(n: number, zero?: boolean): Float32Array;
  mark(): number;
  release(mark: number): void;
}

export interface SimdGemm {
  /**
   * out[M, N] (+)= scale * a[M, K] @ b[K, N], with a and b read through their views and row i of the result at
   * out[outOffset + i * outRowStride] (default: packed rows).
   */
  multiply(out: Float32Array, a: MatrixView, b: MatrixView, accumulate: boolean, scale: number, outOffset?: number, outRowStride?: number): void;
  readonly arena: WasmArena;
  /** elementwise and per-row operations (simd-ops.ts) in the same memory */
  readonly ops: SimdOps;
  /**
   * Runs fn, collecting the products it starts instead of running them, then runs them all at once (shared
   * with the helper thread). The products must be independent (none reads another's output) and write their
   * results in place (arena arrays; for the WebAssembly kernel, widths a multiple of 8); those that cannot are
   * run at once as usual.
   * Arena memory allocated inside fn is released when batch returns.
   */
  batch(fn: () => void): void;
  /**
   * Copies arrays that lie outside this memory (a model's weights) into the arena once, and until the returned
   * function is called every product and operation reads those copies instead of copying the arrays again
   * each time. The arrays must not change while pinned. For a synchronous stretch of work that reuses the same
   * arrays many times (a decoder's steps): an arena mark taken before the pin and released while it holds drops
   * the pin (the copies' memory is then reused), and products copy as before. Each copy starts on a cache
   * line: a decoding step streams every weight once, and the native kernel reads lines whole.
   */
  pin(arrays: readonly Float32Array[]): () => void;
  /**
   * A separate instance of the kernels on a zeroed memory of its own, of at least `floats` floats, for state
   * that outlives the arena's stack discipline (a decoder's key/value cache); null without shared memory.
   */
  instantiate(floats: number): { heap: Float32Array; exports: Record<string, (...args: number[]) => void> } | null;
  /** what a helper thread needs to run the same kernel on the same memory; null without shared memory */
  readonly sharing: { module: WebAssembly.Module; memory: WebAssembly.Memory } | null;
  setHelper(helper: GemmHelper | null): void;
  /**
   * Runs the products on a native kernel instead (null: back to WebAssembly). It replaces the helper thread
   * too: the native kernel shares products between threads itself. Needs shared memory.
   */
  setNative(native: NativeGemm | null): void;
  /** the native kernel in use, or null */
  readonly native: NativeGemm | null;
}

// Inner-dimension block: 256 rows of an 8-float B strip and a 4-float A strip fit in L1 with room to spare.
export const kBlock = 256;
// A product is split between two threads only when it is big enough to repay waking the other thread; it is
// cut into this many pieces by rows, which the two threads take in turn, so a busy helper delays little.
const parallelMinWork = 1 << 18;
const parallelPieces = 8;
// Slack kept beyond the arena top (the kernel reads no further than its operands' last elements).
const guardBytes = 1 << 16;
// GemmArgs as the native kernel reads them: 12 integers, the scale, then the three sources.
const slotsPerCall = 16;

function createSimdGemm(): SimdGemm | null {
  if (typeof WebAssembly === "undefined") return null;
  const shared = typeof SharedArrayBuffer !== "undefined";
  const bytes = encodeModule([...gemmFunctions(), ...opFunctions()], { shared, maxPages });
  if (!WebAssembly.validate(bytes)) return null;
  const memory = new WebAssembly.Memory(shared ? { initial: 32, maximum: maxPages, shared: true } : { initial: 32 });
  const module = new WebAssembly.Module(bytes);
  const exports = new WebAssembly.Instance(module, { env: { memory } }).exports as Record<string, (...args: number[]) => void>;
  // the exported `gemm`: GemmArgs without B's column stride (always 1 here)
  const gemm = exports.gemm as (...args: number[]) => void;
  let heap = new Float32Array(memory.buffer);
  // Each grow of a shared memory gives memory.buffer a new object; arrays made before still view the same bytes.
  const ownBuffers = new WeakSet<ArrayBufferLike>([memory.buffer]);
  const owns = (a: Float32Array) => shared && ownBuffers.has(a.buffer);
  let top = 64; // in floats; the first bytes stay unused so no array starts at address 0
  let helper: GemmHelper | null = null;
  let native: NativeGemm | null = null;
  // The native kernel's call slots (GemmArgs, the scale as float32 bits), grown as batches need.
  let nativeSlots = new Int32Array(0);
  let nativeScales = new Float32Array(0);

  const ensure = (floats: number) => {
    const need = floats * 4 + guardBytes;
    if (need > memory.buffer.byteLength) {
      memory.grow(Math.ceil((need - memory.buffer.byteLength) / 65536));
      heap = new Float32Array(memory.buffer);
      ownBuffers.add(memory.buffer);
      native?.bind(heap, nativeSlots); // the kernel checks every call against the memory's size
    }
  };

  // Arrays outside this memory that the native calls waiting to run read or write in place (sources 1, 2, ...).
  let externals: Float32Array[] = [];
  const externalSource = new Map<Float32Array, number>();
  const external = (a: Float32Array): number => {
    let source = externalSource.get(a);
    if (source === undefined) {
      externals.push(a);
      source = externals.length;
      externalSource.set(a, source);
    }
    return source;
  };

  function runNative(calls: GemmArgs[]) {
    if (nativeSlots.length < calls.length * slotsPerCall) {
      nativeSlots = new Int32Array(Math.max(calls.length, 64) * slotsPerCall);
      nativeScales = new Float32Array(nativeSlots.buffer);
      native!.bind(heap, nativeSlots);
    }
    calls.forEach((args, i) => {
      const at = i * slotsPerCall;
      for (let s = 0; s < 12; s++) nativeSlots[at + s] = args[s]!;
      nativeScales[at + 12] = args[12];
      for (let s = 13; s < 16; s++) nativeSlots[at + s] = args[s] ?? 0;
    });
    const arrays = externals;
    externals = [];
    externalSource.clear();
    native!.run(calls.length, arrays.length > 0 ? arrays : undefined);
  }
  /** Copies of arrays outside this memory (`pin`), by the array they copy; and the pins, nested, oldest first. */
  const residents = new Map<Float32Array, Float32Array>();
  const pins: { start: number; end: number; arrays: Float32Array[] }[] = [];
  /** Drops the pins from `from` on (the newer ones nest inside it). */
  const dropPins = (from: number) => {
    while (pins.length > from) for (const a of pins.pop()!.arrays) residents.delete(a);
  };
  /** `a` itself when it lies in this memory, its pinned copy, or null. */
  const inMemory = (a: Float32Array): Float32Array | null => (owns(a) ? a : (residents.get(a) ?? null));
  const arena: WasmArena = {
    alloc(n, zero = true) {
      if (!shared) return new Float32Array(n);
      const start = (top + 15) & ~15; // every array starts on a 64-byte cache line
      top = start + n;
      ensure(top);
      const view = new Float32Array(memory.buffer, start * 4, n);
      if (zero) view.fill(0);
      return view;
    },
    mark: () => top,
    release(mark) {
      // pins whose copies lie above the mark lose their memory
      if (pins.length > 0 && pins[pins.length - 1]!.end > mark) dropPins(pins.findIndex((pin) => pin.end > mark));
      top = mark;
    },
  };
  // Scratch for operands that must be copied: from the arena when shared, else from the start of memory.
  let privateTop = 0;
  const scratch = (n: number): number => {
    if (shared) {
      // from the arena, without making an array object for it
      const start = (top + 15) & ~15;
      top = start + n;
      ensure(top);
      return start;
    }
    const start = privateTop;
    privateTop += (n + 3) & ~3;
    ensure(privateTop);
    return start;
  };

  /**
   * Long inner dimensions (a weight gradient sums over every token) are cut into blocks, each accumulated onto
   * the last: a block's strips of A and B then stay in the L1 cache while the tiles sweep over them.
   */
  function runBlocked(args: GemmArgs) {
    if (native) return runNative([args]); // it blocks the inner dimension itself
    const [a, b, c, M, K, N, ars, acs, brs, , crs, acc, scale] = args; // B's column stride is 1 here
    if (K <= kBlock) return gemm(a, b, c, M, K, N, ars, acs, brs, crs, acc, scale);
    for (let k0 = 0; k0 < K; k0 += kBlock) {
      gemm(a + k0 * acs * 4, b + k0 * brs * 4, c, M, Math.min(kBlock, K - k0), N, ars, acs, brs, crs, k0 > 0 ? 1 : acc, scale);
    }
  }

  // Products collected by `batch`, or null when products run as they come.
  let deferred: GemmArgs[] | null = null;

  /** Runs a product now, shared with the helper when it is large. */
  function runNow(args: GemmArgs, work: number) {
    const [a, b, c, M, K, N, ars, acs, brs, bcs, crs, acc, scale] = args;
    if (native || !helper || M < 2 * tileRows || work < parallelMinWork) return runBlocked(args);
    // Pieces of whole row tiles; each element is computed by one thread exactly as on one thread.
    const rows = Math.ceil(M / parallelPieces / tileRows) * tileRows;
    const calls: GemmArgs[] = [];
    for (let i = 0; i < M; i += rows) calls.push([a + i * ars * 4, b, c + i * crs * 4, Math.min(rows, M - i), K, N, ars, acs, brs, bcs, crs, acc, scale]);
    helper.runAll(calls, runBlocked);
  }

  /**
   * A matrix with a row or column stride of 1 as the kernel reads it: (byte address, row stride, column
   * stride). In place when it lies in this memory, else its rows (or, for a transpose, its columns) copied in
   * as they lie.
   */
  function place(v: MatrixView): [number, number, number, number] {
    const found = inMemory(v.data);
    if (found) return [found.byteOffset + v.offset * 4, v.rowStride, v.colStride, 0];
    // the native kernel reads (and writes) any array in place
    if (native) return [v.offset * 4, v.rowStride, v.colStride, external(v.data)];
    const contiguousRows = v.colStride === 1;
    const count = contiguousRows ? v.rows : v.cols,
      len = contiguousRows ? v.cols : v.rows,
      stride = contiguousRows ? v.rowStride : v.colStride;
    const pitch = (len + 3) & ~3;
    const base = scratch((count + 4) * pitch);
    if (stride === pitch) {
      heap.set(v.data.subarray(v.offset, v.offset + count * pitch), base); // rows already at the pitch: one copy
    } else {
      for (let r = 0; r < count; r++) heap.set(v.data.subarray(v.offset + r * stride, v.offset + r * stride + len), base + r * pitch);
    }
    return [base * 4, contiguousRows ? pitch : 1, contiguousRows ? 1 : pitch, 0];
  }

  /** Runs fn on copies in this memory of the arrays that lie outside it, then copies the outputs back. */
  function withCopies<R>(arrays: (Float32Array | null)[], outputs: boolean[], fn: (copies: (Float32Array | null)[]) => R): R {
    const mark = arena.mark();
    try {
      const copies = arrays.map((a, i) => {
        if (!a || owns(a)) return a;
        // an output must be written to the array itself, not to a pinned copy
        const resident = outputs[i] ? null : inMemory(a);
        if (resident) return resident;
        const copy = arena.alloc(a.length, false);
        copy.set(a);
        return copy;
      });
      const result = fn(copies);
      arrays.forEach((a, i) => {
        if (a && outputs[i] && copies[i] !== a) a.set(copies[i]!);
      });
      return result;
    } finally {
      arena.release(mark);
    }
  }

  return {
    arena,
    ops: bindOps(exports, owns, withCopies),
    sharing: shared ? { module, memory } : null,
    setHelper(h) {
      helper = h;
    },
    get native() {
      return native;
    },
    setNative(kernel) {
      if (kernel && !shared) throw new Error("the native kernel needs the shared WebAssembly memory (SharedArrayBuffer is unavailable)");
      native = kernel;
      setNativeOps(kernel);
      nativeSlots = new Int32Array(64 * slotsPerCall);
      nativeScales = new Float32Array(nativeSlots.buffer);
      native?.bind(heap, nativeSlots);
    },
    pin(arrays) {
      if (!shared) return () => {};
      const start = top;
      const pinned: Float32Array[] = [];
      for (const a of arrays) {
        if (owns(a) || residents.has(a)) continue;
        const copy = arena.alloc(a.length, false);
        copy.set(a);
        residents.set(a, copy);
        pinned.push(a);
      }
      const pin = { start, end: top, arrays: pinned };
      pins.push(pin);
      return () => {
        const at = pins.indexOf(pin);
        if (at < 0) return; // dropped already by a release below it, which took its memory
        // Pins nest: any made after this one go with it. The memory goes back only when nothing lies after it.
        dropPins(at);
        if (top === pin.end) top = pin.start;
      };
    },
    instantiate(floats) {
      if (!shared) return null;
      const pages = Math.ceil((floats * 4 + guardBytes) / 65536);
      const own = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
      const instance = new WebAssembly.Instance(module, { env: { memory: own } });
      return { heap: new Float32Array(own.buffer), exports: instance.exports as Record<string, (...args: number[]) => void> };
    },
    multiply(out, a, b, accumulate, scale, outOffset = 0, outRowStride = b.cols) {
      const M = a.rows,
        K = a.cols,
        N = b.cols;
      if (b.rows !== K) throw new Error(`matmul of [${M}, ${K}] by [${b.rows}, ${N}]: inner sizes differ`);
      if (a.colStride !== 1 && a.rowStride !== 1) {
        throw new Error(`matmul: the left operand needs a row or column stride of 1 (got ${a.rowStride} and ${a.colStride})`);
      }
      // The width the kernel computes: the WebAssembly kernel works in whole 8-column tiles, the native one in any.
      const Nk = native ? N : (N + 7) & ~7;
      const mark = arena.mark();
      privateTop = 0;
      let keepScratch = false;
      try {
        const [aPtr, ars, acs, aSource] = place(a);
        // B: the native kernel reads it in either layout, in place or as it lies (a transposed weight is then one
        // contiguous copy); the WebAssembly kernel needs contiguous rows of a multiple of 8, else a copy as [K, N8].
        let bPtr: number,
          brs: number,
          bcs = 1,
          bSource = 0;
        const bHere = inMemory(b.data);
        if (native && (b.colStride === 1 || b.rowStride === 1)) {
          [bPtr, brs, bcs, bSource] = place(b);
        } else if (bHere && b.colStride === 1 && N === Nk) {
          [bPtr, brs] = [bHere.byteOffset + b.offset * 4, b.rowStride];
        } else {
          const base = scratch(K * Nk);
          const bd = b.data,
            stride = b.colStride;
          if (stride === 1 && N === Nk && b.rowStride === N) {
            heap.set(bd.subarray(b.offset, b.offset + K * N), base); // one copy for a whole packed matrix
          } else {
            for (let k = 0; k < K; k++) {
              const dst = base + k * Nk,
                src = b.offset + k * b.rowStride;
              if (stride === 1) heap.set(bd.subarray(src, src + N), dst);
              else for (let j = 0; j < N; j++) heap[dst + j] = bd[src + j * stride];
            }
          }
          [bPtr, brs] = [base * 4, Nk];
        }
        // C: written in place when its tiles fit exactly (the native kernel's always, wherever C lies), else
        // through scratch.
        if ((owns(out) && N === Nk) || native) {
          const [cPtr, cSource] = owns(out) ? [out.byteOffset + outOffset * 4, 0] : [outOffset * 4, external(out)];
          const args: GemmArgs = [aPtr, bPtr, cPtr, M, K, N, ars, acs, brs, bcs, outRowStride, accumulate ? 1 : 0, scale, aSource, bSource, cSource];
          // in a batch, the call waits for the others and its copied operands stay until the batch ends
          if (deferred) {
            deferred.push(args);
            keepScratch = true;
          } else {
            runNow(args, M * K * N);
          }
          return;
        }
        const base = scratch(M * Nk);
        if (accumulate) {
          for (let i = 0; i < M; i++) heap.set(out.subarray(outOffset + i * outRowStride, outOffset + i * outRowStride + N), base + i * Nk);
        }
        runNow([aPtr, bPtr, base * 4, M, K, Nk, ars, acs, brs, bcs, Nk, accumulate ? 1 : 0, scale], M * K * N);
        for (let i = 0; i < M; i++) out.set(heap.subarray(base + i * Nk, base + i * Nk + N), outOffset + i * outRowStride);
      } finally {
        if (!keepScratch) arena.release(mark);
      }
    },
    batch(fn) {
      if (deferred || !shared) return fn();
      const mark = arena.mark();
      deferred = [];
      try {
        fn();
        const calls = deferred;
        deferred = null;
        if (native) runNative(calls);
        else if (helper && calls.length > 1) helper.runAll(calls, runBlocked);
        else for (const args of calls) runBlocked(args);
      } finally {
        deferred = null;
        arena.release(mark);
      }
    },
  };
}

/** The SIMD kernel, or null where WebAssembly SIMD is unavailable (the plain loops are used then). */
export const simdGemm: SimdGemm | null = createSimdGemm();
