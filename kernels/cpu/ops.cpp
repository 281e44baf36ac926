// The ops of ops.h: run-time ISA dispatch, rope tables, and attention built from range loops.
#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/ops_impl.h"

namespace kvc::kernels {

namespace detail {
void kernel_check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "kvchat: kernel check failed: %s (%s:%d)\n", cond, file, line);
  std::abort();
}
}  // namespace detail

const OpsTable& ops_for(Isa isa) {
  const CpuFeatures& f = cpu_features();
  if (isa >= Isa::avx512 && f.avx512) return ops_avx512();
  if (isa >= Isa::avx2 && f.avx2) return ops_avx2();
  return ops_scalar();
}

const OpsTable& ops_active() {
  static const OpsTable& t = ops_for(best_isa());
  return t;
}

namespace {

// Invariants: inv_freq has n_rot/2 entries for `params` when has_params; cos_full and
// sin_signed have n_rot entries for (params, pos) when has_tables.
struct RopeCache {
  bool has_params = false;
  RopeParams params;
  std::vector<double> inv_freq;  // (n_rot / 2): freq_scale * freq_base^(-2k / n_rot)
  bool has_tables = false;
  int64_t pos = 0;
  std::vector<float> cos_full;    // (n_rot)
  std::vector<float> sin_signed;  // (n_rot)
};

bool same_params(const RopeParams& a, const RopeParams& b) {
  return a.n_rot == b.n_rot && a.freq_base == b.freq_base && a.freq_scale == b.freq_scale &&
         a.interleaved == b.interleaved && a.freq_factors == b.freq_factors && a.attn_factor == b.attn_factor &&
         a.yarn == b.yarn && a.yarn_low == b.yarn_low && a.yarn_high == b.yarn_high;
}

}  // namespace

RopeTables rope_tables(const RopeParams& p, int64_t pos) {
  KVC_KERNEL_CHECK(p.n_rot >= 0 && p.n_rot % 2 == 0);
  thread_local RopeCache cache;
  const int half = p.n_rot / 2;
  if (!cache.has_params || !same_params(cache.params, p)) {
    cache.params = p;
    cache.inv_freq.resize(static_cast<size_t>(half));
    for (int k = 0; k < half; ++k) {
      const double exponent = -2.0 * k / p.n_rot;
      double& inv = cache.inv_freq[static_cast<size_t>(k)];
      inv = static_cast<double>(p.freq_scale) * std::pow(static_cast<double>(p.freq_base), exponent);
      if (p.freq_factors) inv /= static_cast<double>(p.freq_factors[k]);
      if (p.yarn) {  // blend in the unscaled frequency by the share `kept`
        const double y = (k - static_cast<double>(p.yarn_low)) /
                         std::max(0.001, static_cast<double>(p.yarn_high) - static_cast<double>(p.yarn_low));
        const double kept = 1.0 - std::clamp(y, 0.0, 1.0);
        inv = inv * (1.0 - kept) + inv / static_cast<double>(p.freq_scale) * kept;
      }
    }
    cache.has_params = true;
    cache.has_tables = false;
  }
  if (!cache.has_tables || cache.pos != pos) {
    cache.cos_full.resize(static_cast<size_t>(p.n_rot));
    cache.sin_signed.resize(static_cast<size_t>(p.n_rot));
    for (int k = 0; k < half; ++k) {
      const double theta = static_cast<double>(pos) * cache.inv_freq[static_cast<size_t>(k)];
      const auto c = static_cast<float>(std::cos(theta)) * p.attn_factor;
      const auto s = static_cast<float>(std::sin(theta)) * p.attn_factor;
      const auto ia = static_cast<size_t>(p.interleaved ? 2 * k : k);
      const auto ib = static_cast<size_t>(p.interleaved ? 2 * k + 1 : k + half);
      cache.cos_full[ia] = c;
      cache.cos_full[ib] = c;
      cache.sin_signed[ia] = -s;
      cache.sin_signed[ib] = s;
    }
    cache.pos = pos;
    cache.has_tables = true;
  }
  return {cache.cos_full.data(), cache.sin_signed.data()};
}

void rope_with(const OpsTable& t, float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  KVC_KERNEL_CHECK(p.n_rot <= head_dim);
  if (p.n_rot == 0 || n_heads <= 0) return;
  const RopeTables tables = rope_tables(p, pos);
  t.rope_apply(x, n_heads, head_dim, p.n_rot, p.interleaved, tables.cos_full, tables.sin_signed);
}

void attention_f16_with(const OpsTable& t, const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                        const AttentionShape& s, int kv_head_begin, int kv_head_end, float* out, float* scratch) {
  KVC_KERNEL_CHECK(s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0 && s.head_dim > 0 && s.softcap == 0.0f &&
                   s.sinks == nullptr);
  KVC_KERNEL_CHECK(0 <= kv_head_begin && kv_head_begin <= kv_head_end && kv_head_end <= s.n_kv_head && n_kv >= 0);
  const int n_group = s.n_head / s.n_kv_head;  // query heads per kv head
  const int64_t group_floats = static_cast<int64_t>(n_group) * s.head_dim;
  for (int h = kv_head_begin; h < kv_head_end; ++h) {
    const float* q_group = q + h * group_floats;  // (n_group, head_dim)
    float* out_group = out + h * group_floats;    // (n_group, head_dim)
    const uint16_t* k_head = k + static_cast<int64_t>(h) * s.head_dim;
    const uint16_t* v_head = v + static_cast<int64_t>(h) * s.head_dim;
    float* scores = scratch;  // (n_group, n_kv)
    t.score_range_f16(q_group, n_group, s.head_dim, k_head, s.kv_stride, n_kv, s.scale, scores, n_kv);
    for (int j = 0; j < n_group; ++j) t.softmax_inplace(scores + j * n_kv, n_kv);
    std::memset(out_group, 0, static_cast<size_t>(group_floats) * sizeof(float));
    t.accumulate_range_f16(scores, n_kv, n_group, v_head, s.kv_stride, n_kv, s.head_dim, out_group);
  }
}

void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  ops_active().rmsnorm(x, w, n, eps, out);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) { ops_active().silu_mul(gate, up, n, out); }

void swiglu_oai_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], limit);
    const float y = std::clamp(up[i], -limit, limit);
    out[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float k_sqrt_2_over_pi = 0.7978845608f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(k_sqrt_2_over_pi * g * (1.0f + 0.044715f * g * g))) * up[i];
  }
}

void softcap_inplace(float* x, int64_t n, float cap) {
  KVC_KERNEL_CHECK(cap > 0.0f);
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void scale_inplace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void add_inplace(float* x, const float* y, int64_t n) { ops_active().add_inplace(x, y, n); }

void softmax_inplace(float* x, int64_t n) { ops_active().softmax_inplace(x, n); }

void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  rope_with(ops_active(), x, n_heads, head_dim, pos, p);
}

void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv, const AttentionShape& s,
                   int kv_head_begin, int kv_head_end, float* out, float* scratch) {
  attention_f16_with(ops_active(), q, k, v, n_kv, s, kv_head_begin, kv_head_end, out, scratch);
}

void attention_f16_reference(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                             const AttentionShape& s, int kv_head_begin, int kv_head_end, float* out, float* scratch) {
  attention_f16_with(ops_scalar(), q, k, v, n_kv, s, kv_head_begin, kv_head_end, out, scratch);
}

void f32_to_f16_row(const float* x, uint16_t* out, int64_t n) { ops_active().f32_to_f16_row(x, out, n); }

}  // namespace kvc::kernels
