// The fused multiply-add peak of this CPU, for native/bench.ts: each of `threads` threads runs independent chains
// of vector FMAs (at least 12, more than latency x ports on x86-64 cores, so the FMA units never wait) for about
// `millis` of wall time, and the program prints one JSON line: the floating-point operations done (2 per lane of
// each FMA), the wall time, and the CPU time of the threads.
//
//   g++ -O2 -std=c++17 -pthread -mavx512f -mfma fma-peak.cc   (or -mavx2 -mfma: the widest vectors enabled are used)
//   fma-peak THREADS MILLIS
#include <immintrin.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
constexpr int kChains = 16;  // of 32 vector registers
constexpr const char* kIsa = "avx512";
Vec set1(float x) { return _mm512_set1_ps(x); }
Vec fma(Vec x, Vec y, Vec z) { return _mm512_fmadd_ps(x, y, z); }
float first(Vec x) { return _mm512_cvtss_f32(x); }
bool cpuRuns() { return __builtin_cpu_supports("avx512f"); }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
constexpr int kChains = 12;  // of 16 vector registers, with the two operands: 16 chains spilled to memory
constexpr const char* kIsa = "avx2";
Vec set1(float x) { return _mm256_set1_ps(x); }
Vec fma(Vec x, Vec y, Vec z) { return _mm256_fmadd_ps(x, y, z); }
float first(Vec x) { return _mm256_cvtss_f32(x); }
bool cpuRuns() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#else
#error "compile with -mavx512f -mfma or -mavx2 -mfma"
#endif

constexpr long kBatch = 1 << 16;  // iterations between looks at the clock

double seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

struct Result {
  double flops = 0, cpu = 0, sink = 0;
};

// acc = acc * m + a converges to a / (1 - m), so no value overflows or turns denormal however long it runs.
void chains(double until, Result* out) {
  const double cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
  const Vec m = set1(0.999f), a = set1(1e-3f);
  Vec acc[kChains];
  for (int j = 0; j < kChains; j++) acc[j] = set1(j * 0.01f);
  long iterations = 0;
  do {
    for (long i = 0; i < kBatch; i++) {
#pragma GCC unroll 16
      for (int j = 0; j < kChains; j++) acc[j] = fma(acc[j], m, a);
    }
    iterations += kBatch;
  } while (seconds(CLOCK_MONOTONIC) < until);
  float sum = 0;
  for (int j = 0; j < kChains; j++) sum += first(acc[j]);
  out->cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  out->flops = 2.0 * kLanes * kChains * iterations;
  out->sink = sum;  // the chains' results are used, so they are computed
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fma-peak THREADS MILLIS\n");
    return 2;
  }
  __builtin_cpu_init();
  if (!cpuRuns()) {
    std::fprintf(stderr, "fma-peak: this CPU does not run %s\n", kIsa);
    return 3;
  }
  const int threads = std::atoi(argv[1]);
  const double millis = std::atof(argv[2]);
  if (threads < 1 || millis <= 0) {
    std::fprintf(stderr, "fma-peak: THREADS must be 1 or more and MILLIS above 0\n");
    return 2;
  }
  std::vector<Result> results(threads);
  std::vector<std::thread> pool;
  const double start = seconds(CLOCK_MONOTONIC), until = start + millis / 1000;
  for (int t = 0; t < threads; t++) pool.emplace_back(chains, until, &results[t]);
  for (auto& t : pool) t.join();
  const double wall = seconds(CLOCK_MONOTONIC) - start;
  Result total;
  for (const auto& r : results) total.flops += r.flops, total.cpu += r.cpu, total.sink += r.sink;
  std::printf("{\"isa\":\"%s\",\"threads\":%d,\"flops\":%.0f,\"wall_s\":%.6f,\"cpu_s\":%.6f,\"sink\":%g}\n", kIsa, threads,
              total.flops, wall, total.cpu, total.sink);
  return 0;
}
