// The kernel on AVX-512 (16 floats a vector; tiles of 8 x 32). Compiled with -mavx512f -mfma.
#include <immintrin.h>
#include "gemm-kernel.h"

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
};

}  // namespace

Isa avx512Isa() { return {"avx512", &runPiece<Avx512>, Avx512::MR, 2 * Avx512::W}; }

}  // namespace tinkerlab
