// A Node-API addon running the engine's matrix products natively (AVX-512 or AVX2 with FMA), in place in the
// engine's shared WebAssembly memory, optionally on two threads. Built and loaded by native/kernel.ts.
//
// JavaScript interface (one instance per Node environment):
//   supported()            the instruction sets this CPU runs: ["avx512", "avx2"], ["avx2"] or []
//   setIsa(name)           the kernel to use (it must be supported)
//   bind(heap, calls)      heap: a Float32Array over the whole memory; calls: an Int32Array of call slots
//   run(count)             runs calls 0 .. count-1 (13 slots each, as lib/model/simd-gemm.ts's GemmArgs: byte
//                          addresses of A, B, C; M, K, N; strides in floats; accumulate; scale as float bits)
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

constexpr int slotsPerCall = 13;
// A call is cut into pieces only when it is big enough to repay sharing (as the WebAssembly path does).
constexpr double parallelMinWork = 1 << 23;
constexpr int maxPieces = 8;
// When waiting for the helper takes more than this share of the jobs' time (it keeps losing its core), the next
// aloneJobs jobs run on the calling thread alone.
constexpr double starvedShare = 0.15;
constexpr int aloneJobs = 200;

struct Piece {
  int call, row0, row1, col0, col1;
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
    isa.piece(heap, calls[p.call], p.row0, p.row1, p.col0, p.col1, packs[thread]);
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
    const bool parallel = helper.joinable();
    cut(parallel);
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

/** Reads call i from the slots, or returns an error message when it is malformed or reaches outside the heap. */
std::string readCall(const Kernel& k, int i, GemmCall& c) {
  const int32_t* s = k.slots + (size_t)i * slotsPerCall;
  // The three byte addresses are unsigned: a WebAssembly memory reaches 4 GiB, and one past 2 GiB arrives here
  // with the sign bit set. The sizes and strides that follow must not be negative.
  const uint32_t address[3] = {(uint32_t)s[0], (uint32_t)s[1], (uint32_t)s[2]};
  for (int t = 3; t < 12; t++) {
    if (s[t] < 0) return "argument " + std::to_string(t) + " is negative (" + std::to_string(s[t]) + ")";
  }
  if (address[0] % 4 || address[1] % 4 || address[2] % 4) return "addresses must be multiples of 4 bytes";
  c.a = address[0] / 4, c.b = address[1] / 4, c.c = address[2] / 4;
  c.M = s[3], c.K = s[4], c.N = s[5];
  c.ars = s[6], c.acs = s[7], c.brs = s[8], c.bcs = s[9], c.crs = s[10];
  c.accumulate = s[11] != 0;
  std::memcpy(&c.scale, s + 12, sizeof(float));
  if (c.ars != 1 && c.acs != 1) return "A needs a row or column stride of 1";
  if (c.brs != 1 && c.bcs != 1) return "B needs a row or column stride of 1";
  if (c.M == 0 || c.N == 0) return "";
  const auto last = [](ptrdiff_t base, ptrdiff_t n1, ptrdiff_t s1, ptrdiff_t n2, ptrdiff_t s2) {
    return base + (n1 > 0 ? (n1 - 1) * s1 : 0) + (n2 > 0 ? (n2 - 1) * s2 : 0);
  };
  const size_t end = std::max({c.K > 0 ? last(c.a, c.M, c.ars, c.K, c.acs) : 0, c.K > 0 ? last(c.b, c.K, c.brs, c.N, c.bcs) : 0,
                               last(c.c, c.M, c.crs, c.N, 1)});
  if (end >= k.heapFloats) return "operands reach float " + std::to_string(end) + ", past the bound memory of " + std::to_string(k.heapFloats);
  return "";
}

napi_value run(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  int32_t count = 0;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &count) != napi_ok) return throwError(env, "run: expected a count of calls");
  Kernel* k = kernelOf(env);
  if (!k->isa.piece) return throwError(env, "run: this CPU has neither AVX-512 nor AVX2 with FMA");
  if (!k->heap) return throwError(env, "run: no memory bound (call bind first)");
  if (count < 0 || (size_t)count * slotsPerCall > k->slotCount) {
    return throwError(env, "run: " + std::to_string(count) + " calls do not fit the bound call slots");
  }
  k->calls.resize(count);
  for (int i = 0; i < count; i++) {
    const std::string error = readCall(*k, i, k->calls[i]);
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
  };
  CHECK(napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties));
  return exports;
}

}  // namespace
}  // namespace tinkerlab

NAPI_MODULE_INIT() { return tinkerlab::init(env, exports); }
