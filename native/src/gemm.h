// One kernel call as the TypeScript side describes it (lib/model/simd-gemm.ts, GemmArgs): C[M, N] (+)=
// scale * A[M, K] @ B[K, N], with A[i][k] at a + i*ars + k*acs (ars or acs is 1), B[k][j] at b + k*brs + j*bcs
// (brs or bcs is 1) and C[i][j] at c + i*crs + j. Positions and strides are in floats from the start of the
// bound memory.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tinkerlab {

struct GemmCall {
  const float* a;
  const float* b;
  float* c;
  int M, K, N;
  ptrdiff_t ars, acs, brs, bcs, crs;
  bool accumulate;
  float scale;
};

/** Computes rows [row0, row1) and columns [col0, col1) of a call; pack holds packFloats floats. */
using PieceFunction = void (*)(const GemmCall& call, int row0, int row1, int col0, int col1, float* pack);

/** The elementwise and per-row operations of ops-kernel.h, compiled for one instruction set. */
struct Ops {
  void (*swigluForward)(float* act, const float* fc, int rows, int F);
  void (*swigluBackward)(float* dFc, const float* dAct, const float* fc, int rows, int F);
  void (*rmsNormForward)(float* out, float* rstd, const float* x, const float* gain, int rows, int C, float eps);
  void (*rmsNormBackward)(float* dx, const float* dy, const float* x, const float* rstd, const float* gain, int rows, int C);
  void (*rmsNormGainGradient)(float* dGain, const float* dy, const float* x, const float* rstd, int rows, int C, int c0, int c1);
  void (*adamw)(float* w, float* g, float* m, float* v, ptrdiff_t n, float clip, float b1, float b2, float stepSize, float invBc2,
                float eps, float decay);
  void (*blockSquares)(const float* g, ptrdiff_t n, ptrdiff_t b0, ptrdiff_t b1, float* sums);
  void (*softmaxRow)(const float* z, int n, float invTau, float* probs, double* stats);
  void (*softmaxStatsRows)(const float* z, int n, float invTau, const int32_t* rows, double* stats, int64_t r0, int64_t r1);
  void (*lossGradientRows)(float* d, const float* z, int n, float invTau, const int32_t* rows, const int32_t* targets, const float* scales,
                           const float* ents, const double* stats, int64_t r0, int64_t r1);
  void (*causalSoftmax)(float* att, int T, int64_t r0, int64_t r1);
  void (*softmaxBackward)(float* dAtt, const float* att, int T, float scale, int64_t r0, int64_t r1);
  void (*ropeAndExpand)(float* qkv, const float* raw, const int* positions, int N, int H, int kvHeads, int hd, const float* cos, const float* sin);
  void (*ropeAndExpandBackward)(float* dRaw, const float* dQkv, const int* positions, int N, int H, int kvHeads, int hd, const float* cos,
                                const float* sin);
};

struct Isa {
  const char* name;
  PieceFunction piece;
  int tileRows, tileColumns;
  Ops ops;
};

Isa avx512Isa();
Isa avx2Isa();

// Inner-dimension block: a tile's strip of A (8 x KC floats, 8 KiB) stays in L1 while it meets every panel
// of the packed block of B (KC x NC floats, 256 KiB, in L2).
constexpr int KC = 256;
constexpr int NC = 256;
// B's packed block, then one tile's strip of A (KC x 8 floats) when A is read down its columns far apart
constexpr int packFloats = KC * NC + KC * 8;
// A transposed with columns at least this many floats apart is copied strip by strip: read in place, every step
// of a tile would touch another page
constexpr int packAStride = 256;

}  // namespace tinkerlab
