/**
 * The engine's elementwise and per-row operations in WebAssembly SIMD (four floats per instruction), generated
 * as bytes like the matrix kernel and living in the same module and memory: GELU and its gradient, LayerNorm
 * and its gradient, column sums (bias gradients) and sums (residual connections). They work in place on arrays
 * in the kernel's memory; `bindOps` returns false for arrays elsewhere, and the caller (kernels.ts) then runs
 * its plain loops. Widths must be multiples of 4 (of 16 for column sums); the caller checks.
 */
import { type WasmFunction, addTo, c32, f32, f32c, f32x4Lanes, f32x4c, get, i32x4c, i32, memarg, op, set, simd, v128, when, whileNot } from "./wasm-encoder";

const load = (address: number[], offset = 0) => [...address, ...simd.load, ...memarg(4, offset)];
const store = (address: number[], value: number[], offset = 0) => [...address, ...value, ...simd.store, ...memarg(4, offset)];
const at = (base: number, o: number) => [...get(base), ...get(o), op.i32Add];
/** the sum of a vector's four lanes, as an f32 */
const laneSum = (v: number) => [
  ...get(v),
  ...simd.extractLane(0),
  ...get(v),
  ...simd.extractLane(1),
  op.f32Add,
  ...get(v),
  ...simd.extractLane(2),
  op.f32Add,
  ...get(v),
  ...simd.extractLane(3),
  op.f32Add,
];
/** for (o = 0; o < bytes; o += step) body */
const forBytes = (o: number, bytes: number[], step: number, body: number[]) => [
  ...c32(0),
  ...set(o),
  ...whileNot([...get(o), ...bytes, op.i32GeU], [...body, ...addTo(o, c32(step))]),
];

// GELU with the tanh approximation (as in GPT-2): gelu(v) = v/2 · (1 + tanh(k·(v + 0.044715·v³)))
export const geluK = Math.sqrt(2 / Math.PI);
export const geluC = 0.044715;

/**
 * tanh as a rational function of degree 13/6 on u clamped to [-9, 9] (the approximation Eigen and XNNPACK use):
 * no branch and no exp, and within 3.3e-7 of tanh everywhere in float32.
 */
export const tanhNumerator = [
  4.89352455891786e-3, 6.37261928875436e-4, 1.48572235717979e-5, 5.12229709037114e-8, -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16,
];
export const tanhDenominator = [4.89352518554385e-3, 2.268434632439e-3, 1.18534705686654e-4, 1.19825839466702e-6];
export const tanhClamp = 9;

/** v128 code: local `t` = tanh(local `u`), using locals c, x2, p, q as temporaries */
function tanhInto(t: number, u: number, [c, x2, p, q]: number[]): number[] {
  const horner = (acc: number, coefficients: number[]) => [
    ...f32x4c(coefficients[coefficients.length - 1]),
    ...set(acc),
    ...coefficients
      .slice(0, -1)
      .reverse()
      .flatMap((k) => [...get(acc), ...get(x2), ...simd.mul, ...f32x4c(k), ...simd.add, ...set(acc)]),
  ];
  return [
    ...get(u),
    ...f32x4c(tanhClamp),
    ...simd.pmin,
    ...f32x4c(-tanhClamp),
    ...simd.pmax,
    ...set(c),
    ...get(c),
    ...get(c),
    ...simd.mul,
    ...set(x2),
    ...horner(p, tanhNumerator),
    ...horner(q, tanhDenominator),
    ...get(p),
    ...get(c),
    ...simd.mul,
    ...get(q),
    ...simd.div,
    ...set(t),
  ];
}

function gelu(): WasmFunction {
  const [X, OUT, TANH, N] = [0, 1, 2, 3];
  const O = 4;
  const [V, U, T, H, C, X2, P, Q] = [5, 6, 7, 8, 9, 10, 11, 12];
  return {
    name: "gelu",
    params: [i32, i32, i32, i32],
    locals: [
      [1, i32],
      [8, v128],
    ],
    body: forBytes(O, [...get(N), ...c32(2), op.i32Shl], 16, [
      ...load(at(X, O)),
      ...set(V),
      // u = v·(k + k·c·v²)
      ...get(V),
      ...f32x4c(geluK),
      ...f32x4c(geluK * geluC),
      ...get(V),
      ...get(V),
      ...simd.mul,
      ...simd.mul,
      ...simd.add,
      ...simd.mul,
      ...set(U),
      ...tanhInto(T, U, [C, X2, P, Q]),
      ...when([...get(TANH)], store(at(TANH, O), get(T))),
      ...get(V),
      ...f32x4c(0.5),
      ...simd.mul,
      ...set(H),
      ...store(at(OUT, O), [...get(H), ...get(H), ...get(T), ...simd.mul, ...simd.add]),
    ]),
  };
}

function geluBackward(): WasmFunction {
  const [DX, DY, X, TANH, N] = [0, 1, 2, 3, 4];
  const O = 5;
  const [V, T, DU] = [6, 7, 8];
  return {
    name: "geluBackward",
    params: [i32, i32, i32, i32, i32],
    locals: [
      [1, i32],
      [3, v128],
    ],
    body: forBytes(O, [...get(N), ...c32(2), op.i32Shl], 16, [
      ...load(at(X, O)),
      ...set(V),
      ...load(at(TANH, O)),
      ...set(T),
      // du = k·(1 + 3c·v²)
      ...f32x4c(geluK),
      ...f32x4c(3 * geluK * geluC),
      ...get(V),
      ...get(V),
      ...simd.mul,
      ...simd.mul,
      ...simd.add,
      ...set(DU),
      // dx = dy · ½·(1 + t + v·(1 - t²)·du)
      ...store(at(DX, O), [
        ...load(at(DY, O)),
        ...f32x4c(1),
        ...get(T),
        ...simd.add,
        ...get(V),
        ...f32x4c(1),
        ...get(T),
        ...get(T),
        ...simd.mul,
        ...simd.sub,
        ...simd.mul,
        ...get(DU),
        ...simd.mul,
        ...simd.add,
        ...f32x4c(0.5),
        ...simd.mul,
        ...simd.mul,
      ]),
    ]),
  };
}

/** out[N] += column sums of dy[M, N], 16 columns at a time, rows added in order (as the plain loop does). */
function columnSum(): WasmFunction {
  const [OUT, DY, M, N] = [0, 1, 2, 3];
  const [J, P, I, ROW] = [4, 5, 6, 7];
  const ACC = 8;
  const quarters = [0, 1, 2, 3];
  return {
    name: "columnSum",
    params: [i32, i32, i32, i32],
    locals: [
      [4, i32],
      [4, v128],
    ],
    body: [
      ...get(N),
      ...c32(2),
      op.i32Shl,
      ...set(ROW),
      ...forBytes(J, get(ROW), 64, [
        ...quarters.flatMap((q) => [...load(at(OUT, J), 16 * q), ...set(ACC + q)]),
        ...at(DY, J),
        ...set(P),
        ...get(M),
        ...set(I),
        ...whileNot(
          [...get(I), op.i32Eqz],
          [
            ...quarters.flatMap((q) => [...get(ACC + q), ...load(get(P), 16 * q), ...simd.add, ...set(ACC + q)]),
            ...addTo(P, get(ROW)),
            ...get(I),
            ...c32(1),
            op.i32Sub,
            ...set(I),
          ],
        ),
        ...quarters.flatMap((q) => store(at(OUT, J), get(ACC + q), 16 * q)),
      ]),
    ],
  };
}

/** out[n] = a[n] + b[n] */
function add(): WasmFunction {
  const [OUT, A, B, N] = [0, 1, 2, 3];
  const O = 4;
  return {
    name: "add",
    params: [i32, i32, i32, i32],
    locals: [[1, i32]],
    body: forBytes(O, [...get(N), ...c32(2), op.i32Shl], 16, store(at(OUT, O), [...load(at(A, O)), ...load(at(B, O)), ...simd.add])),
  };
}

export const layerNormEps = 1e-5;

/** out = (x - mean) · rstd · gain + bias per row of x[M, C]; mean and rstd kept for the backward pass. */
function layerNorm(): WasmFunction {
  const [OUT, MEAN, RSTD, X, GAIN, BIAS, M, C] = [0, 1, 2, 3, 4, 5, 6, 7];
  const [O, ROW, I] = [8, 9, 10];
  const [S, MV, RV, D] = [11, 12, 13, 14];
  const [SCALAR] = [15];
  return {
    name: "layerNorm",
    params: [i32, i32, i32, i32, i32, i32, i32, i32],
    locals: [
      [3, i32],
      [4, v128],
      [1, f32],
    ],
    body: [
      ...get(C),
      ...c32(2),
      op.i32Shl,
      ...set(ROW),
      ...get(M),
      ...set(I),
      ...whileNot(
        [...get(I), op.i32Eqz],
        [
          ...f32x4c(0),
          ...set(S),
          ...forBytes(O, get(ROW), 16, [...get(S), ...load(at(X, O)), ...simd.add, ...set(S)]),
          ...laneSum(S),
          ...get(C),
          op.f32ConvertI32U,
          op.f32Div,
          ...set(SCALAR),
          ...get(MEAN),
          ...get(SCALAR),
          op.f32Store,
          ...memarg(2, 0),
          ...get(SCALAR),
          ...simd.splat,
          ...set(MV),
          ...f32x4c(0),
          ...set(S),
          ...forBytes(O, get(ROW), 16, [
            ...load(at(X, O)),
            ...get(MV),
            ...simd.sub,
            ...set(D),
            ...get(S),
            ...get(D),
            ...get(D),
            ...simd.mul,
            ...simd.add,
            ...set(S),
          ]),
          ...f32c(1),
          ...laneSum(S),
          ...get(C),
          op.f32ConvertI32U,
          op.f32Div,
          ...f32c(layerNormEps),
          op.f32Add,
          op.f32Sqrt,
          op.f32Div,
          ...set(SCALAR),
          ...get(RSTD),
          ...get(SCALAR),
          op.f32Store,
          ...memarg(2, 0),
          ...get(SCALAR),
          ...simd.splat,
          ...set(RV),
          ...forBytes(
            O,
            get(ROW),
            16,
            store(at(OUT, O), [
              ...load(at(X, O)),
              ...get(MV),
              ...simd.sub,
              ...get(RV),
              ...simd.mul,
              ...load(at(GAIN, O)),
              ...simd.mul,
              ...load(at(BIAS, O)),
              ...simd.add,
            ]),
          ),
          ...addTo(X, get(ROW)),
          ...addTo(OUT, get(ROW)),
          ...addTo(MEAN, c32(4)),
          ...addTo(RSTD, c32(4)),
          ...get(I),
          ...c32(1),
          op.i32Sub,
          ...set(I),
        ],
      ),
    ],
  };
}

/**
 * dx += LayerNorm's input gradient per row; dGain and dBias (addresses, 0 for none) accumulate the parameter
 * gradients.
 */
function layerNormBackward(): WasmFunction {
  const [DX, DGAIN, DBIAS, DY, X, MEAN, RSTD, GAIN, M, C] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const [O, ROW, I] = [10, 11, 12];
  const [MV, SV, A1, A2, G, XH, DYV, MD, MX] = [13, 14, 15, 16, 17, 18, 19, 20, 21];
  const xhat = [...load(at(X, O)), ...get(MV), ...simd.sub, ...get(SV), ...simd.mul, ...set(XH)];
  const perC = (v: number) => [...laneSum(v), ...get(C), op.f32ConvertI32U, op.f32Div, ...simd.splat];
  return {
    name: "layerNormBackward",
    params: new Array<number>(10).fill(i32),
    locals: [
      [3, i32],
      [9, v128],
    ],
    body: [
      ...get(C),
      ...c32(2),
      op.i32Shl,
      ...set(ROW),
      ...get(M),
      ...set(I),
      ...whileNot(
        [...get(I), op.i32Eqz],
        [
          ...get(MEAN),
          ...simd.load32Splat,
          ...memarg(2, 0),
          ...set(MV),
          ...get(RSTD),
          ...simd.load32Splat,
          ...memarg(2, 0),
          ...set(SV),
          ...f32x4c(0),
          ...set(A1),
          ...f32x4c(0),
          ...set(A2),
          ...forBytes(O, get(ROW), 16, [
            ...load(at(DY, O)),
            ...load(at(GAIN, O)),
            ...simd.mul,
            ...set(G),
            ...xhat,
            ...get(A1),
            ...get(G),
            ...simd.add,
            ...set(A1),
            ...get(A2),
            ...get(G),
            ...get(XH),
            ...simd.mul,
            ...simd.add,
            ...set(A2),
          ]),
          ...perC(A1),
          ...set(MD),
          ...perC(A2),
          ...set(MX),
          ...forBytes(O, get(ROW), 16, [
            ...xhat,
            ...load(at(DY, O)),
            ...set(DYV),
            ...when(get(DGAIN), store(at(DGAIN, O), [...load(at(DGAIN, O)), ...get(DYV), ...get(XH), ...simd.mul, ...simd.add])),
            ...when(get(DBIAS), store(at(DBIAS, O), [...load(at(DBIAS, O)), ...get(DYV), ...simd.add])),
            ...store(at(DX, O), [
              ...load(at(DX, O)),
              ...get(DYV),
              ...load(at(GAIN, O)),
              ...simd.mul,
              ...get(MD),
              ...simd.sub,
              ...get(XH),
              ...get(MX),
              ...simd.mul,
              ...simd.sub,
              ...get(SV),
              ...simd.mul,
              ...simd.add,
            ]),
          ]),
          ...addTo(DX, get(ROW)),
          ...addTo(DY, get(ROW)),
          ...addTo(X, get(ROW)),
          ...addTo(MEAN, c32(4)),
          ...addTo(RSTD, c32(4)),
          ...get(I),
          ...c32(1),
          op.i32Sub,
          ...set(I),
        ],
      ),
    ],
  };
}

/**
 * v128 code: local `out` = exp(local `x`) (Cephes' expf: 2^n times a degree-7 polynomial of the remainder,
 * within 2 ulp), for x clamped to [-87.3, 88] (below, the result is ~1e-38 instead of smaller), using locals
 * n, r, p as temporaries.
 */
function expInto(out: number, x: number, [n, r, p]: number[]): number[] {
  const cephes = [5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.98756915e-4];
  return [
    ...get(x),
    ...f32x4c(88),
    ...simd.pmin,
    ...f32x4c(-87.3),
    ...simd.pmax,
    ...set(r),
    ...get(r),
    ...f32x4c(Math.LOG2E),
    ...simd.mul,
    ...simd.nearest,
    ...set(n),
    // r = x - n·ln2, with ln2 split in two so the first product is exact
    ...get(r),
    ...get(n),
    ...f32x4c(0.693359375),
    ...simd.mul,
    ...simd.sub,
    ...get(n),
    ...f32x4c(-2.1219444e-4),
    ...simd.mul,
    ...simd.sub,
    ...set(r),
    ...f32x4c(cephes[5]),
    ...set(p),
    ...cephes
      .slice(0, 5)
      .reverse()
      .flatMap((k) => [...get(p), ...get(r), ...simd.mul, ...f32x4c(k), ...simd.add, ...set(p)]),
    // p·r² + r + 1, times 2^n built in the exponent bits
    ...get(p),
    ...get(r),
    ...get(r),
    ...simd.mul,
    ...simd.mul,
    ...get(r),
    ...simd.add,
    ...f32x4c(1),
    ...simd.add,
    ...get(n),
    ...simd.i32x4TruncSatF32x4,
    ...i32x4c(127),
    ...simd.i32x4Add,
    ...c32(23),
    ...simd.i32x4Shl,
    ...simd.mul,
    ...set(out),
  ];
}

/**
 * Row-wise causal softmax in place over `blocks` [T, T] blocks: row i keeps columns 0..i, the rest become 0.
 * Columns past i in the vector that holds i are masked by comparing lane indices.
 */
function causalSoftmax(): WasmFunction {
  const [P, BLOCKS, T] = [0, 1, 2];
  const [R, I, J, LIMIT, ROWB] = [3, 4, 5, 6, 7];
  const [M, MASK, E, SUM, JV, IV, MV, N, RR, PP, X] = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18];
  const lanes = [...f32x4Lanes([0, 1, 2, 3]), ...set(JV)];
  const nextLanes = [...get(JV), ...f32x4c(4), ...simd.add, ...set(JV)];
  const mask = [...get(JV), ...get(IV), ...simd.gt, ...set(MASK)];
  return {
    name: "causalSoftmax",
    params: [i32, i32, i32],
    locals: [
      [5, i32],
      [11, v128],
    ],
    body: [
      ...get(T),
      ...c32(2),
      op.i32Shl,
      ...set(ROWB),
      ...get(BLOCKS),
      ...get(T),
      op.i32Mul,
      ...set(R),
      ...c32(0),
      ...set(I),
      ...whileNot(
        [...get(R), op.i32Eqz],
        [
          ...get(I),
          ...c32(2),
          op.i32ShrU,
          ...c32(1),
          op.i32Add,
          ...c32(4),
          op.i32Shl,
          ...set(LIMIT),
          ...get(I),
          op.f32ConvertI32U,
          ...simd.splat,
          ...set(IV),
          ...f32x4c(-Infinity),
          ...set(M),
          ...lanes,
          ...forBytes(J, get(LIMIT), 16, [
            ...mask,
            ...get(M),
            ...f32x4c(-Infinity),
            ...load(at(P, J)),
            ...get(MASK),
            ...simd.bitselect,
            ...simd.pmax,
            ...set(M),
            ...nextLanes,
          ]),
          ...get(M),
          ...simd.extractLane(0),
          ...get(M),
          ...simd.extractLane(1),
          op.f32Max,
          ...get(M),
          ...simd.extractLane(2),
          ...get(M),
          ...simd.extractLane(3),
          op.f32Max,
          op.f32Max,
          ...simd.splat,
          ...set(MV),
          ...f32x4c(0),
          ...set(SUM),
          ...lanes,
          ...forBytes(J, get(LIMIT), 16, [
            ...mask,
            ...load(at(P, J)),
            ...get(MV),
            ...simd.sub,
            ...set(X),
            ...expInto(E, X, [N, RR, PP]),
            ...get(E),
            ...get(MASK),
            ...simd.andnot,
            ...set(E),
            ...store(at(P, J), get(E)),
            ...get(SUM),
            ...get(E),
            ...simd.add,
            ...set(SUM),
            ...nextLanes,
          ]),
          ...f32c(1),
          ...laneSum(SUM),
          op.f32Div,
          ...simd.splat,
          ...set(MV),
          ...forBytes(J, get(LIMIT), 16, store(at(P, J), [...load(at(P, J)), ...get(MV), ...simd.mul])),
          ...get(LIMIT),
          ...set(J),
          ...whileNot([...get(J), ...get(ROWB), op.i32GeU], [...store(at(P, J), f32x4c(0)), ...addTo(J, c32(16))]),
          ...addTo(P, get(ROWB)),
          ...get(R),
          ...c32(1),
          op.i32Sub,
          ...set(R),
          ...addTo(I, c32(1)),
          ...when([...get(I), ...get(T), op.i32Eq], [...c32(0), ...set(I)]),
        ],
      ),
    ],
  };
}

/** Through the softmax, per row of [rows, T]: dAtt = att · (dAtt - Σ att·dAtt) · scale (att is 0 past the diagonal). */
function softmaxBackward(): WasmFunction {
  const [DATT, ATT, ROWS, T, SCALE] = [0, 1, 2, 3, 4];
  const [J, ROWB] = [5, 6];
  const [A, D, SC] = [7, 8, 9];
  return {
    name: "softmaxBackward",
    params: [i32, i32, i32, i32, f32],
    locals: [
      [2, i32],
      [3, v128],
    ],
    body: [
      ...get(T),
      ...c32(2),
      op.i32Shl,
      ...set(ROWB),
      ...get(SCALE),
      ...simd.splat,
      ...set(SC),
      ...whileNot(
        [...get(ROWS), op.i32Eqz],
        [
          ...f32x4c(0),
          ...set(A),
          ...forBytes(J, get(ROWB), 16, [...get(A), ...load(at(ATT, J)), ...load(at(DATT, J)), ...simd.mul, ...simd.add, ...set(A)]),
          ...laneSum(A),
          ...simd.splat,
          ...set(D),
          ...forBytes(
            J,
            get(ROWB),
            16,
            store(at(DATT, J), [...load(at(ATT, J)), ...load(at(DATT, J)), ...get(D), ...simd.sub, ...simd.mul, ...get(SC), ...simd.mul]),
          ),
          ...addTo(DATT, get(ROWB)),
          ...addTo(ATT, get(ROWB)),
          ...get(ROWS),
          ...c32(1),
          op.i32Sub,
          ...set(ROWS),
        ],
      ),
    ],
  };
}

/**
 * Attention of N new tokens over a key/value cache, all heads: for token n and head h, scores over the cached
 * positions t < lens[n] (keys at kc + bases[n] + ((h / group)·Tmax + t)·hd floats: `group` query heads share a
 * key/value head), softmax, and y[n, h·hd..] the weighted sum of the values (same layout in vc). q is read from qkv rows of 3C; hd a multiple of 4; `scores`
 * holds Tmax + 4 floats. Addresses in bytes; bases and lens are int32 arrays.
 */
function cachedAttention(): WasmFunction {
  const [QKV, KC, VC, Y, SCORES, BASES, LENS, N, H, HD, C, TMAX, GROUP, SCALE] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
  const [NI, HH, Q, KB, VB, LEN, T, D, HDB, P] = [14, 15, 16, 17, 18, 19, 20, 21, 22, 23];
  const [ACC, MV, SUM, E, X, NN, RR, PP, JV, LV] = [24, 25, 26, 27, 28, 29, 30, 31, 32, 33];
  const [MAXS] = [34];
  return {
    name: "cachedAttention",
    params: [...new Array<number>(13).fill(i32), f32],
    locals: [
      [10, i32],
      [10, v128],
      [1, f32],
    ],
    body: [
      ...get(HD),
      ...c32(2),
      op.i32Shl,
      ...set(HDB),
      ...c32(0),
      ...set(NI),
      ...whileNot(
        [...get(NI), ...get(N), op.i32GeU],
        [
          ...get(LENS),
          ...get(NI),
          ...c32(2),
          op.i32Shl,
          op.i32Add,
          op.i32Load,
          ...memarg(2, 0),
          ...set(LEN),
          ...get(LEN),
          op.f32ConvertI32U,
          ...simd.splat,
          ...set(LV),
          ...c32(0),
          ...set(HH),
          ...whileNot(
            [...get(HH), ...get(H), op.i32GeU],
            [
              // q of this token and head; the head's key and value rows
              ...get(QKV),
              ...get(NI),
              ...get(C),
              ...c32(3),
              op.i32Mul,
              op.i32Mul,
              ...get(HH),
              ...get(HD),
              op.i32Mul,
              op.i32Add,
              ...c32(2),
              op.i32Shl,
              op.i32Add,
              ...set(Q),
              ...get(BASES),
              ...get(NI),
              ...c32(2),
              op.i32Shl,
              op.i32Add,
              op.i32Load,
              ...memarg(2, 0),
              ...get(HH),
              ...get(GROUP),
              op.i32DivU,
              ...get(TMAX),
              op.i32Mul,
              ...get(HDB),
              op.i32Mul,
              op.i32Add,
              ...set(P),
              ...get(KC),
              ...get(P),
              op.i32Add,
              ...set(KB),
              ...get(VC),
              ...get(P),
              op.i32Add,
              ...set(VB),
              // scores[t] = q·k_t · scale, and their max
              ...f32c(-Infinity),
              ...set(MAXS),
              ...c32(0),
              ...set(T),
              ...get(KB),
              ...set(P),
              ...whileNot(
                [...get(T), ...get(LEN), op.i32GeU],
                [
                  ...f32x4c(0),
                  ...set(ACC),
                  ...forBytes(D, get(HDB), 16, [...get(ACC), ...load(at(Q, D)), ...load(at(P, D)), ...simd.mul, ...simd.add, ...set(ACC)]),
                  ...get(SCORES),
                  ...get(T),
                  ...c32(2),
                  op.i32Shl,
                  op.i32Add,
                  ...laneSum(ACC),
                  ...get(SCALE),
                  op.f32Mul,
                  op.f32Store,
                  ...memarg(2, 0),
                  ...get(MAXS),
                  ...get(SCORES),
                  ...get(T),
                  ...c32(2),
                  op.i32Shl,
                  op.i32Add,
                  op.f32Load,
                  ...memarg(2, 0),
                  op.f32Max,
                  ...set(MAXS),
                  ...addTo(P, get(HDB)),
                  ...addTo(T, c32(1)),
                ],
              ),
              // scores = exp(scores - max), lanes at t >= len masked to 0; their sum
              ...get(MAXS),
              ...simd.splat,
              ...set(MV),
              ...f32x4c(0),
              ...set(SUM),
              ...f32x4Lanes([0, 1, 2, 3]),
              ...set(JV),
              ...forBytes(D, [...get(LEN), ...c32(2), op.i32Shl], 16, [
                ...load(at(SCORES, D)),
                ...get(MV),
                ...simd.sub,
                ...set(X),
                ...expInto(E, X, [NN, RR, PP]),
                ...get(E),
                ...get(JV),
                ...get(LV),
                ...simd.ge,
                ...simd.andnot,
                ...set(E),
                ...store(at(SCORES, D), get(E)),
                ...get(SUM),
                ...get(E),
                ...simd.add,
                ...set(SUM),
                ...get(JV),
                ...f32x4c(4),
                ...simd.add,
                ...set(JV),
              ]),
              ...f32c(1),
              ...laneSum(SUM),
              op.f32Div,
              ...simd.splat,
              ...set(MV),
              // y = Σ_t p_t · v_t / Σ, four of the head's columns at a time
              ...forBytes(D, get(HDB), 16, [
                ...f32x4c(0),
                ...set(ACC),
                ...c32(0),
                ...set(T),
                ...get(VB),
                ...get(D),
                op.i32Add,
                ...set(P),
                ...whileNot(
                  [...get(T), ...get(LEN), op.i32GeU],
                  [
                    ...get(ACC),
                    ...get(SCORES),
                    ...get(T),
                    ...c32(2),
                    op.i32Shl,
                    op.i32Add,
                    ...simd.load32Splat,
                    ...memarg(2, 0),
                    ...load(get(P)),
                    ...simd.mul,
                    ...simd.add,
                    ...set(ACC),
                    ...addTo(P, get(HDB)),
                    ...addTo(T, c32(1)),
                  ],
                ),
                ...store(
                  [
                    ...get(Y),
                    ...get(NI),
                    ...get(C),
                    op.i32Mul,
                    ...get(HH),
                    ...get(HD),
                    op.i32Mul,
                    op.i32Add,
                    ...c32(2),
                    op.i32Shl,
                    op.i32Add,
                    ...get(D),
                    op.i32Add,
                  ],
                  [...get(ACC), ...get(MV), ...simd.mul],
                ),
              ]),
              ...addTo(HH, c32(1)),
            ],
          ),
          ...addTo(NI, c32(1)),
        ],
      ),
    ],
  };
}

export function opFunctions(): WasmFunction[] {
  return [gelu(), geluBackward(), columnSum(), add(), layerNorm(), layerNormBackward(), causalSoftmax(), softmaxBackward(), cachedAttention()];
}

/** The operations on arrays in the kernel's memory; each returns false (doing nothing) when it cannot run. */
export interface SimdOps {
  /** out = gelu(x), tanhOut (when given) keeps the tanh term */
  gelu(out: Float32Array, x: Float32Array, n: number, tanhOut: Float32Array | null): boolean;
  /** dx = dy · gelu'(x) */
  geluBackward(dx: Float32Array, dy: Float32Array, x: Float32Array, tanh: Float32Array, n: number): boolean;
  /** out[N] += column sums of dy[M, N] */
  columnSum(out: Float32Array, dy: Float32Array, M: number, N: number): boolean;
  /** out = a + b over n floats (out may be a or b) */
  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): boolean;
  /** out = (x - mean) · rstd · gain + bias per row, keeping mean and rstd */
  layerNorm(out: Float32Array, mean: Float32Array, rstd: Float32Array, x: Float32Array, gain: Float32Array, bias: Float32Array, M: number, C: number): boolean;
  /** row-wise causal softmax in place over `blocks` [T, T] blocks (rows keep columns 0..i) */
  causalSoftmax(att: Float32Array, blocks: number, T: number): boolean;
  /** per row of [rows, T]: dAtt = att · (dAtt - Σ att·dAtt) · scale */
  softmaxBackward(dAtt: Float32Array, att: Float32Array, rows: number, T: number, scale: number): boolean;
  /** dx += LayerNorm's input gradient; dGain and dBias, when given, accumulate the parameter gradients */
  layerNormBackward(
    dx: Float32Array,
    dGain: Float32Array | null,
    dBias: Float32Array | null,
    dy: Float32Array,
    x: Float32Array,
    mean: Float32Array,
    rstd: Float32Array,
    gain: Float32Array,
    M: number,
    C: number,
  ): boolean;
}

type Exports = Record<string, (...args: number[]) => void>;

/**
 * Binds the exported operations. `owns` says whether an array lies in the kernel's memory; `withCopy` runs a
 * function on in-memory copies of small arrays (weights and their gradients live in ordinary JS arrays) and
 * copies the ones marked as outputs back.
 */
export function bindOps(
  exports: Exports,
  owns: (a: Float32Array) => boolean,
  withCopies: <R>(arrays: (Float32Array | null)[], outputs: boolean[], fn: (copies: (Float32Array | null)[]) => R) => R,
): SimdOps {
  const addr = (a: Float32Array) => a.byteOffset;
  return {
    gelu(out, x, n, tanhOut) {
      if (n % 4 !== 0 || !owns(out) || !owns(x) || (tanhOut && !owns(tanhOut))) return false;
      exports.gelu(addr(x), addr(out), tanhOut ? addr(tanhOut) : 0, n);
      return true;
    },
    geluBackward(dx, dy, x, tanh, n) {
      if (n % 4 !== 0 || ![dx, dy, x, tanh].every(owns)) return false;
      exports.geluBackward(addr(dx), addr(dy), addr(x), addr(tanh), n);
      return true;
    },
    columnSum(out, dy, M, N) {
      if (N % 16 !== 0 || !owns(dy)) return false;
      return withCopies([out], [true], ([o]) => {
        exports.columnSum(addr(o!), addr(dy), M, N);
        return true;
      });
    },
    add(out, a, b, n) {
      if (n % 4 !== 0 || ![out, a, b].every(owns)) return false;
      exports.add(addr(out), addr(a), addr(b), n);
      return true;
    },
    causalSoftmax(att, blocks, T) {
      if (T % 4 !== 0 || !owns(att)) return false;
      exports.causalSoftmax(addr(att), blocks, T);
      return true;
    },
    softmaxBackward(dAtt, att, rows, T, scale) {
      if (T % 4 !== 0 || !owns(dAtt) || !owns(att)) return false;
      exports.softmaxBackward(addr(dAtt), addr(att), rows, T, scale);
      return true;
    },
    layerNorm(out, mean, rstd, x, gain, bias, M, C) {
      if (C % 4 !== 0 || ![out, mean, rstd, x].every(owns)) return false;
      return withCopies([gain, bias], [false, false], ([g, b]) => {
        exports.layerNorm(addr(out), addr(mean), addr(rstd), addr(x), addr(g!), addr(b!), M, C);
        return true;
      });
    },
    layerNormBackward(dx, dGain, dBias, dy, x, mean, rstd, gain, M, C) {
      if (C % 4 !== 0 || ![dx, dy, x, mean, rstd].every(owns)) return false;
      return withCopies([dGain, dBias, gain], [true, true, false], ([dg, db, g]) => {
        exports.layerNormBackward(addr(dx), dg ? addr(dg) : 0, db ? addr(db) : 0, addr(dy), addr(x), addr(mean), addr(rstd), addr(g!), M, C);
        return true;
      });
    },
  };
}
