// The kernel on AVX-512 (16 floats a vector; tiles of 8 x 32). Compiled with -mavx512f -mfma.
#include <immintrin.h>
#include "gemm-kernel.h"
#include "ops-kernel.h"

namespace tinkerlab {
namespace {

struct Avx512 {
  using T = __m512;
  static constexpr int W = 16, MR = 8;
  static T zero() { return _mm512_setzero_ps(); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static __mmask16 mask(int n) { return n >= W ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }
  static T loadPartial(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void storePartial(float* p, T v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static T loadPartialOr(const float* p, int n, float fill) { return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), mask(n), p); }
  static T keep(T v, int n) { return _mm512_maskz_mov_ps(mask(n), v); }
  static T set(float x) { return _mm512_set1_ps(x); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T neg(T a) { return _mm512_sub_ps(_mm512_setzero_ps(), a); }
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T sqrt(T a) { return _mm512_sqrt_ps(a); }
  static T round(T a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static T scale2(T p, T n) { return _mm512_scalef_ps(p, n); }
  static T keepWhereGreater(T a, T b, T v) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), v); }
  static float sum(T a) { return _mm512_reduce_add_ps(a); }
  static float maxOf(T a) { return _mm512_reduce_max_ps(a); }
};

}  // namespace

Isa avx512Isa() {
  return {"avx512", &runPiece<Avx512>, Avx512::MR, 2 * Avx512::W,
          {&swigluForward<Avx512>, &swigluBackward<Avx512>, &rmsNormForward<Avx512>, &rmsNormBackward<Avx512>, &rmsNormGainGradient<Avx512>, &adamw<Avx512>, &blockSquares<Avx512>,
          &softmaxRow<Avx512>, &softmaxStatsRows<Avx512>, &lossGradientRows<Avx512>, &causalSoftmax<Avx512>, &softmaxBackward<Avx512>, &ropeAndExpand<Avx512>, &ropeAndExpandBackward<Avx512>}};
}

}  // namespace tinkerlab
