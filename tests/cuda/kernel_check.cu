// A GPU check of kvc_kernels_cuda that needs only the CUDA toolkit and a host compiler (no
// Catch2, no sentencepiece): every launcher against the CPU reference kernels, with bounds for
// float activations. device_check.sh builds and runs it where the full build cannot be made.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/cuda_ops.h"

namespace kc = kvc::kernels::cuda;
namespace kk = kvc::kernels;
using kk::DType;
using kk::KvType;

namespace {

int g_failures = 0;
kc::Stream g_stream = nullptr;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void report(const char* what, double worst_ratio) {  // worst |err| / bound over the check
  const bool ok = worst_ratio <= 1.0;
  if (!ok) ++g_failures;
  std::printf("%s %-48s worst error / bound = %.3g\n", ok ? "PASS" : "FAIL", what, worst_ratio);
}

template <typename T>
T* to_device(const std::vector<T>& h) {
  kc::CudaStatus st;
  auto* p = static_cast<T*>(kc::device_alloc(h.size() * sizeof(T), &st));
  if (!p) {
    std::fprintf(stderr, "%s\n", st.message.c_str());
    std::exit(2);
  }
  (void)kc::copy_h2d(h.data(), p, h.size() * sizeof(T), g_stream);
  return p;
}
template <typename T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> h(n);
  const kc::CudaStatus st = kc::copy_d2h(p, h.data(), n * sizeof(T), g_stream);
  if (!st.ok) {
    std::fprintf(stderr, "%s\n", st.message.c_str());
    std::exit(2);
  }
  return h;
}

void check_matmul_embed() {
  const int64_t n_rows = 13, n_cols = 512;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
    const auto w = random_floats(static_cast<size_t>(n_rows * n_cols), 1, 0.05f);
    std::vector<uint8_t> bytes(kk::row_bytes(t, n_cols) * n_rows);
    kk::quantize_row(t, w.data(), bytes.data(), n_rows * n_cols);
    std::vector<float> wd(w.size());
    kk::dequantize_row(t, bytes.data(), wd.data(), n_rows * n_cols);
    uint8_t* dw = to_device(bytes);
    const auto bias = random_floats(static_cast<size_t>(n_rows), 3);
    float* db = to_device(bias);
    double worst = 0;
    for (int64_t n_tokens : {1, 3, 9, 40}) {
      const auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 2);
      float* dx = to_device(x);
      float* dy = to_device(std::vector<float>(static_cast<size_t>(n_tokens * n_rows)));
      kc::launch_matmul(t, dw, n_rows, n_cols, dx, n_tokens, dy, db, g_stream);
      const auto y = to_host(dy, static_cast<size_t>(n_tokens * n_rows));
      for (int64_t tk = 0; tk < n_tokens; ++tk) {
        for (int64_t r = 0; r < n_rows; ++r) {
          double ref = bias[static_cast<size_t>(r)], mag = 0;
          for (int64_t c = 0; c < n_cols; ++c) {
            const double p = double{wd[static_cast<size_t>(r * n_cols + c)]} * x[static_cast<size_t>(tk * n_cols + c)];
            ref += p;
            mag += std::abs(p);
          }
          // Float sums of 512 products split over 32 lanes and chunks: well inside 1e-5 sum|w x|.
          worst = std::max(worst, std::abs(y[static_cast<size_t>(tk * n_rows + r)] - ref) / (1e-5 * mag + 1e-6));
        }
      }
      kc::device_free(dx);
      kc::device_free(dy);
    }
    report((std::string("matmul ") + kk::dtype_name(t)).c_str(), worst);
    // embed: rows 0, 12, 5 of the same matrix.
    const std::vector<int32_t> tokens{0, 12, 5, 99};
    int32_t* dt = to_device(tokens);
    float* de = to_device(std::vector<float>(tokens.size() * n_cols));
    kc::launch_embed(t, dw, n_rows, n_cols, dt, 4, de, g_stream);
    const auto e = to_host(de, tokens.size() * n_cols);
    double worst_e = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      for (int64_t c = 0; c < n_cols; ++c) {
        const double ref = tokens[i] < n_rows ? wd[static_cast<size_t>(tokens[i] * n_cols + c)] : 0.0;
        worst_e = std::max(worst_e, std::abs(e[i * n_cols + c] - ref) / (1e-6 * (1 + std::abs(ref))));
      }
    }
    report((std::string("embed ") + kk::dtype_name(t)).c_str(), worst_e);
    for (void* p : {static_cast<void*>(dw), static_cast<void*>(db), static_cast<void*>(dt), static_cast<void*>(de)}) {
      kc::device_free(p);
    }
  }
}

void check_elementwise() {
  const int64_t n_tokens = 3, n = 384;
  const auto x = random_floats(static_cast<size_t>(n_tokens * n), 5, 2.0f);
  const auto w = random_floats(static_cast<size_t>(n), 6);
  float *dx = to_device(x), *dw = to_device(w), *dout = to_device(x);
  kc::launch_rmsnorm(dx, dw, n_tokens, n, 1e-5f, dout, g_stream);
  auto out = to_host(dout, x.size());
  double worst = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double{x[static_cast<size_t>(t * n + i)]} * x[static_cast<size_t>(t * n + i)];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = x[static_cast<size_t>(t * n + i)] * inv * w[static_cast<size_t>(i)];
      worst = std::max(worst, std::abs(out[static_cast<size_t>(t * n + i)] - ref) / (4e-7 * std::abs(ref) + 1e-9));
    }
  }
  report("rmsnorm", worst);
  for (bool inter : {true, false}) {
    const int n_heads = 3, head_dim = 64, n_rot = 32;
    const std::vector<int64_t> pos{0, 1, 17, 70000};
    const auto q = random_floats(pos.size() * n_heads * head_dim, 9);
    float* dq = to_device(q);
    int64_t* dp = to_device(pos);
    kc::launch_rope(dq, 4, dp, n_heads, head_dim, kc::RopeArgs{n_rot, 10000.0f, 0.5f, inter}, g_stream);
    auto y = to_host(dq, q.size());
    std::vector<float> ref = q;
    for (size_t t = 0; t < pos.size(); ++t) {
      kk::rope(ref.data() + t * n_heads * head_dim, n_heads, head_dim, pos[t],
               kk::RopeParams{n_rot, 10000.0f, 0.5f, inter});
    }
    double wr = 0;
    for (size_t i = 0; i < q.size(); ++i) wr = std::max(wr, std::abs(y[i] - ref[i]) / (1e-6 * (std::abs(q[i]) + 1.0)));
    report(inter ? "rope interleaved" : "rope neox", wr);
    kc::device_free(dq);
    kc::device_free(dp);
  }
  const auto g = random_floats(1000, 7, 4.0f), u = random_floats(1000, 8);
  float *dg = to_device(g), *du = to_device(u);
  kc::launch_silu_mul(dg, du, 1000, g_stream);
  const auto s = to_host(dg, 1000);
  double ws = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double ref = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
    ws = std::max(ws, std::abs(s[i] - ref) / (1e-5 * (1 + std::abs(ref))));
  }
  report("silu_mul", ws);
  kc::launch_add(dg, du, 1000, g_stream);
  const auto a = to_host(dg, 1000);
  double wa = 0;
  for (size_t i = 0; i < g.size(); ++i) wa = std::max(wa, a[i] == s[i] + u[i] ? 0.0 : 2.0);
  report("add (exact)", wa);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(dw), static_cast<void*>(dout), static_cast<void*>(dg),
                  static_cast<void*>(du)}) {
    kc::device_free(p);
  }
}

void check_kv_attention() {
  // Head sizes 64, 48 and 8 store quantized rows in groups of 32, 16 and 8.
  for (int head_dim : {64, 48, 8}) {
    for (int n_kv_head : {2, 1}) {
      for (KvType kt : {KvType::f16, KvType::q8, KvType::q4}) {
        const KvType vt = kt;
        const int n_head = 4, B = 16, layer = 1;
        const auto layout = kk::make_kv_block_layout(2, n_kv_head, head_dim, B, kt, vt);
        const int64_t kv_w = int64_t{n_kv_head} * head_dim, q_w = int64_t{n_head} * head_dim;
        const int64_t n_pos = 45, n_blocks = 3;  // one sequence; the last 5 positions are queried
        std::vector<std::vector<uint8_t>> host(n_blocks,
                                               std::vector<uint8_t>(static_cast<size_t>(layout->block_bytes)));
        std::vector<uint8_t*> host_ptrs, dev_ptrs;
        for (auto& h : host) {
          host_ptrs.push_back(h.data());
          dev_ptrs.push_back(to_device(h));
        }
        const auto k = random_floats(static_cast<size_t>(n_pos * kv_w), 30),
                   v = random_floats(static_cast<size_t>(n_pos * kv_w), 31);
        std::vector<kc::KvStoreTarget> targets;
        for (int64_t p = 0; p < n_pos; ++p) {
          targets.push_back({dev_ptrs[static_cast<size_t>(p / B)], p % B});
          kk::kv_store_at(*layout, host_ptrs.data(), layer, p, k.data() + p * kv_w, v.data() + p * kv_w);
        }
        const kc::KvGeometry g{kt,
                               vt,
                               n_kv_head,
                               head_dim,
                               B,
                               layout->group,
                               layout->k_row_bytes,
                               layout->v_row_bytes,
                               layout->k_offset(layer),
                               layout->v_offset(layer)};
        auto* dtargets = to_device(targets);
        float *dk = to_device(k), *dv = to_device(v);
        kc::launch_kv_store(g, dtargets, n_pos, dk, dv, g_stream);
        double wb = 0;
        for (int64_t b = 0; b < n_blocks; ++b) {
          if (to_host(dev_ptrs[static_cast<size_t>(b)], host[static_cast<size_t>(b)].size()) !=
              host[static_cast<size_t>(b)])
            wb = 2;
        }
        const std::string name = std::string(kk::kv_type_name(kt)) + " head_dim " + std::to_string(head_dim) +
                                 " kv heads " + std::to_string(n_kv_head);
        report(("kv_store bytes " + name).c_str(), wb);
        const int64_t n_q = 5;
        const auto q = random_floats(static_cast<size_t>(n_q * q_w), 50, 0.5f);
        std::vector<kc::AttentionRow> rows;
        for (int64_t i = 0; i < n_q; ++i) rows.push_back({n_pos - n_q + i + 1, 0});
        auto* dtables = to_device(dev_ptrs);
        auto* drows = to_device(rows);
        float *dq = to_device(q), *dout = to_device(q);
        const kk::AttentionShape s{n_head, n_kv_head, head_dim, kv_w, 1.0f / std::sqrt(static_cast<float>(head_dim))};
        for (int64_t window : {0, 7}) {
          kc::launch_attention(g, dtables, drows, n_q, dq, n_head, s.scale, window, dout, g_stream);
          const auto out = to_host(dout, q.size());
          double wa = 0;
          for (int64_t i = 0; i < n_q; ++i) {
            const kk::PagedKvView view{host_ptrs.data(), n_blocks, &*layout, layer, window};
            std::vector<float> ref(static_cast<size_t>(q_w)),
                scratch(static_cast<size_t>(kk::paged_attention_scratch_floats(s, n_pos)));
            kk::attention_paged_reference(q.data() + i * q_w, view, rows[static_cast<size_t>(i)].n_kv, s, 0, n_kv_head,
                                          ref.data(), scratch.data());
            // Both sides dequantize K and V exactly and compute in float: only summation order and
            // the online softmax's rescaling differ. |v| <= ~4 here.
            for (int64_t j = 0; j < q_w; ++j)
              wa = std::max(wa, std::abs(out[static_cast<size_t>(i * q_w + j)] - ref[static_cast<size_t>(j)]) / 1e-4);
          }
          report(("attention " + name + (window ? " window 7" : "")).c_str(), wa);
        }
        for (uint8_t* p : dev_ptrs) kc::device_free(p);
        for (void* p :
             {static_cast<void*>(dtargets), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dtables),
              static_cast<void*>(drows), static_cast<void*>(dq), static_cast<void*>(dout)}) {
          kc::device_free(p);
        }
      }
    }
  }
}

}  // namespace

int main() {
  std::string why;
  if (kc::device_count(&why) == 0) {
    std::printf("no CUDA device: %s\n", why.c_str());
    return 0;
  }
  kc::DeviceInfo info;
  if (auto st = kc::open_device(0, &info); !st.ok || !kc::stream_create(&g_stream).ok) {
    std::printf("cannot open the device: %s\n", st.message.c_str());
    return 2;
  }
  std::printf("device: %s (sm_%d%d, %zu MiB)\n", info.name.c_str(), info.cc_major, info.cc_minor,
              info.total_bytes >> 20);
  check_matmul_embed();
  check_elementwise();
  check_kv_attention();
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
