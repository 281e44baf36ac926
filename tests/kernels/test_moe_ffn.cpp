// moe_ffn against a token-by-token reference (split and fused experts, biases, shared experts), and
// matmul_many against matmul; a decode step reads only its chosen experts' pages.
#include <sys/mman.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_ffn.h"
#include "kernels/cpu/quant.h"

using namespace kvc::kernels;

namespace {

// Float values quantized to `type`, rows of n_cols.
struct Tensor {
  DType type;
  int64_t n_rows, n_cols;
  std::vector<uint8_t> bytes;
  MatrixView view() const { return {type, bytes.data(), n_rows, n_cols}; }
};

Tensor random_tensor(DType type, int64_t n_rows, int64_t n_cols, float std, std::mt19937& rng) {
  Tensor t{type, n_rows, n_cols, std::vector<uint8_t>(row_bytes(type, n_cols) * static_cast<size_t>(n_rows))};
  std::normal_distribution<float> v(0.0f, std);
  std::vector<float> row(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& f : row) f = v(rng);
    quantize_row(type, row.data(), t.bytes.data() + static_cast<size_t>(r) * row_bytes(type, n_cols), n_cols);
  }
  return t;
}

std::vector<float> random_floats(int64_t n, float std, std::mt19937& rng) {
  std::normal_distribution<float> v(0.0f, std);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& f : out) f = v(rng);
  return out;
}

MatrixView rows(const MatrixView& m, int64_t first, int64_t n) {
  return {m.type, static_cast<const uint8_t*>(m.data) + static_cast<size_t>(first) * row_bytes(m.type, m.n_cols), n,
          m.n_cols};
}

std::vector<double> product(const MatrixView& w, const float* x) {
  std::vector<float> y(static_cast<size_t>(w.n_rows));
  matmul_reference(w, x, 1, y.data());
  return {y.begin(), y.end()};
}

// The MoE FFN of each token on its own: each chosen expert's rows through the scalar matmul.
std::vector<float> reference(const MoeFfnWeights& w, const float* x, int64_t n_tokens) {
  const int64_t n_embd = w.router.n_cols, n_ff = w.n_ff, k = w.routing.n_used;
  std::vector<float> out(static_cast<size_t>(n_tokens * n_embd));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * n_embd;
    std::vector<float> logits(static_cast<size_t>(w.routing.n_expert));
    matmul_reference(w.router, xt, 1, logits.data());
    if (w.router_bias) {
      for (size_t e = 0; e < logits.size(); ++e) logits[e] += w.router_bias[e];
    }
    std::vector<int32_t> ids(static_cast<size_t>(k));
    std::vector<float> wts(static_cast<size_t>(k));
    moe_route(w.routing, logits.data(), w.selection_bias, 1, ids.data(), wts.data());
    std::vector<double> sum(static_cast<size_t>(n_embd), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[static_cast<size_t>(j)];
      std::vector<double> g, u;
      if (w.fused()) {
        const std::vector<double> gu = product(rows(w.gate, e * 2 * n_ff, 2 * n_ff), xt);
        g.assign(gu.begin(), gu.begin() + n_ff);
        u.assign(gu.begin() + n_ff, gu.end());
      } else {
        g = product(rows(w.gate, e * n_ff, n_ff), xt);
        u = product(rows(w.up, e * n_ff, n_ff), xt);
      }
      std::vector<float> act(static_cast<size_t>(n_ff));
      for (int64_t i = 0; i < n_ff; ++i) {
        double gi = g[static_cast<size_t>(i)], ui = u[static_cast<size_t>(i)];
        if (w.gate_bias) gi += static_cast<double>(w.gate_bias[e * (w.fused() ? 2 * n_ff : n_ff) + i]);
        if (w.gate_bias && w.fused()) ui += static_cast<double>(w.gate_bias[e * 2 * n_ff + n_ff + i]);
        if (w.up_bias) ui += static_cast<double>(w.up_bias[e * n_ff + i]);
        act[static_cast<size_t>(i)] = static_cast<float>(gi / (1.0 + std::exp(-gi)) * ui);
      }
      const std::vector<double> d = product(rows(w.down, e * n_embd, n_embd), act.data());
      for (int64_t i = 0; i < n_embd; ++i) {
        const double di =
            d[static_cast<size_t>(i)] + (w.down_bias ? static_cast<double>(w.down_bias[e * n_embd + i]) : 0.0);
        sum[static_cast<size_t>(i)] += di * static_cast<double>(wts[static_cast<size_t>(j)]);
      }
    }
    if (w.has_shared()) {
      const std::vector<double> g = product(w.shared_gate, xt), u = product(w.shared_up, xt);
      std::vector<float> act(g.size());
      for (size_t i = 0; i < g.size(); ++i) act[i] = static_cast<float>(g[i] / (1.0 + std::exp(-g[i])) * u[i]);
      const std::vector<double> d = product(w.shared_down, act.data());
      double scale = 1.0;
      if (w.shared_gate_inp.n_rows > 0) scale = 1.0 / (1.0 + std::exp(-product(w.shared_gate_inp, xt)[0]));
      for (int64_t i = 0; i < n_embd; ++i) sum[static_cast<size_t>(i)] += d[static_cast<size_t>(i)] * scale;
    }
    for (int64_t i = 0; i < n_embd; ++i) out[static_cast<size_t>(t * n_embd + i)] = static_cast<float>(sum[i]);
  }
  return out;
}

// max |a - b| over the RMS of b.
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, r = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double bi = b[i];
    d = std::max(d, std::abs(static_cast<double>(a[i]) - bi));
    r += bi * bi;
  }
  return d / std::sqrt(r / static_cast<double>(b.size()));
}

struct Layer {
  std::vector<Tensor> tensors;
  std::vector<std::vector<float>> floats;
  MoeFfnWeights w;
};

// A layer of 8 experts (4 used) on width 64, experts of 32: split or fused gate/up, with or
// without biases, shared experts with or without their sigmoid gate.
Layer make_layer(DType type, bool fused, bool biases, int shared, std::mt19937& rng) {
  constexpr int64_t n_embd = 64, n_ff = 32, n_expert = 8;
  Layer l;
  l.tensors.reserve(8);
  l.floats.reserve(8);
  auto tensor = [&](DType t, int64_t r, int64_t c, float std) {
    l.tensors.push_back(random_tensor(t, r, c, std, rng));
    return l.tensors.back().view();
  };
  auto floats = [&](int64_t n, float std) {
    l.floats.push_back(random_floats(n, std, rng));
    return l.floats.back().data();
  };
  MoeFfnWeights& w = l.w;
  w.routing.n_expert = n_expert;
  w.routing.n_used = 4;
  w.routing.norm_weights = true;
  w.n_ff = n_ff;
  w.router = tensor(DType::f32, n_expert, n_embd, 0.5f);
  w.gate = tensor(type, n_expert * (fused ? 2 : 1) * n_ff, n_embd, 0.2f);
  w.up = fused ? MatrixView{type, nullptr, 0, n_embd} : tensor(type, n_expert * n_ff, n_embd, 0.2f);
  w.down = tensor(type, n_expert * n_embd, n_ff, 0.2f);
  if (biases) {
    w.router_bias = floats(n_expert, 1.0f);
    w.gate_bias = floats(n_expert * (fused ? 2 : 1) * n_ff, 0.5f);
    if (!fused) w.up_bias = floats(n_expert * n_ff, 0.5f);
    w.down_bias = floats(n_expert * n_embd, 0.5f);
  }
  if (shared > 0) {
    w.shared_gate = tensor(type, 64, n_embd, 0.2f);
    w.shared_up = tensor(type, 64, n_embd, 0.2f);
    w.shared_down = tensor(type, n_embd, 64, 0.2f);
    if (shared > 1) w.shared_gate_inp = tensor(DType::f32, 1, n_embd, 0.2f);
  }
  return l;
}

}  // namespace

TEST_CASE("moe_ffn equals the token-by-token reference", "[kernels]") {
  // Batches of 1 (decode: x read in place), 3 and 37 tokens (prefill: tokens grouped by expert,
  // experts with one token and with many), every variant of the layer. Leaving out a step of
  // moe_ffn (a bias, the shared experts or their gate, the weights) moves the result by far more
  // than the bound: the experts' outputs are of the order of the output itself.
  ThreadPool pool(3);
  MoeFfnScratch scratch;
  std::mt19937 rng(7);
  for (DType type : {DType::f32, DType::f16, DType::q8_0, DType::q4_0}) {
    for (bool fused : {false, true}) {
      for (bool biases : {false, true}) {
        for (int shared : {0, 1, 2}) {
          Layer l = make_layer(type, fused, biases, shared, rng);
          for (int64_t n : {1, 3, 37}) {
            const std::vector<float> x = random_floats(n * 64, 1.0f, rng);
            std::vector<float> y(static_cast<size_t>(n * 64), NAN);
            moe_ffn(l.w, x.data(), n, y.data(), pool, scratch);
            const std::vector<float> want = reference(l.w, x.data(), n);
            INFO(dtype_name(type) << (fused ? " fused" : " split") << (biases ? " biases" : "") << " shared " << shared
                                  << ", " << n << " tokens");
            // Float weights: only summation orders differ. Quantized ones: the experts' activations
            // are quantized to 8 bits before down, and a last-bit difference in one (the SIMD
            // silu, the summation order) can move it one step, ~1e-3 of the output.
            const bool float_weights = type == DType::f32 || type == DType::f16;
            CHECK(rel_error(y, want) < (float_weights ? 1e-4 : 1e-2));
          }
        }
      }
    }
  }
}

TEST_CASE("matmul_many gives each job matmul's result bit for bit", "[kernels]") {
  // Jobs of different types and shapes, two sharing their activations, one writing every other
  // row block of a wider buffer (y_stride), one over more tokens than a chunk of activations.
  ThreadPool pool(3);
  std::mt19937 rng(3);
  const Tensor a = random_tensor(DType::q4_0, 96, 256, 0.1f, rng), b = random_tensor(DType::q8_0, 40, 256, 0.1f, rng);
  const Tensor c = random_tensor(DType::q4_k, 33, 512, 0.1f, rng), d = random_tensor(DType::f16, 17, 64, 0.1f, rng);
  const Tensor big = random_tensor(DType::q8_0, 20, 8192, 0.1f, rng);
  const std::vector<float> x1 = random_floats(5 * 256, 1, rng), x2 = random_floats(9 * 512, 1, rng);
  const std::vector<float> x3 = random_floats(3 * 64, 1, rng), x4 = random_floats(140 * 8192, 1, rng);
  std::vector<float> ya(5 * 96), yb(5 * 80), yc(9 * 33), yd(3 * 17), ybig(140 * 20);
  const std::vector<MatmulJob> jobs = {{a.view(), x1.data(), 5, ya.data(), 0},
                                       {b.view(), x1.data(), 5, yb.data(), 80},
                                       {c.view(), x2.data(), 9, yc.data(), 0},
                                       {d.view(), x3.data(), 3, yd.data(), 0},
                                       {big.view(), x4.data(), 140, ybig.data(), 0}};
  matmul_many(jobs, pool);
  for (const MatmulJob& j : jobs) {
    const int64_t ys = j.y_stride > 0 ? j.y_stride : j.w.n_rows;
    std::vector<float> want(static_cast<size_t>(j.n_tokens * j.w.n_rows));
    matmul(j.w, j.x, j.n_tokens, want.data(), pool);
    for (int64_t t = 0; t < j.n_tokens; ++t) {
      CHECK(std::memcmp(j.y + t * ys, want.data() + t * j.w.n_rows, static_cast<size_t>(j.w.n_rows) * 4) == 0);
    }
  }
}

TEST_CASE("moe_ffn reads only the chosen experts' weights", "[kernels]") {
  // Each expert's gate, up and down rows fill whole pages (F32, width 64, experts of 16); every
  // page of an expert that no token of the batch chose is made unreadable, so reading it kills
  // the test. One token (decode) and a batch of 4.
  const long page = ::sysconf(_SC_PAGESIZE);
  REQUIRE(page == 4096);
  constexpr int64_t n_embd = 64, n_ff = 16, n_expert = 16;
  const size_t expert_bytes = n_ff * n_embd * sizeof(float);  // gate, up and down alike: one page
  std::mt19937 rng(11);
  const Tensor router = random_tensor(DType::f32, n_expert, n_embd, 0.5f, rng);
  auto* mem = static_cast<uint8_t*>(
      ::mmap(nullptr, 3 * n_expert * expert_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(mem != MAP_FAILED);
  const std::vector<float> values = random_floats(3 * n_expert * n_ff * n_embd, 0.2f, rng);
  std::memcpy(mem, values.data(), values.size() * sizeof(float));
  MoeFfnWeights w;
  w.routing.n_expert = n_expert;
  w.routing.n_used = 2;
  w.n_ff = n_ff;
  w.router = router.view();
  w.gate = {DType::f32, mem, n_expert * n_ff, n_embd};
  w.up = {DType::f32, mem + n_expert * expert_bytes, n_expert * n_ff, n_embd};
  w.down = {DType::f32, mem + 2 * n_expert * expert_bytes, n_expert * n_embd, n_ff};
  ThreadPool pool(2);
  MoeFfnScratch scratch;
  for (int64_t n : {1, 4}) {
    const std::vector<float> x = random_floats(n * n_embd, 1.0f, rng);
    std::vector<float> logits(static_cast<size_t>(n * n_expert));
    matmul_reference(w.router, x.data(), n, logits.data());
    std::vector<int32_t> ids(static_cast<size_t>(n * 2));
    std::vector<float> wts(ids.size());
    moe_route(w.routing, logits.data(), nullptr, n, ids.data(), wts.data());
    std::vector<bool> chosen(n_expert, false);
    for (int32_t e : ids) chosen[static_cast<size_t>(e)] = true;
    int n_hidden = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
      for (int part = 0; part < 3 && !chosen[static_cast<size_t>(e)]; ++part) {
        REQUIRE(::mprotect(mem + (part * n_expert + e) * expert_bytes, expert_bytes, PROT_NONE) == 0);
        ++n_hidden;
      }
    }
    CHECK(n_hidden >= 3 * (n_expert - 2 * n));
    std::vector<float> y(static_cast<size_t>(n * n_embd));
    moe_ffn(w, x.data(), n, y.data(), pool, scratch);
    REQUIRE(::mprotect(mem, 3 * n_expert * expert_bytes, PROT_READ | PROT_WRITE) == 0);
    CHECK(rel_error(y, reference(w, x.data(), n)) < 1e-4);
  }
  ::munmap(mem, 3 * n_expert * expert_bytes);
}

TEST_CASE("moe_ffn decode speed against dense products of the same bytes", "[.][bench]") {
  // Qwen3-30B-A3B's layer: 128 experts of 768 on width 2048, 8 per token, Q4_0.
  constexpr int64_t n_embd = 2048, n_ff = 768, n_expert = 128;
  std::mt19937 rng(5);
  auto big = [&](int64_t rows, int64_t cols) { return random_tensor(DType::q4_0, rows, cols, 0.02f, rng); };
  const Tensor router = random_tensor(DType::f32, n_expert, n_embd, 0.1f, rng);
  const Tensor gate = big(n_expert * n_ff, n_embd), up = big(n_expert * n_ff, n_embd),
               down = big(n_expert * n_embd, n_ff);
  MoeFfnWeights w;
  w.routing.n_expert = n_expert;
  w.routing.n_used = 8;
  w.routing.norm_weights = true;
  w.n_ff = n_ff;
  w.router = router.view();
  w.gate = gate.view();
  w.up = up.view();
  w.down = down.view();
  ThreadPool pool(2);
  MoeFfnScratch scratch;
  const std::vector<float> x = random_floats(n_embd * 64, 1.0f, rng);
  std::vector<float> y(static_cast<size_t>(n_embd * 64));
  // A dense stand-in reading the same bytes: 16 x 768 rows of 2048, then 8 x 2048 rows of 768,
  // one of 16 such pairs in turn (as the experts, more than the caches hold).
  std::vector<Tensor> dense_gus, dense_downs;
  for (int i = 0; i < 16; ++i) {
    dense_gus.push_back(big(16 * n_ff, n_embd));
    dense_downs.push_back(big(8 * n_embd, n_ff));
  }
  std::vector<float> t1(16 * n_ff), t2(8 * n_embd);
  if (const char* only = std::getenv("KVC_MOE_BENCH_ONLY")) {  // one loop alone, for perf stat
    for (int i = 0; i < 2000; ++i) {
      if (std::string(only) == "moe") {
        moe_ffn(w, x.data() + (i % 64) * n_embd, 1, y.data(), pool, scratch);
      } else {
        matmul(dense_gus[static_cast<size_t>(i % 16)].view(), x.data(), 1, t1.data(), pool);
        matmul(dense_downs[static_cast<size_t>(i % 16)].view(), t1.data(), 1, t2.data(), pool);
      }
    }
    return;
  }
  // Rounds of each in turn; the fastest round of each (the machine is shared: others' load only slows).
  double best_moe = 1e9, best_dense = 1e9, best_prefill = 1e9;
  for (int rep = 0; rep < 15; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 50; ++i) moe_ffn(w, x.data() + (i % 64) * n_embd, 1, y.data(), pool, scratch);
    best_moe = std::min(best_moe,
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 50);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 50; ++i) {
      matmul(dense_gus[static_cast<size_t>(i % 16)].view(), x.data(), 1, t1.data(), pool);
      matmul(dense_downs[static_cast<size_t>(i % 16)].view(), t1.data(), 1, t2.data(), pool);
    }
    best_dense = std::min(
        best_dense, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 50);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 2; ++i) moe_ffn(w, x.data(), 64, y.data(), pool, scratch);
    best_prefill = std::min(
        best_prefill, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 2);
  }
  WARN("decode: moe_ffn " << best_moe << " ms, dense of the same bytes " << best_dense
                          << " ms; prefill of 64: " << best_prefill << " ms (fastest of 15 rounds)");
}
