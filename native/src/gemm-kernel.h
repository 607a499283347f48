// The blocked matrix kernel, written once over a vector type and compiled once per instruction set
// (gemm-avx512.cc, gemm-avx2.cc, each with its own compiler flags); addon.cc picks one at run time.
//
// C[M, N] (+)= scale * A[M, K] @ B[K, N] over one piece of the result (a range of rows and of columns).
// The inner dimension is cut into blocks of KC; for each block the piece's columns of B are packed into
// panels of NR columns (contiguous, zero-padded), and each MR x NR tile of C is summed in registers with fused
// multiply-adds, reading A in place (rows or columns adjacent). Every element of C is computed by the same
// sequence of operations whatever the piece, tile or thread: the sum over each block in order of k, then
// C = scale * sum (+ C). So results do not depend on how a product is cut into pieces or shared by threads.
//
// No standard-library templates here: this file is compiled with different instruction sets in different
// files, and a template instantiated in both (std::min, say) would be merged by the linker into one copy that
// might use instructions the CPU lacks.
#pragma once
#include <cstddef>
#include "gemm.h"

namespace tinkerlab {
namespace {

constexpr int smaller(int a, int b) { return a < b ? a : b; }

template <class V, int MR, bool AColumns>
inline void tile(const float* a, ptrdiff_t ars, ptrdiff_t acs, const float* bp, int kc, float* c, ptrdiff_t crs,
                        int width, bool overwrite, float scale) {
  constexpr int NR = 2 * V::W;
  typename V::T acc[MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = V::zero();
  for (int k = 0; k < kc; k++) {
    const typename V::T b0 = V::load(bp), b1 = V::load(bp + V::W);
    bp += NR;
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      const typename V::T x = V::broadcast(AColumns ? a + r : a + r * ars);
      acc[r][0] = V::fma(x, b0, acc[r][0]);
      acc[r][1] = V::fma(x, b1, acc[r][1]);
    }
    a += acs;
  }
  const typename V::T s = V::broadcast(&scale);
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++) {
    float* row = c + r * crs;
    for (int h = 0; h < 2; h++) {
      const int n = smaller(width - h * V::W, V::W);
      if (n <= 0) break;
      const typename V::T old = overwrite ? V::zero() : V::loadPartial(row + h * V::W, n);
      V::storePartial(row + h * V::W, V::fma(acc[r][h], s, old), n);
    }
  }
}

template <class V, bool AColumns>
void tileRows(int mr, const float* a, ptrdiff_t ars, ptrdiff_t acs, const float* bp, int kc, float* c, ptrdiff_t crs,
                     int width, bool overwrite, float scale) {
  constexpr int MR = V::MR;
  static_assert(MR <= 8, "tileRows dispatches heights 1 to 8");
  switch (mr) {
#define TINKERLAB_TILE(R) \
  case R:                 \
    if constexpr (R <= MR) return tile<V, R, AColumns>(a, ars, acs, bp, kc, c, crs, width, overwrite, scale);
    TINKERLAB_TILE(1) TINKERLAB_TILE(2) TINKERLAB_TILE(3) TINKERLAB_TILE(4)
    TINKERLAB_TILE(5) TINKERLAB_TILE(6) TINKERLAB_TILE(7) TINKERLAB_TILE(8)
#undef TINKERLAB_TILE
  }
}

/**
 * Packs the kc x nc block of B at b into panels of NR columns, kc rows each, the last one zero-padded. B's rows
 * are adjacent (bcs == 1) or, for a transpose, its columns (brs == 1).
 */
template <class V>
void packB(const float* b, ptrdiff_t brs, ptrdiff_t bcs, int kc, int nc, float* out) {
  constexpr int NR = 2 * V::W;
  for (int j = 0; j < nc; j += NR, out += (ptrdiff_t)kc * NR) {
    const int w = smaller(NR, nc - j);
    if (bcs != 1) {
      // column t of the panel is contiguous in B: read it down, write it across the panel's rows
      for (int t = 0; t < NR; t++) {
        const float* src = b + (ptrdiff_t)(j + t) * bcs;
        for (int k = 0; k < kc; k++) out[k * NR + t] = t < w ? src[k] : 0.0f;
      }
      continue;
    }
    for (int k = 0; k < kc; k++) {
      const float* src = b + k * brs + j;
      float* row = out + k * NR;
      if (w == NR) {
        V::store(row, V::load(src));
        V::store(row + V::W, V::load(src + V::W));
      } else {
        for (int t = 0; t < NR; t++) row[t] = t < w ? src[t] : 0.0f;
      }
    }
  }
}

/** Computes rows [row0, row1) and columns [col0, col1) of one call; `pack` holds KC x NC floats. */
template <class V>
void runPiece(float* heap, const GemmCall& call, int row0, int row1, int col0, int col1, float* pack) {
  constexpr int NR = 2 * V::W, MR = V::MR;
  const bool aColumns = call.acs != 1;  // A's rows are adjacent (A is a transpose): one pointer per tile
  const int K = call.K;
  for (int k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
    const int kc = smaller(KC, K - k0);
    const bool overwrite = k0 == 0 && !call.accumulate;
    for (int n0 = col0; n0 < col1; n0 += NC) {
      const int nc = smaller(NC, col1 - n0);
      packB<V>(heap + call.b + (ptrdiff_t)k0 * call.brs + (ptrdiff_t)n0 * call.bcs, call.brs, call.bcs, kc, nc, pack);
      for (int i = row0; i < row1; i += MR) {
        const int mr = smaller(MR, row1 - i);
        const float* a = heap + call.a + (ptrdiff_t)i * call.ars + (ptrdiff_t)k0 * call.acs;
        for (int j = 0; j < nc; j += NR) {
          float* c = heap + call.c + (ptrdiff_t)i * call.crs + n0 + j;
          const float* bp = pack + (ptrdiff_t)j * kc;
          if (aColumns) tileRows<V, true>(mr, a, call.ars, call.acs, bp, kc, c, call.crs, smaller(NR, nc - j), overwrite, call.scale);
          else tileRows<V, false>(mr, a, call.ars, call.acs, bp, kc, c, call.crs, smaller(NR, nc - j), overwrite, call.scale);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tinkerlab
