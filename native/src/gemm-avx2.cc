// The kernel on AVX2 with FMA (8 floats a vector; tiles of 6 x 16, 12 accumulators of the 16 registers).
// Compiled with -mavx2 -mfma.
#include <immintrin.h>
#include "gemm-kernel.h"
#include "ops-kernel.h"

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
  static T loadPartialOr(const float* p, int n, float fill) {
    return n >= W ? load(p) : _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, mask(n)), _mm256_castsi256_ps(mask(n)));
  }
  static T keep(T v, int n) { return n >= W ? v : _mm256_and_ps(v, _mm256_castsi256_ps(mask(n))); }
  static T set(float x) { return _mm256_set1_ps(x); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T neg(T a) { return _mm256_sub_ps(_mm256_setzero_ps(), a); }
  static T min(T a, T b) { return _mm256_min_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T sqrt(T a) { return _mm256_sqrt_ps(a); }
  static T round(T a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n for whole n in [-126, 127], through the exponent bits
  static T scale2(T p, T n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
  static T keepWhereGreater(T a, T b, T v) { return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), v); }
  static float sum(T a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float maxOf(T a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

Isa avx2Isa() {
  return {"avx2", &runPiece<Avx2>, Avx2::MR, 2 * Avx2::W,
          {&swigluForward<Avx2>, &swigluBackward<Avx2>, &rmsNormForward<Avx2>, &rmsNormBackward<Avx2>, &rmsNormGainGradient<Avx2>, &adamw<Avx2>, &blockSquares<Avx2>,
          &softmaxRow<Avx2>, &softmaxStatsRows<Avx2>, &lossGradientRows<Avx2>, &causalSoftmax<Avx2>, &softmaxBackward<Avx2>, &ropeAndExpand<Avx2>, &ropeAndExpandBackward<Avx2>}};
}

}  // namespace tinkerlab
