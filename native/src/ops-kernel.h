// The engine's elementwise and per-row operations, written once over a vector type and compiled once per
// instruction set (gemm-avx512.cc, gemm-avx2.cc), like the matrix kernel. Each works on plain float arrays
// (any Float32Array the addon is handed) and computes every element the same way whatever range of rows a
// thread is given, so results do not depend on how the work is shared.
//
// exp is a polynomial after a range reduction (as Cephes' expf): relative error about 2e-7 over the floats
// where it does not overflow, exactly 0 below -87.3 (so a logit masked to -inf has probability 0).
#pragma once
#include <cstddef>
#include "gemm.h"

namespace tinkerlab {
namespace {

template <class V>
inline typename V::T vexp(typename V::T x) {
  using T = typename V::T;
  const T hi = V::set(88.3762626647949f), lo = V::set(-87.3365447505531f);
  const T input = x;
  x = V::min(V::max(x, lo), hi);
  // x = n ln2 + r, |r| <= ln2 / 2
  const T n = V::round(V::mul(x, V::set(1.44269504088896341f)));
  T r = V::fma(n, V::set(-0.693359375f), x);
  r = V::fma(n, V::set(2.12194440e-4f), r);
  T p = V::set(1.9875691500e-4f);
  p = V::fma(p, r, V::set(1.3981999507e-3f));
  p = V::fma(p, r, V::set(8.3334519073e-3f));
  p = V::fma(p, r, V::set(4.1665795894e-2f));
  p = V::fma(p, r, V::set(1.6666665459e-1f));
  p = V::fma(p, r, V::set(5.0000001201e-1f));
  const T r2 = V::mul(r, r);
  p = V::fma(p, r2, V::add(r, V::set(1.0f)));
  // below the smallest normal result (and at -inf, a masked logit) exactly 0, as Math.exp gives
  return V::keepWhereGreater(input, lo, V::scale2(p, n));
}

/** Calls body(i, count) over [0, n) in vectors, the last one partial. */
template <class V, class F>
inline void lanes(ptrdiff_t n, F body) {
  for (ptrdiff_t i = 0; i < n; i += V::W) body(i, n - i < V::W ? (int)(n - i) : V::W);
}

template <class V>
void swigluForward(float* act, const float* fc, int rows, int F) {
  using T = typename V::T;
  const T one = V::set(1.0f);
  for (int n = 0; n < rows; n++) {
    const float* gate = fc + (ptrdiff_t)n * 2 * F;
    const float* up = gate + F;
    float* out = act + (ptrdiff_t)n * F;
    lanes<V>(F, [&](ptrdiff_t i, int w) {
      const T g = V::loadPartial(gate + i, w);
      const T silu = V::div(g, V::add(one, vexp<V>(V::neg(g))));
      V::storePartial(out + i, V::mul(silu, V::loadPartial(up + i, w)), w);
    });
  }
}

template <class V>
void swigluBackward(float* dFc, const float* dAct, const float* fc, int rows, int F) {
  using T = typename V::T;
  const T one = V::set(1.0f);
  for (int n = 0; n < rows; n++) {
    const float* gate = fc + (ptrdiff_t)n * 2 * F;
    const float* up = gate + F;
    const float* d = dAct + (ptrdiff_t)n * F;
    float* dGate = dFc + (ptrdiff_t)n * 2 * F;
    float* dUp = dGate + F;
    lanes<V>(F, [&](ptrdiff_t i, int w) {
      const T g = V::loadPartial(gate + i, w);
      const T u = V::loadPartial(up + i, w);
      const T dy = V::loadPartial(d + i, w);
      const T sig = V::div(one, V::add(one, vexp<V>(V::neg(g))));
      // d silu / dg = sig * (1 + g * (1 - sig))
      const T dsilu = V::mul(sig, V::fma(g, V::sub(one, sig), one));
      V::storePartial(dGate + i, V::mul(V::mul(dy, u), dsilu), w);
      V::storePartial(dUp + i, V::mul(dy, V::mul(g, sig)), w);
    });
  }
}

template <class V>
void rmsNormForward(float* out, float* rstd, const float* x, const float* gain, int rows, int C, float eps) {
  using T = typename V::T;
  for (int n = 0; n < rows; n++) {
    const float* xr = x + (ptrdiff_t)n * C;
    T ss = V::zero();
    lanes<V>(C, [&](ptrdiff_t i, int w) {
      const T v = V::loadPartial(xr + i, w);
      ss = V::fma(v, v, ss);
    });
    const float s = 1.0f / __builtin_sqrtf(V::sum(ss) / (float)C + eps);
    rstd[n] = s;
    const T sv = V::set(s);
    float* o = out + (ptrdiff_t)n * C;
    lanes<V>(C, [&](ptrdiff_t i, int w) { V::storePartial(o + i, V::mul(V::mul(V::loadPartial(xr + i, w), sv), V::loadPartial(gain + i, w)), w); });
  }
}

/** dx += the input gradient (the gain's gradient: rmsNormGainGradient). */
template <class V>
void rmsNormBackward(float* dx, const float* dy, const float* x, const float* rstd, const float* gain, int rows, int C) {
  using T = typename V::T;
  for (int n = 0; n < rows; n++) {
    const float* xr = x + (ptrdiff_t)n * C;
    const float* dr = dy + (ptrdiff_t)n * C;
    float* dxr = dx + (ptrdiff_t)n * C;
    const T s = V::set(rstd[n]);
    T dot = V::zero();
    lanes<V>(C, [&](ptrdiff_t i, int w) {
      dot = V::fma(V::mul(V::loadPartial(dr + i, w), V::loadPartial(gain + i, w)), V::loadPartial(xr + i, w), dot);
    });
    const T mean = V::set(V::sum(dot) * rstd[n] / (float)C);
    lanes<V>(C, [&](ptrdiff_t i, int w) {
      const T xhat = V::mul(V::loadPartial(xr + i, w), s);
      const T d = V::loadPartial(dr + i, w);
      const T g = V::fma(V::neg(xhat), mean, V::mul(d, V::loadPartial(gain + i, w)));
      V::storePartial(dxr + i, V::fma(g, s, V::loadPartial(dxr + i, w)), w);
    });
  }
}

/** dGain[c0 .. c1) += the sum over rows of dy * x * rstd, row by row (the same order whatever the column range). */
template <class V>
void rmsNormGainGradient(float* dGain, const float* dy, const float* x, const float* rstd, int rows, int C, int c0, int c1) {
  using T = typename V::T;
  for (int n = 0; n < rows; n++) {
    const float* xr = x + (ptrdiff_t)n * C;
    const float* dr = dy + (ptrdiff_t)n * C;
    const T s = V::set(rstd[n]);
    lanes<V>(c1 - c0, [&](ptrdiff_t i, int w) {
      const ptrdiff_t c = c0 + i;
      const T xhat = V::mul(V::loadPartial(xr + c, w), s);
      V::storePartial(dGain + c, V::fma(V::loadPartial(dr + c, w), xhat, V::loadPartial(dGain + c, w)), w);
    });
  }
}

/**
 * AdamW on n floats: w = w * decay - stepSize * m / (sqrt(v * invBc2) + eps), with the gradient times clip; the
 * gradient is zeroed as it is read (one pass over memory instead of two).
 */
template <class V>
void adamw(float* w, float* g, float* m, float* v, ptrdiff_t n, float clip, float b1, float b2, float stepSize, float invBc2, float eps,
           float decay) {
  using T = typename V::T;
  const T vclip = V::set(clip), vb1 = V::set(b1), vb2 = V::set(b2), c1 = V::set(1 - b1), c2 = V::set(1 - b2);
  const T vstep = V::set(stepSize), vinv = V::set(invBc2), veps = V::set(eps), vdecay = V::set(decay);
  lanes<V>(n, [&](ptrdiff_t i, int k) {
    const T gi = V::mul(V::loadPartial(g + i, k), vclip);
    V::storePartial(g + i, V::zero(), k);
    const T mi = V::fma(vb1, V::loadPartial(m + i, k), V::mul(c1, gi));
    const T vi = V::fma(vb2, V::loadPartial(v + i, k), V::mul(c2, V::mul(gi, gi)));
    V::storePartial(m + i, mi, k);
    V::storePartial(v + i, vi, k);
    const T denom = V::add(V::sqrt(V::mul(vi, vinv)), veps);
    V::storePartial(w + i, V::sub(V::mul(V::loadPartial(w + i, k), vdecay), V::div(V::mul(vstep, mi), denom)), k);
  });
}

/** The sums of squares of blocks [b0, b1) of 4096 floats of g[n], each summed in vector lanes, into sums[b]. */
template <class V>
void blockSquares(const float* g, ptrdiff_t n, ptrdiff_t b0, ptrdiff_t b1, float* sums) {
  using T = typename V::T;
  for (ptrdiff_t b = b0; b < b1; b++) {
    const ptrdiff_t start = b * 4096, e = n - start < 4096 ? n - start : 4096;
    T acc = V::zero();
    lanes<V>(e, [&](ptrdiff_t i, int k) {
      const T x = V::loadPartial(g + start + i, k);
      acc = V::fma(x, x, acc);
    });
    sums[b] = V::sum(acc);
  }
}

/**
 * One row of logits z[V] at temperature 1/invTau: p = softmax(z * invTau) into probs (when not null);
 * stats[0] = log-sum-exp of z * invTau, stats[1] = the entropy -sum p log p.
 */
template <class V>
void softmaxRow(const float* z, int n, float invTau, float* probs, double* stats) {
  using T = typename V::T;
  const T inv = V::set(invTau);
  T mx = V::set(-__builtin_inff());
  lanes<V>(n, [&](ptrdiff_t i, int k) { mx = V::max(mx, V::mul(V::loadPartialOr(z + i, k, -__builtin_inff()), inv)); });
  const float m = V::maxOf(mx);
  const T vm = V::set(m);
  // sum e and sum e * (z - m): the entropy is log(sum) - sum(e (z - m)) / sum
  T se = V::zero(), sez = V::zero();
  lanes<V>(n, [&](ptrdiff_t i, int k) {
    const T zm = V::sub(V::mul(V::loadPartial(z + i, k), inv), vm);
    const T e = V::keep(vexp<V>(zm), k);
    if (probs) V::storePartial(probs + i, e, k);
    se = V::add(se, e);
    // tokens of probability 0 (masked to -inf) add nothing to the entropy (0 * -inf would be NaN)
    sez = V::add(sez, V::keepWhereGreater(e, V::zero(), V::mul(e, zm)));
  });
  const double sum = V::sum(se), sumZ = V::sum(sez);
  const double logSum = __builtin_log(sum);
  stats[0] = m + logSum;
  stats[1] = logSum - sumZ / sum;
  if (probs) {
    const T s = V::set((float)(1.0 / sum));
    lanes<V>(n, [&](ptrdiff_t i, int k) { V::storePartial(probs + i, V::mul(V::loadPartial(probs + i, k), s), k); });
  }
}

/** dst[0 .. hd) = src turned by (cos, sin) of its position (HF's rotate_half); with back, the transpose, added. */
template <class V, bool back>
inline void rotate(float* dst, const float* src, const float* cos, const float* sin, int half) {
  using T = typename V::T;
  lanes<V>(half, [&](ptrdiff_t i, int k) {
    const T a = V::loadPartial(src + i, k), b = V::loadPartial(src + half + i, k);
    const T c = V::loadPartial(cos + i, k), s = V::loadPartial(sin + i, k);
    if (!back) {
      V::storePartial(dst + i, V::fma(a, c, V::neg(V::mul(b, s))), k);
      V::storePartial(dst + half + i, V::fma(b, c, V::mul(a, s)), k);
    } else {
      V::storePartial(dst + i, V::add(V::loadPartial(dst + i, k), V::fma(a, c, V::mul(b, s))), k);
      V::storePartial(dst + half + i, V::add(V::loadPartial(dst + half + i, k), V::fma(b, c, V::neg(V::mul(a, s)))), k);
    }
  });
}

/**
 * raw[N, C + 2 kvDim] (q, k, v of each token) to qkv[N, 3C]: queries and keys turned to their positions, each
 * key/value head copied to the `group` query heads it serves. cos and sin: [positions, hd / 2].
 */
template <class V>
void ropeAndExpand(float* qkv, const float* raw, const int* positions, int N, int H, int kvHeads, int hd, const float* cos, const float* sin) {
  const int C = H * hd, kvDim = kvHeads * hd, half = hd / 2, group = H / kvHeads;
  for (int n = 0; n < N; n++) {
    const float* r = raw + (ptrdiff_t)n * (C + 2 * kvDim);
    float* o = qkv + (ptrdiff_t)n * 3 * C;
    const float* c = cos + (ptrdiff_t)positions[n] * half;
    const float* s = sin + (ptrdiff_t)positions[n] * half;
    for (int h = 0; h < H; h++) rotate<V, false>(o + h * hd, r + h * hd, c, s, half);
    for (int g = 0; g < kvHeads; g++) {
      float* first = o + C + g * group * hd;
      rotate<V, false>(first, r + C + g * hd, c, s, half);
      for (int j = 1; j < group; j++) __builtin_memcpy(first + j * hd, first, hd * sizeof(float));
      for (int j = 0; j < group; j++) __builtin_memcpy(o + 2 * C + (g * group + j) * hd, r + C + kvDim + g * hd, hd * sizeof(float));
    }
  }
}

/** The transpose: dRaw[N, C + 2 kvDim] += what dQkv[N, 3C] sends back through ropeAndExpand. */
template <class V>
void ropeAndExpandBackward(float* dRaw, const float* dQkv, const int* positions, int N, int H, int kvHeads, int hd, const float* cos,
                           const float* sin) {
  const int C = H * hd, kvDim = kvHeads * hd, half = hd / 2, group = H / kvHeads;
  for (int n = 0; n < N; n++) {
    float* r = dRaw + (ptrdiff_t)n * (C + 2 * kvDim);
    const float* o = dQkv + (ptrdiff_t)n * 3 * C;
    const float* c = cos + (ptrdiff_t)positions[n] * half;
    const float* s = sin + (ptrdiff_t)positions[n] * half;
    for (int h = 0; h < H; h++) rotate<V, true>(r + h * hd, o + h * hd, c, s, half);
    for (int g = 0; g < kvHeads; g++) {
      for (int j = 0; j < group; j++) {
        const int h = g * group + j;
        rotate<V, true>(r + C + g * hd, o + C + h * hd, c, s, half);
        float* dv = r + C + kvDim + g * hd;
        const float* src = o + 2 * C + h * hd;
        lanes<V>(hd, [&](ptrdiff_t i, int k) { V::storePartial(dv + i, V::add(V::loadPartial(dv + i, k), V::loadPartial(src + i, k)), k); });
      }
    }
  }
}

/** Rows [r0, r1) of [blocks, T, T] attention scores: row i of its block softmaxed over columns 0..i, the rest 0. */
template <class V>
void causalSoftmax(float* att, int T, int64_t r0, int64_t r1) {
  using T_ = typename V::T;
  for (int64_t r = r0; r < r1; r++) {
    float* row = att + r * T;
    const int n = (int)(r % T) + 1;
    T_ mx = V::set(-__builtin_inff());
    lanes<V>(n, [&](ptrdiff_t i, int k) { mx = V::max(mx, V::loadPartialOr(row + i, k, -__builtin_inff())); });
    const T_ m = V::set(V::maxOf(mx));
    T_ sum = V::zero();
    lanes<V>(n, [&](ptrdiff_t i, int k) {
      const T_ e = V::keep(vexp<V>(V::sub(V::loadPartial(row + i, k), m)), k);
      V::storePartial(row + i, e, k);
      sum = V::add(sum, e);
    });
    const T_ inv = V::set(1.0f / V::sum(sum));
    lanes<V>(n, [&](ptrdiff_t i, int k) { V::storePartial(row + i, V::mul(V::loadPartial(row + i, k), inv), k); });
    for (int j = n; j < T; j++) row[j] = 0.0f;
  }
}

/** Rows [r0, r1) of [rows, T]: dAtt = att * (dAtt - sum(att * dAtt)) * scale over columns 0..i (i = row % T), 0 after. */
template <class V>
void softmaxBackward(float* dAtt, const float* att, int T, float scale, int64_t r0, int64_t r1) {
  using T_ = typename V::T;
  const T_ sc = V::set(scale);
  for (int64_t r = r0; r < r1; r++) {
    float* d = dAtt + r * T;
    const float* a = att + r * T;
    const int n = (int)(r % T) + 1;
    T_ dot = V::zero();
    lanes<V>(n, [&](ptrdiff_t i, int k) { dot = V::fma(V::loadPartial(a + i, k), V::loadPartial(d + i, k), dot); });
    const T_ vd = V::set(V::sum(dot));
    lanes<V>(n, [&](ptrdiff_t i, int k) {
      V::storePartial(d + i, V::mul(V::mul(V::loadPartial(a + i, k), V::sub(V::loadPartial(d + i, k), vd)), sc), k);
    });
    for (int j = n; j < T; j++) d[j] = 0.0f;
  }
}

/**
 * The rows rows[r0 .. r1) of logits z ([*, n]): stats[2r] = the row's log-sum-exp at temperature 1/invTau,
 * stats[2r + 1] = its entropy (as softmaxRow).
 */
template <class V>
void softmaxStatsRows(const float* z, int n, float invTau, const int32_t* rows, double* stats, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r++) softmaxRow<V>(z + (ptrdiff_t)rows[r] * n, n, invTau, nullptr, stats + 2 * r);
}

/**
 * The loss's gradient on rows rows[r0 .. r1) of the logits: d = -scale p + ent p (z invTau - lse + H), then
 * d[target] += scale, with p recomputed from the row's log-sum-exp (stats as softmaxStatsRows writes them).
 */
template <class V>
void lossGradientRows(float* d, const float* z, int n, float invTau, const int32_t* rows, const int32_t* targets, const float* scales,
                      const float* ents, const double* stats, int64_t r0, int64_t r1) {
  using T = typename V::T;
  const T inv = V::set(invTau);
  for (int64_t r = r0; r < r1; r++) {
    const float* zr = z + (ptrdiff_t)rows[r] * n;
    float* dr = d + (ptrdiff_t)rows[r] * n;
    const float lse = (float)stats[2 * r], entropy = (float)stats[2 * r + 1], scale = scales[r], ent = ents[r];
    const T vl = V::set(lse), ns = V::set(-scale), ve = V::set(ent), shift = V::set(entropy - lse);
    lanes<V>(n, [&](ptrdiff_t i, int k) {
      const T zi = V::loadPartial(zr + i, k);
      const T p = vexp<V>(V::sub(V::mul(zi, inv), vl));
      T out = V::mul(ns, p);
      if (ent != 0) out = V::add(out, V::keepWhereGreater(p, V::zero(), V::mul(V::mul(ve, p), V::fma(zi, inv, shift))));
      V::storePartial(dr + i, out, k);
    });
    if (targets[r] >= 0 && targets[r] < n) dr[targets[r]] += scale;
  }
}

}  // namespace
}  // namespace tinkerlab
