// The kernel on AVX2 with FMA (8 floats a vector; tiles of 6 x 16, 12 accumulators of the 16 registers).
// Compiled with -mavx2 -mfma.
#include <immintrin.h>
#include "gemm-kernel.h"

namespace tinkerlab {
namespace {

struct Avx2 {
  using T = __m256;
  static constexpr int W = 8, MR = 6;
  static T zero() { return _mm256_setzero_ps(); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256i mask(int n) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
  }
  static T loadPartial(const float* p, int n) { return n >= W ? load(p) : _mm256_maskload_ps(p, mask(n)); }
  static void storePartial(float* p, T v, int n) {
    if (n >= W) store(p, v);
    else _mm256_maskstore_ps(p, mask(n), v);
  }
};

}  // namespace

Isa avx2Isa() { return {"avx2", &runPiece<Avx2>, Avx2::MR, 2 * Avx2::W}; }

}  // namespace tinkerlab
