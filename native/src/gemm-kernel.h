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
#include <immintrin.h>
#include <cstddef>
#include <cstdint>
#include "gemm.h"

namespace tinkerlab {
namespace {

constexpr int smaller(int a, int b) { return a < b ? a : b; }
// How many rows ahead a tile that reads B in place asks for (prefetching past B's end is harmless: no fault)
constexpr int prefetchRows = 64;

/**
 * One MR x NR tile over kc steps of the inner dimension. B's rows of NR columns lie `bs` floats apart: a packed
 * panel (bs = NR) or B itself (bs = its row stride, Partial when the tile is narrower than NR, so no column past
 * the matrix is read).
 */
template <class V, int MR, bool AColumns, bool Direct, bool Partial>
inline void tile(const float* a, ptrdiff_t ars, ptrdiff_t acs, const float* bp, ptrdiff_t bs, int kc, float* c, ptrdiff_t crs,
                        int width, bool overwrite, float scale) {
  typename V::T acc[MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = V::zero();
  const int w0 = smaller(width, V::W), w1 = width - V::W;
  for (int k = 0; k < kc; k++) {
    // B read in place is a strided stream that the hardware prefetchers follow poorly: ask for rows ahead
    if (Direct) {
      // a row of the panel spans three cache lines when B is not 64-byte aligned (arrays from the JS heap)
      _mm_prefetch((const char*)(bp + prefetchRows * bs), _MM_HINT_T0);
      _mm_prefetch((const char*)(bp + prefetchRows * bs + V::W), _MM_HINT_T0);
      _mm_prefetch((const char*)(bp + prefetchRows * bs + 2 * V::W - 1), _MM_HINT_T0);
    }
    const typename V::T b0 = Partial ? V::loadPartial(bp, w0) : V::load(bp);
    const typename V::T b1 = Partial ? (w1 > 0 ? V::loadPartial(bp + V::W, w1) : V::zero()) : V::load(bp + V::W);
    bp += bs;
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

template <class V, bool AColumns, bool Direct = false, bool Partial = false>
void tileRows(int mr, const float* a, ptrdiff_t ars, ptrdiff_t acs, const float* bp, ptrdiff_t bs, int kc, float* c, ptrdiff_t crs,
                     int width, bool overwrite, float scale) {
  constexpr int MR = V::MR;
  static_assert(MR <= 8, "tileRows dispatches heights 1 to 8");
  switch (mr) {
#define TINKERLAB_TILE(R) \
  case R:                 \
    if constexpr (R <= MR) return tile<V, R, AColumns, Direct, Partial>(a, ars, acs, bp, bs, kc, c, crs, width, overwrite, scale);
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

/**
 * A piece of at most one tile's height whose B has adjacent columns, read in place: packing B would cost more
 * than the one pass over it (a decoding step's product reads each weight once). Each element is computed by the
 * same operations as through a packed panel, so results do not depend on the path.
 */
template <class V>
void runDirect(const GemmCall& call, int row0, int row1, int col0, int col1) {
  constexpr int NR = 2 * V::W;
  const bool aColumns = call.acs != 1;
  const int K = call.K, mr = row1 - row0;
  for (int k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
    const int kc = smaller(KC, K - k0);
    const bool overwrite = k0 == 0 && !call.accumulate;
    const float* a = call.a + (ptrdiff_t)row0 * call.ars + (ptrdiff_t)k0 * call.acs;
    // When B's rows all start at the same place in a cache line, a narrow first tile brings the others to line
    // boundaries: a panel row read unaligned spans one line more (2x slower on arrays from the JS heap).
    const int lineFloats = 16;
    const int misaligned = call.brs % lineFloats == 0 ? (int)(((uintptr_t)(call.b + col0) / sizeof(float)) % lineFloats) : 0;
    const int first = misaligned ? lineFloats - misaligned : NR;
    for (int j = col0; j < col1; j += j == col0 ? first : NR) {
      const float* b = call.b + (ptrdiff_t)k0 * call.brs + j;
      float* c = call.c + (ptrdiff_t)row0 * call.crs + j;
      const int width = smaller(j == col0 ? first : NR, col1 - j);
      if (width < NR) {
        if (aColumns) tileRows<V, true, true, true>(mr, a, call.ars, call.acs, b, call.brs, kc, c, call.crs, width, overwrite, call.scale);
        else tileRows<V, false, true, true>(mr, a, call.ars, call.acs, b, call.brs, kc, c, call.crs, width, overwrite, call.scale);
      } else if (aColumns) {
        tileRows<V, true, true>(mr, a, call.ars, call.acs, b, call.brs, kc, c, call.crs, width, overwrite, call.scale);
      } else {
        tileRows<V, false, true>(mr, a, call.ars, call.acs, b, call.brs, kc, c, call.crs, width, overwrite, call.scale);
      }
    }
  }
}

/** Computes rows [row0, row1) and columns [col0, col1) of one call; `pack` holds KC x NC floats. */
template <class V>
void runPiece(const GemmCall& call, int row0, int row1, int col0, int col1, float* pack) {
  constexpr int NR = 2 * V::W, MR = V::MR;
  if (call.bcs == 1 && row1 - row0 <= MR) return runDirect<V>(call, row0, row1, col0, col1);
  const bool aColumns = call.acs != 1;  // A's rows are adjacent (A is a transpose): one pointer per tile
  const int K = call.K;
  for (int k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
    const int kc = smaller(KC, K - k0);
    const bool overwrite = k0 == 0 && !call.accumulate;
    for (int n0 = col0; n0 < col1; n0 += NC) {
      const int nc = smaller(NC, col1 - n0);
      packB<V>(call.b + (ptrdiff_t)k0 * call.brs + (ptrdiff_t)n0 * call.bcs, call.brs, call.bcs, kc, nc, pack);
      for (int i = row0; i < row1; i += MR) {
        const int mr = smaller(MR, row1 - i);
        const float* a = call.a + (ptrdiff_t)i * call.ars + (ptrdiff_t)k0 * call.acs;
        ptrdiff_t acs = call.acs;
        if (aColumns && acs >= packAStride) {
          // the strip's kc steps of mr adjacent floats, copied next to each other (the same values, so the same sums)
          float* strip = pack + KC * NC;
          for (int k = 0; k < kc; k++) V::storePartial(strip + k * MR, V::loadPartial(a + (ptrdiff_t)k * acs, mr), MR);
          a = strip;
          acs = MR;
        }
        for (int j = 0; j < nc; j += NR) {
          float* c = call.c + (ptrdiff_t)i * call.crs + n0 + j;
          const float* bp = pack + (ptrdiff_t)j * kc;
          if (aColumns) tileRows<V, true>(mr, a, call.ars, acs, bp, NR, kc, c, call.crs, smaller(NR, nc - j), overwrite, call.scale);
          else tileRows<V, false>(mr, a, call.ars, acs, bp, NR, kc, c, call.crs, smaller(NR, nc - j), overwrite, call.scale);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tinkerlab
