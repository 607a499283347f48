// One kernel call as the TypeScript side describes it (lib/model/simd-gemm.ts, GemmArgs): C[M, N] (+)=
// scale * A[M, K] @ B[K, N], with A[i][k] at a + i*ars + k*acs (ars or acs is 1), B[k][j] at b + k*brs + j*bcs
// (brs or bcs is 1) and C[i][j] at c + i*crs + j. Positions and strides are in floats from the start of the
// bound memory.
#pragma once
#include <cstddef>

namespace tinkerlab {

struct GemmCall {
  ptrdiff_t a, b, c;
  int M, K, N;
  ptrdiff_t ars, acs, brs, bcs, crs;
  bool accumulate;
  float scale;
};

/** Computes rows [row0, row1) and columns [col0, col1) of a call; pack holds packFloats floats. */
using PieceFunction = void (*)(float* heap, const GemmCall& call, int row0, int row1, int col0, int col1, float* pack);

struct Isa {
  const char* name;
  PieceFunction piece;
  int tileRows, tileColumns;
};

Isa avx512Isa();
Isa avx2Isa();

// Inner-dimension block: a tile's strip of A (8 x KC floats, 8 KiB) stays in L1 while it meets every panel
// of the packed block of B (KC x NC floats, 256 KiB, in L2).
constexpr int KC = 256;
constexpr int NC = 256;
constexpr int packFloats = KC * NC;

}  // namespace tinkerlab
