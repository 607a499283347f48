// A Node-API addon running the engine's matrix products natively (AVX-512 or AVX2 with FMA), in place in the
// engine's shared WebAssembly memory, optionally on two threads. Built and loaded by native/kernel.ts.
//
// JavaScript interface (one instance per Node environment):
//   supported()            the instruction sets this CPU runs: ["avx512", "avx2"], ["avx2"] or []
//   setIsa(name)           the kernel to use (it must be supported)
//   bind(heap, calls)      heap: a Float32Array over the whole memory; calls: an Int32Array of call slots
//   run(count, arrays?)    runs calls 0 .. count-1 (16 slots each, as lib/model/simd-gemm.ts's GemmArgs: byte
//                          addresses of A, B, C; M, K, N; strides in floats; accumulate; scale as float bits;
//                          then where A, B and C lie: 0 for the bound memory, i + 1 for arrays[i], so operands
//                          outside the memory (a model's weights and gradients) are used in place)
//   setThreads(n)          1, or 2 with a helper thread that shares the pieces of each job
//   helperPieces()         pieces the helper thread has computed so far
//
// With two threads a job is a list of pieces (each call cut by columns and rows when it is large); both threads
// take pieces through one atomic counter until none is left, so a helper that is slow to wake costs at most the
// piece it is running. Each piece is computed whole by one thread, and the kernel computes every element the
// same way whatever the piece (gemm-kernel.h), so results are bit-identical with one or two threads.
#include <node_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <immintrin.h>

#include "gemm.h"

namespace tinkerlab {
namespace {

constexpr int slotsPerCall = 16;
// A call is cut into pieces only when it is big enough to repay sharing (as the WebAssembly path does).
constexpr double parallelMinWork = 1 << 23;
constexpr int maxPieces = 8;
// When waiting for the helper takes more than this share of the jobs' time (it keeps losing its core), the next
// aloneJobs jobs run on the calling thread alone.
constexpr double starvedShare = 0.15;
constexpr int aloneJobs = 200;

/** A range [begin, end) of an elementwise or per-row operation, run by whichever thread takes it. */
using RangeFunction = void (*)(const void* context, int64_t begin, int64_t end);

/** A piece of a job: a part of a product (call >= 0), or a range of an operation (range != nullptr). */
struct Piece {
  int call, row0, row1, col0, col1;
  RangeFunction range = nullptr;
  const void* context = nullptr;
  int64_t begin = 0, end = 0;
};

float* allocPack() { return static_cast<float*>(std::aligned_alloc(64, packFloats * sizeof(float))); }

struct Kernel {
  Isa isa = {"none", nullptr, 1, 1};
  float* heap = nullptr;
  size_t heapFloats = 0;
  const int32_t* slots = nullptr;
  size_t slotCount = 0;
  float* packs[2] = {allocPack(), allocPack()};
  std::vector<GemmCall> calls;
  std::vector<Piece> pieces;

  // the helper thread and the job it shares
  std::thread helper;
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> job{0};
  std::atomic<uint64_t> next{0};  // job << 32 | index of the next piece to take
  std::atomic<int> done{0};
  std::atomic<int> pieceCount{0};
  std::atomic<int64_t> helped{0};
  std::atomic<bool> sleeping{false};
  std::mutex mutex;
  std::condition_variable wake;
  double waitShare = 0;
  int alone = 0;

  ~Kernel() {
    stopHelper();
    std::free(packs[0]);
    std::free(packs[1]);
  }

  void runPiece(const Piece& p, int thread) {
    if (p.range) p.range(p.context, p.begin, p.end);
    else isa.piece(calls[p.call], p.row0, p.row1, p.col0, p.col1, packs[thread]);
  }

  /** Takes pieces of job j until none is left; returns how many this thread ran. */
  int share(uint32_t j, int count, int thread) {
    int ran = 0;
    for (;;) {
      uint64_t word = next.load();
      if ((word >> 32) != j || (int)(word & 0xffffffffu) >= count) return ran;
      if (!next.compare_exchange_weak(word, word + 1)) continue;
      runPiece(pieces[word & 0xffffffffu], thread);
      ran++;
      done.fetch_add(1);
    }
  }

  void helperLoop() {
    uint32_t last = 0;
    for (;;) {
      // Spin briefly for the next job (products follow each other closely), then sleep.
      const auto spinUntil = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
      while (job.load() == last && !stop.load() && std::chrono::steady_clock::now() < spinUntil) _mm_pause();
      if (job.load() == last && !stop.load()) {
        std::unique_lock<std::mutex> lock(mutex);
        sleeping.store(true);
        wake.wait(lock, [&] { return job.load() != last || stop.load(); });
        sleeping.store(false);
      }
      if (stop.load()) return;
      last = job.load();
      helped.fetch_add(share(last, pieceCount.load(), 1));
    }
  }

  void startHelper() {
    if (helper.joinable()) return;
    stop.store(false);
    helper = std::thread([this] { helperLoop(); });
  }

  void stopHelper() {
    if (!helper.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop.store(true);
    }
    wake.notify_one();
    helper.join();
  }

  /** Cuts each call into pieces: column groups of whole tiles first (no duplicated packing), then rows. */
  void cut(bool parallel) {
    pieces.clear();
    for (int i = 0; i < (int)calls.size(); i++) {
      const GemmCall& c = calls[i];
      if (!parallel || (double)c.M * c.K * c.N < parallelMinWork) {
        pieces.push_back({i, 0, c.M, 0, c.N});
        continue;
      }
      const int tilesN = (c.N + isa.tileColumns - 1) / isa.tileColumns;
      const int colGroups = std::min(tilesN, maxPieces);
      const int colStep = (tilesN + colGroups - 1) / colGroups * isa.tileColumns;
      const int tilesM = (c.M + isa.tileRows - 1) / isa.tileRows;
      const int rowGroups = std::max(1, std::min(tilesM, maxPieces / ((c.N + colStep - 1) / colStep)));
      const int rowStep = (tilesM + rowGroups - 1) / rowGroups * isa.tileRows;
      for (int r = 0; r < c.M; r += rowStep)
        for (int col = 0; col < c.N; col += colStep) pieces.push_back({i, r, std::min(c.M, r + rowStep), col, std::min(c.N, col + colStep)});
    }
  }

  void runJob() {
    cut(helper.joinable());
    runPieces();
  }

  /**
   * fn over [0, n): at once on this thread, or, with the helper running and at least minimum items, in up to
   * maxPieces ranges of whole multiples of `grain` that both threads take. fn must compute each item the same
   * way whatever range it is in, so results do not depend on the threads.
   */
  void parallelFor(RangeFunction fn, const void* context, int64_t n, int64_t grain, int64_t minimum) {
    if (!helper.joinable() || n < minimum || n <= grain) return fn(context, 0, n);
    const int64_t units = (n + grain - 1) / grain;
    const int64_t step = (units + maxPieces - 1) / maxPieces * grain;
    pieces.clear();
    for (int64_t b = 0; b < n; b += step) {
      Piece p{-1, 0, 0, 0, 0};
      p.range = fn, p.context = context, p.begin = b, p.end = std::min(n, b + step);
      pieces.push_back(p);
    }
    runPieces();
  }

  void runPieces() {
    const bool parallel = helper.joinable();
    const int count = (int)pieces.size();
    if (!parallel || count == 1 || alone > 0) {
      if (alone > 0) alone--;
      for (const Piece& p : pieces) runPiece(p, 0);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    const uint32_t j = job.load() + 1;
    done.store(0);
    pieceCount.store(count);
    next.store((uint64_t)j << 32);
    job.store(j);
    if (sleeping.load()) {
      std::lock_guard<std::mutex> lock(mutex);
      wake.notify_one();
    }
    share(j, count, 0);
    // Only pieces the helper has taken remain; it is running them.
    const auto waitFrom = std::chrono::steady_clock::now();
    for (int spins = 0; done.load() < count; spins++) {
      if (spins < 4096) _mm_pause();
      else std::this_thread::yield();
    }
    const auto end = std::chrono::steady_clock::now();
    const double total = std::chrono::duration<double>(end - start).count();
    waitShare = 0.9 * waitShare + 0.1 * (std::chrono::duration<double>(end - waitFrom).count() / std::max(total, 1e-9));
    if (waitShare > starvedShare) {
      alone = aloneJobs;
      waitShare = 0;
    }
  }
};

// ---- Node-API glue ----

#define CHECK(call)                                                  \
  do {                                                               \
    if ((call) != napi_ok) {                                         \
      napi_throw_error(env, nullptr, "native kernel: " #call " failed"); \
      return nullptr;                                                \
    }                                                                \
  } while (0)

Kernel* kernelOf(napi_env env) {
  void* data = nullptr;
  napi_get_instance_data(env, &data);
  return static_cast<Kernel*>(data);
}

napi_value throwError(napi_env env, const std::string& message) {
  napi_throw_error(env, nullptr, message.c_str());
  return nullptr;
}

bool cpuHas(const char* isa) {
  __builtin_cpu_init();
  if (std::strcmp(isa, "avx512") == 0) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

napi_value supported(napi_env env, napi_callback_info) {
  napi_value list;
  CHECK(napi_create_array(env, &list));
  uint32_t n = 0;
  for (const char* isa : {"avx512", "avx2"}) {
    if (!cpuHas(isa)) continue;
    napi_value name;
    CHECK(napi_create_string_utf8(env, isa, NAPI_AUTO_LENGTH, &name));
    CHECK(napi_set_element(env, list, n++, name));
  }
  return list;
}

napi_value setIsa(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  char name[16] = {0};
  size_t length = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], name, sizeof name, &length) != napi_ok) {
    return throwError(env, "setIsa: expected a string, avx512 or avx2");
  }
  const std::string isa(name, length);
  if (isa != "avx512" && isa != "avx2") return throwError(env, "setIsa: unknown instruction set '" + isa + "'; expected avx512 or avx2");
  if (!cpuHas(isa.c_str())) return throwError(env, "setIsa: this CPU does not support " + isa + (isa == "avx2" ? " with FMA" : ""));
  Kernel* k = kernelOf(env);
  k->isa = isa == "avx512" ? avx512Isa() : avx2Isa();
  return nullptr;
}

napi_value bind(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  napi_typedarray_type types[2];
  size_t lengths[2];
  void* data[2];
  for (int i = 0; i < 2; i++) {
    bool isTyped = false;
    if (i < (int)argc) napi_is_typedarray(env, argv[i], &isTyped);
    if (!isTyped) return throwError(env, "bind: expected (heap: Float32Array, calls: Int32Array)");
    CHECK(napi_get_typedarray_info(env, argv[i], &types[i], &lengths[i], &data[i], nullptr, nullptr));
  }
  if (types[0] != napi_float32_array || types[1] != napi_int32_array) {
    return throwError(env, "bind: expected (heap: Float32Array, calls: Int32Array)");
  }
  Kernel* k = kernelOf(env);
  k->heap = static_cast<float*>(data[0]);
  k->heapFloats = lengths[0];
  k->slots = static_cast<const int32_t*>(data[1]);
  k->slotCount = lengths[1];
  return nullptr;
}

/** Reads argument i as a Float32Array (or null, when allowNull and the argument is null or undefined). */
bool floatArray(napi_env env, napi_value value, float** data, size_t* length, bool allowNull = false) {
  napi_valuetype type;
  if (allowNull && napi_typeof(env, value, &type) == napi_ok && (type == napi_null || type == napi_undefined)) {
    *data = nullptr;
    *length = 0;
    return true;
  }
  bool isTyped = false;
  napi_is_typedarray(env, value, &isTyped);
  if (!isTyped) return false;
  napi_typedarray_type t;
  void* p = nullptr;
  if (napi_get_typedarray_info(env, value, &t, length, &p, nullptr, nullptr) != napi_ok || t != napi_float32_array) return false;
  *data = static_cast<float*>(p);
  return true;
}

/** Where an operand lies: the bound memory (source 0) or one of the arrays passed to run (source i + 1). */
struct Source {
  float* data;
  size_t floats;
};

/** Reads call i from the slots, or returns an error message when it is malformed or reaches outside its arrays. */
std::string readCall(const Kernel& k, const std::vector<Source>& externals, int i, GemmCall& c) {
  const int32_t* s = k.slots + (size_t)i * slotsPerCall;
  // The three byte addresses are unsigned: a WebAssembly memory reaches 4 GiB, and one past 2 GiB arrives here
  // with the sign bit set. The sizes and strides that follow must not be negative.
  const uint32_t address[3] = {(uint32_t)s[0], (uint32_t)s[1], (uint32_t)s[2]};
  for (int t = 3; t < 12; t++) {
    if (s[t] < 0) return "argument " + std::to_string(t) + " is negative (" + std::to_string(s[t]) + ")";
  }
  if (address[0] % 4 || address[1] % 4 || address[2] % 4) return "addresses must be multiples of 4 bytes";
  Source sources[3];
  for (int t = 0; t < 3; t++) {
    const int32_t source = s[13 + t];
    if (source < 0 || (size_t)source > externals.size()) {
      return "operand " + std::to_string(t) + " names array " + std::to_string(source) + "; " + std::to_string(externals.size()) + " were passed";
    }
    sources[t] = source == 0 ? Source{k.heap, k.heapFloats} : externals[source - 1];
  }
  const ptrdiff_t at[3] = {address[0] / 4, address[1] / 4, address[2] / 4};
  c.M = s[3], c.K = s[4], c.N = s[5];
  c.ars = s[6], c.acs = s[7], c.brs = s[8], c.bcs = s[9], c.crs = s[10];
  c.accumulate = s[11] != 0;
  std::memcpy(&c.scale, s + 12, sizeof(float));
  c.a = sources[0].data + at[0], c.b = sources[1].data + at[1], c.c = sources[2].data + at[2];
  if (c.ars != 1 && c.acs != 1) return "A needs a row or column stride of 1";
  if (c.brs != 1 && c.bcs != 1) return "B needs a row or column stride of 1";
  if (c.M == 0 || c.N == 0) return "";
  const auto last = [](ptrdiff_t base, ptrdiff_t n1, ptrdiff_t s1, ptrdiff_t n2, ptrdiff_t s2) {
    return base + (n1 > 0 ? (n1 - 1) * s1 : 0) + (n2 > 0 ? (n2 - 1) * s2 : 0);
  };
  const ptrdiff_t ends[3] = {c.K > 0 ? last(at[0], c.M, c.ars, c.K, c.acs) : 0, c.K > 0 ? last(at[1], c.K, c.brs, c.N, c.bcs) : 0,
                             last(at[2], c.M, c.crs, c.N, 1)};
  const char* names[3] = {"A", "B", "C"};
  for (int t = 0; t < 3; t++) {
    if ((size_t)ends[t] >= sources[t].floats) {
      return std::string(names[t]) + " reaches float " + std::to_string(ends[t]) + ", past its array of " + std::to_string(sources[t].floats);
    }
  }
  return "";
}

/** run(count, arrays?): runs calls 0 .. count-1; operands may lie in `arrays` (Float32Arrays) as well as in the memory. */
napi_value run(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  int32_t count = 0;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &count) != napi_ok) return throwError(env, "run: expected a count of calls");
  Kernel* k = kernelOf(env);
  if (!k->isa.piece) return throwError(env, "run: this CPU has neither AVX-512 nor AVX2 with FMA");
  if (!k->heap) return throwError(env, "run: no memory bound (call bind first)");
  if (count < 0 || (size_t)count * slotsPerCall > k->slotCount) {
    return throwError(env, "run: " + std::to_string(count) + " calls do not fit the bound call slots");
  }
  std::vector<Source> externals;
  napi_valuetype type = napi_undefined;
  if (argc > 1) napi_typeof(env, argv[1], &type);
  if (type != napi_undefined && type != napi_null) {
    bool isArray = false;
    uint32_t length = 0;
    if (napi_is_array(env, argv[1], &isArray) != napi_ok || !isArray || napi_get_array_length(env, argv[1], &length) != napi_ok) {
      return throwError(env, "run: arrays must be an array of Float32Arrays");
    }
    for (uint32_t i = 0; i < length; i++) {
      napi_value item;
      Source source{nullptr, 0};
      if (napi_get_element(env, argv[1], i, &item) != napi_ok || !floatArray(env, item, &source.data, &source.floats)) {
        return throwError(env, "run: arrays[" + std::to_string(i) + "] is not a Float32Array");
      }
      externals.push_back(source);
    }
  }
  k->calls.resize(count);
  for (int i = 0; i < count; i++) {
    const std::string error = readCall(*k, externals, i, k->calls[i]);
    if (!error.empty()) return throwError(env, "run: call " + std::to_string(i) + ": " + error);
  }
  k->runJob();
  return nullptr;
}

napi_value setThreads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  int32_t n = 0;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &n) != napi_ok || (n != 1 && n != 2)) {
    return throwError(env, "setThreads: expected 1 or 2");
  }
  Kernel* k = kernelOf(env);
  if (n == 2) k->startHelper();
  else k->stopHelper();
  return nullptr;
}

napi_value helperPieces(napi_env env, napi_callback_info) {
  napi_value result;
  CHECK(napi_create_double(env, (double)kernelOf(env)->helped.load(), &result));
  return result;
}


// ---- elementwise and per-row operations (ops-kernel.h) over any Float32Arrays ----

/** The arguments of one call: arrays (F), whole numbers (I) and numbers (D), checked as they are read. */
struct Args {
  napi_env env;
  napi_value argv[16];
  size_t argc = 16;
  std::string error;
  const char* name;
  Args(napi_env e, napi_callback_info info, const char* n) : env(e), name(n) { napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr); }
  float* F(size_t i, size_t* length, bool allowNull = false) {
    float* data = nullptr;
    if (error.empty() && (i >= argc || !floatArray(env, argv[i], &data, length, allowNull))) {
      error = std::string(name) + ": argument " + std::to_string(i) + " must be a Float32Array" + (allowNull ? " or null" : "");
    }
    return data;
  }
  int64_t I(size_t i) {
    int64_t v = 0;
    if (error.empty() && (i >= argc || napi_get_value_int64(env, argv[i], &v) != napi_ok || v < 0)) {
      error = std::string(name) + ": argument " + std::to_string(i) + " must be a whole number >= 0";
    }
    return v;
  }
  double D(size_t i) {
    double v = 0;
    if (error.empty() && (i >= argc || napi_get_value_double(env, argv[i], &v) != napi_ok)) {
      error = std::string(name) + ": argument " + std::to_string(i) + " must be a number";
    }
    return v;
  }
  /** Records an error unless an array of `length` floats holds `need`. */
  void fits(size_t length, double need, const char* what) {
    if (error.empty() && (double)length < need) {
      error = std::string(name) + ": " + what + " holds " + std::to_string(length) + " floats, fewer than the " + std::to_string((size_t)need) + " needed";
    }
  }
};

const Ops& opsOf(napi_env env) { return kernelOf(env)->isa.ops; }

// An operation is shared with the helper thread from this many floats of work on (less is over before it wakes).
constexpr int64_t parallelMinFloats = 1 << 16;

/** body(begin, end) over [0, n), shared by both threads when the helper runs and the work is large enough. */
template <class F>
void parallelRange(napi_env env, int64_t n, int64_t grain, int64_t floatsPerItem, const F& body) {
  const int64_t minimum = (parallelMinFloats + floatsPerItem - 1) / std::max<int64_t>(floatsPerItem, 1);
  kernelOf(env)->parallelFor([](const void* c, int64_t b, int64_t e) { (*static_cast<const F*>(c))(b, e); }, &body, n, grain, minimum);
}

napi_value swigluForwardJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "swigluForward");
  size_t nAct, nFc;
  float* act = a.F(0, &nAct);
  const float* fc = a.F(1, &nFc);
  const int64_t rows = a.I(2), F = a.I(3);
  a.fits(nAct, (double)rows * F, "act");
  a.fits(nFc, 2.0 * rows * F, "fc");
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, rows, 1, 3 * F, [&](int64_t b, int64_t e) { ops.swigluForward(act + b * F, fc + b * 2 * F, (int)(e - b), (int)F); });
  return nullptr;
}

napi_value swigluBackwardJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "swigluBackward");
  size_t nD, nDa, nFc;
  float* dFc = a.F(0, &nD);
  const float* dAct = a.F(1, &nDa);
  const float* fc = a.F(2, &nFc);
  const int64_t rows = a.I(3), F = a.I(4);
  a.fits(nD, 2.0 * rows * F, "dFc");
  a.fits(nDa, (double)rows * F, "dAct");
  a.fits(nFc, 2.0 * rows * F, "fc");
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, rows, 1, 5 * F,
                [&](int64_t b, int64_t e) { ops.swigluBackward(dFc + b * 2 * F, dAct + b * F, fc + b * 2 * F, (int)(e - b), (int)F); });
  return nullptr;
}

napi_value rmsNormForwardJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "rmsNormForward");
  size_t nOut, nR, nX, nG;
  float* out = a.F(0, &nOut);
  float* rstd = a.F(1, &nR);
  const float* x = a.F(2, &nX);
  const float* gain = a.F(3, &nG);
  const int64_t rows = a.I(4), C = a.I(5);
  const double eps = a.D(6);
  a.fits(nOut, (double)rows * C, "out");
  a.fits(nX, (double)rows * C, "x");
  a.fits(nR, (double)rows, "rstd");
  a.fits(nG, (double)C, "gain");
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, rows, 1, 2 * C,
                [&](int64_t b, int64_t e) { ops.rmsNormForward(out + b * C, rstd + b, x + b * C, gain, (int)(e - b), (int)C, (float)eps); });
  return nullptr;
}

napi_value rmsNormBackwardJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "rmsNormBackward");
  size_t nDx, nDg, nDy, nX, nR, nG;
  float* dx = a.F(0, &nDx);
  float* dGain = a.F(1, &nDg, true);
  const float* dy = a.F(2, &nDy);
  const float* x = a.F(3, &nX);
  const float* rstd = a.F(4, &nR);
  const float* gain = a.F(5, &nG);
  const int64_t rows = a.I(6), C = a.I(7);
  for (auto [n, what] : {std::pair<size_t, const char*>{nDx, "dx"}, {nDy, "dy"}, {nX, "x"}}) a.fits(n, (double)rows * C, what);
  if (dGain) a.fits(nDg, (double)C, "dGain");
  a.fits(nR, (double)rows, "rstd");
  a.fits(nG, (double)C, "gain");
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, rows, 1, 3 * C,
                [&](int64_t b, int64_t e) { ops.rmsNormBackward(dx + b * C, dy + b * C, x + b * C, rstd + b, gain, (int)(e - b), (int)C); });
  // the gain's gradient sums over rows: shared by columns, each summed over every row in order
  if (dGain) {
    parallelRange(env, C, 16, 2 * rows,
                  [&](int64_t c0, int64_t c1) { ops.rmsNormGainGradient(dGain, dy, x, rstd, (int)rows, (int)C, (int)c0, (int)c1); });
  }
  return nullptr;
}

napi_value adamwJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "adamw");
  size_t nW, nG, nM, nV;
  float* w = a.F(0, &nW);
  float* g = a.F(1, &nG);
  float* m = a.F(2, &nM);
  float* v = a.F(3, &nV);
  double p[7];
  for (int i = 0; i < 7; i++) p[i] = a.D(4 + i);
  for (auto [n, what] : {std::pair<size_t, const char*>{nG, "grad"}, {nM, "m"}, {nV, "v"}}) a.fits(n, (double)nW, what);
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, (int64_t)nW, 1024, 4, [&](int64_t b, int64_t e) {
    ops.adamw(w + b, g + b, m + b, v + b, (ptrdiff_t)(e - b), (float)p[0], (float)p[1], (float)p[2], (float)p[3], (float)p[4], (float)p[5], (float)p[6]);
  });
  return nullptr;
}

napi_value sumOfSquaresJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "sumOfSquares");
  size_t n;
  const float* g = a.F(0, &n);
  if (!a.error.empty()) return throwError(env, a.error);
  // each block of 4096 summed in float lanes, the blocks in double in order: the same sum on one thread or two
  const int64_t blocks = ((int64_t)n + 4095) / 4096;
  std::vector<float> sums(blocks);
  const Ops& ops = opsOf(env);
  parallelRange(env, blocks, 1, 4096, [&](int64_t b, int64_t e) { ops.blockSquares(g, (ptrdiff_t)n, b, e, sums.data()); });
  double total = 0;
  for (const float x : sums) total += x;
  napi_value result;
  CHECK(napi_create_double(env, total, &result));
  return result;
}

/** softmaxRow(z, zOffset, n, invTau, probs | null, stats: Float64Array(2)) */
napi_value softmaxRowJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "softmaxRow");
  size_t nZ, nP;
  const float* z = a.F(0, &nZ);
  const int64_t at = a.I(1), n = a.I(2);
  const double invTau = a.D(3);
  float* probs = a.F(4, &nP, true);
  a.fits(nZ, (double)at + n, "z");
  if (probs) a.fits(nP, (double)n, "probs");
  void* statsData = nullptr;
  size_t statsLength = 0;
  napi_typedarray_type t;
  bool isTyped = false;
  if (a.argc > 5) napi_is_typedarray(env, a.argv[5], &isTyped);
  if (!isTyped || napi_get_typedarray_info(env, a.argv[5], &t, &statsLength, &statsData, nullptr, nullptr) != napi_ok || t != napi_float64_array ||
      statsLength < 2) {
    if (a.error.empty()) a.error = "softmaxRow: argument 5 must be a Float64Array of 2";
  }
  if (a.error.empty() && n == 0) a.error = "softmaxRow: a row needs at least one logit";
  if (!a.error.empty()) return throwError(env, a.error);
  opsOf(env).softmaxRow(z + at, (int)n, (float)invTau, probs, static_cast<double*>(statsData));
  return nullptr;
}

/** Reads argument i as an Int32Array. */
const int32_t* intArray(Args& a, size_t i, size_t* length) {
  bool isTyped = false;
  napi_typedarray_type t;
  void* p = nullptr;
  if (a.error.empty() && (i >= a.argc || napi_is_typedarray(a.env, a.argv[i], &isTyped) != napi_ok || !isTyped ||
                          napi_get_typedarray_info(a.env, a.argv[i], &t, length, &p, nullptr, nullptr) != napi_ok || t != napi_int32_array)) {
    a.error = std::string(a.name) + ": argument " + std::to_string(i) + " must be an Int32Array";
  }
  return static_cast<const int32_t*>(p);
}

/** ropeAndExpand[Backward](out, in, positions: Int32Array(N), N, H, kvHeads, hd, cos, sin) */
template <bool back>
napi_value ropeJs(napi_env env, napi_callback_info info) {
  Args a(env, info, back ? "ropeAndExpandBackward" : "ropeAndExpand");
  size_t nOut, nIn, nPos, nCos, nSin;
  float* out = a.F(0, &nOut);
  const float* in = a.F(1, &nIn);
  const int32_t* positions = intArray(a, 2, &nPos);
  const int64_t N = a.I(3), H = a.I(4), kv = a.I(5), hd = a.I(6);
  const float* cos = a.F(7, &nCos);
  const float* sin = a.F(8, &nSin);
  if (a.error.empty() && (kv == 0 || H % kv != 0 || hd % 2 != 0)) a.error = std::string(a.name) + ": heads must be a multiple of key/value heads, and the head size even";
  const double wide = 3.0 * N * H * hd, narrow = (double)N * (H + 2 * kv) * hd;
  a.fits(back ? nIn : nOut, wide, back ? "dQkv" : "qkv");
  a.fits(back ? nOut : nIn, narrow, back ? "dRaw" : "raw");
  a.fits(nPos, (double)N, "positions");
  if (a.error.empty()) {
    int64_t most = 0;
    for (int64_t n = 0; n < N; n++) {
      if (positions[n] < 0) {
        a.error = std::string(a.name) + ": position " + std::to_string(positions[n]) + " is negative";
        break;
      }
      most = std::max<int64_t>(most, positions[n]);
    }
    a.fits(std::min(nCos, nSin), (double)(most + 1) * (hd / 2), "cos or sin");
  }
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  const int64_t wideRow = 3 * H * hd, narrowRow = (H + 2 * kv) * hd;
  parallelRange(env, N, 1, wideRow + narrowRow, [&](int64_t b, int64_t e) {
    if (back) ops.ropeAndExpandBackward(out + b * narrowRow, in + b * wideRow, positions + b, (int)(e - b), (int)H, (int)kv, (int)hd, cos, sin);
    else ops.ropeAndExpand(out + b * wideRow, in + b * narrowRow, positions + b, (int)(e - b), (int)H, (int)kv, (int)hd, cos, sin);
  });
  return nullptr;
}

/** transpose(out, a, rows, cols): out[cols, rows] = the transpose of the row-major a[rows, cols], in blocks. */
napi_value transposeJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "transpose");
  size_t nOut, nA;
  float* out = a.F(0, &nOut);
  const float* in = a.F(1, &nA);
  const int64_t rows = a.I(2), cols = a.I(3);
  a.fits(nOut, (double)rows * cols, "out");
  a.fits(nA, (double)rows * cols, "a");
  if (!a.error.empty()) return throwError(env, a.error);
  constexpr int64_t block = 32;  // a 32 x 32 block's reads and writes stay within 32 + 32 cache lines
  parallelRange(env, rows, block, 2 * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t i0 = r0; i0 < r1; i0 += block) {
      for (int64_t j0 = 0; j0 < cols; j0 += block) {
        const int64_t iEnd = std::min(r1, i0 + block), jEnd = std::min(cols, j0 + block);
        for (int64_t i = i0; i < iEnd; i++)
          for (int64_t j = j0; j < jEnd; j++) out[j * rows + i] = in[i * cols + j];
      }
    }
  });
  return nullptr;
}

/** causalSoftmax(att, blocks, T): each [T, T] block's row i softmaxed over columns 0..i in place, the rest 0. */
napi_value causalSoftmaxJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "causalSoftmax");
  size_t n;
  float* att = a.F(0, &n);
  const int64_t blocks = a.I(1), T = a.I(2);
  a.fits(n, (double)blocks * T * T, "att");
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, blocks * T, T, T, [&](int64_t r0, int64_t r1) { ops.causalSoftmax(att, (int)T, r0, r1); });
  return nullptr;
}

/** softmaxBackward(dAtt, att, rows, T, scale): per row, dAtt = att * (dAtt - sum(att * dAtt)) * scale (causal). */
napi_value softmaxBackwardJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "softmaxBackward");
  size_t nD, nA;
  float* dAtt = a.F(0, &nD);
  const float* att = a.F(1, &nA);
  const int64_t rows = a.I(2), T = a.I(3);
  const double scale = a.D(4);
  a.fits(nD, (double)rows * T, "dAtt");
  a.fits(nA, (double)rows * T, "att");
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, rows, T, 2 * T, [&](int64_t r0, int64_t r1) { ops.softmaxBackward(dAtt, att, (int)T, (float)scale, r0, r1); });
  return nullptr;
}

/** Reads argument i as a typed array of the given type, with its length. */
template <class E>
E* typedArray(Args& a, size_t i, napi_typedarray_type want, const char* what, size_t* length) {
  bool isTyped = false;
  napi_typedarray_type t;
  void* p = nullptr;
  if (a.error.empty() && (i >= a.argc || napi_is_typedarray(a.env, a.argv[i], &isTyped) != napi_ok || !isTyped ||
                          napi_get_typedarray_info(a.env, a.argv[i], &t, length, &p, nullptr, nullptr) != napi_ok || t != want)) {
    a.error = std::string(a.name) + ": argument " + std::to_string(i) + " must be " + what;
  }
  return static_cast<E*>(p);
}

/** Checks that every listed row lies in [0, count). */
void rowsFit(Args& a, const int32_t* rows, size_t n, int64_t count) {
  for (size_t r = 0; a.error.empty() && r < n; r++) {
    if (rows[r] < 0 || rows[r] >= count) a.error = std::string(a.name) + ": row " + std::to_string(rows[r]) + " is outside 0.." + std::to_string(count - 1);
  }
}

/** softmaxStatsRows(z, n, invTau, rows: Int32Array, stats: Float64Array(2 * rows)) */
napi_value softmaxStatsRowsJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "softmaxStatsRows");
  size_t nZ, nRows, nStats;
  const float* z = a.F(0, &nZ);
  const int64_t n = a.I(1);
  const double invTau = a.D(2);
  const int32_t* rows = typedArray<int32_t>(a, 3, napi_int32_array, "an Int32Array", &nRows);
  double* stats = typedArray<double>(a, 4, napi_float64_array, "a Float64Array", &nStats);
  if (a.error.empty() && n == 0) a.error = "softmaxStatsRows: a row needs at least one logit";
  if (a.error.empty() && nStats < 2 * nRows) a.error = "softmaxStatsRows: stats holds fewer than 2 numbers a row";
  if (a.error.empty()) rowsFit(a, rows, nRows, (int64_t)(nZ / std::max<int64_t>(n, 1)));
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, (int64_t)nRows, 1, 2 * n, [&](int64_t r0, int64_t r1) { ops.softmaxStatsRows(z, (int)n, (float)invTau, rows, stats, r0, r1); });
  return nullptr;
}

/** lossGradientRows(d, z, n, invTau, rows, targets: Int32Array, scales: Float32Array, ents: Float32Array, stats) */
napi_value lossGradientRowsJs(napi_env env, napi_callback_info info) {
  Args a(env, info, "lossGradientRows");
  size_t nD, nZ, nRows, nTargets, nScales, nEnts, nStats;
  float* d = a.F(0, &nD);
  const float* z = a.F(1, &nZ);
  const int64_t n = a.I(2);
  const double invTau = a.D(3);
  const int32_t* rows = typedArray<int32_t>(a, 4, napi_int32_array, "an Int32Array", &nRows);
  const int32_t* targets = typedArray<int32_t>(a, 5, napi_int32_array, "an Int32Array", &nTargets);
  const float* scales = a.F(6, &nScales);
  const float* ents = a.F(7, &nEnts);
  const double* stats = typedArray<double>(a, 8, napi_float64_array, "a Float64Array", &nStats);
  if (a.error.empty() && (nTargets < nRows || nScales < nRows || nEnts < nRows || nStats < 2 * nRows)) {
    a.error = "lossGradientRows: targets, scales, ents and stats must cover every row";
  }
  if (a.error.empty() && n == 0) a.error = "lossGradientRows: a row needs at least one logit";
  if (a.error.empty()) rowsFit(a, rows, nRows, (int64_t)(std::min(nZ, nD) / std::max<int64_t>(n, 1)));
  if (!a.error.empty()) return throwError(env, a.error);
  const Ops& ops = opsOf(env);
  parallelRange(env, (int64_t)nRows, 1, 2 * n, [&](int64_t r0, int64_t r1) {
    ops.lossGradientRows(d, z, (int)n, (float)invTau, rows, targets, scales, ents, stats, r0, r1);
  });
  return nullptr;
}

napi_value init(napi_env env, napi_value exports) {
  Kernel* k = new Kernel();
  if (!k->packs[0] || !k->packs[1]) return throwError(env, "native kernel: out of memory");
  if (cpuHas("avx512")) k->isa = avx512Isa();
  else if (cpuHas("avx2")) k->isa = avx2Isa();
  CHECK(napi_set_instance_data(env, k, [](napi_env, void* data, void*) { delete static_cast<Kernel*>(data); }, nullptr));
  const napi_property_descriptor properties[] = {
      {"supported", nullptr, supported, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setIsa", nullptr, setIsa, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"bind", nullptr, bind, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"run", nullptr, run, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setThreads", nullptr, setThreads, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"helperPieces", nullptr, helperPieces, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"swigluForward", nullptr, swigluForwardJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"swigluBackward", nullptr, swigluBackwardJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"rmsNormForward", nullptr, rmsNormForwardJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"rmsNormBackward", nullptr, rmsNormBackwardJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"adamw", nullptr, adamwJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sumOfSquares", nullptr, sumOfSquaresJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmaxRow", nullptr, softmaxRowJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmaxStatsRows", nullptr, softmaxStatsRowsJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"lossGradientRows", nullptr, lossGradientRowsJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"causalSoftmax", nullptr, causalSoftmaxJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmaxBackward", nullptr, softmaxBackwardJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"transpose", nullptr, transposeJs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ropeAndExpand", nullptr, ropeJs<false>, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ropeAndExpandBackward", nullptr, ropeJs<true>, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  CHECK(napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties));
  return exports;
}

}  // namespace
}  // namespace tinkerlab

NAPI_MODULE_INIT() { return tinkerlab::init(env, exports); }
