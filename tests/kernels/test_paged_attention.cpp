// Paged attention over F16 / INT8 / INT4 blocks: F16 blocks against the contiguous
// attention_f16 (bit for bit), every ISA against the scalar reference, the reference against
// double precision on the dequantized values, quantized KV against F16 within the error the
// quantization allows, and sliding windows that must not read blocks outside them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/kv_format.h"
#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_attention_impl.h"
#include "kernels/cpu/quant.h"
#include "kernels/kv_ops_tables.h"

using namespace kvc::kernels;

namespace {

std::vector<float> random_floats(int64_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// One sequence's KV in blocks; layer `layer` holds the case's data, the other layer noise.
struct PagedCase {
  AttentionShape shape;
  int64_t n_kv = 0;
  KvBlockLayout layout;
  int layer = 1;
  std::vector<float> q;                      // (n_head, head_dim)
  std::vector<float> k;                      // (n_kv, n_kv_head * head_dim), as given
  std::vector<float> v;                      // (n_kv, n_kv_head * head_dim)
  std::vector<float> kd;                     // (n_kv, n_kv_head * head_dim), decoded from the blocks
  std::vector<float> vd;                     // (n_kv, n_kv_head * head_dim)
  std::vector<std::vector<uint8_t>> blocks;  // (n_blocks, block_bytes)
  std::vector<const uint8_t*> table;         // (n_blocks)

  int64_t row_elems() const { return static_cast<int64_t>(shape.n_kv_head) * shape.head_dim; }
  PagedKvView view(int64_t window = 0) const {
    return {table.data(), static_cast<int64_t>(table.size()), &layout, layer, window};
  }
};

PagedCase make_case(int n_head, int n_kv_head, int head_dim, int64_t n_kv, int block_tokens, KvType k_type,
                    KvType v_type, float q_range, uint32_t seed) {
  PagedCase c;
  c.shape.n_head = n_head;
  c.shape.n_kv_head = n_kv_head;
  c.shape.head_dim = head_dim;
  c.shape.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  c.n_kv = n_kv;
  const auto layout = make_kv_block_layout(2, n_kv_head, head_dim, block_tokens, k_type, v_type);
  REQUIRE(layout.has_value());
  c.layout = *layout;
  std::mt19937 rng(seed);
  const int64_t n = c.row_elems();
  c.q = random_floats(static_cast<int64_t>(n_head) * head_dim, -q_range, q_range, rng);
  c.k = random_floats(n_kv * n, -1.0f, 1.0f, rng);
  c.v = random_floats(n_kv * n, -1.0f, 1.0f, rng);
  const int64_t n_blocks = (n_kv + block_tokens - 1) / block_tokens;
  // 0xff bytes are NaN in F16 and as a scale: any read of an unwritten row shows in the output.
  c.blocks.assign(static_cast<size_t>(n_blocks), std::vector<uint8_t>(static_cast<size_t>(c.layout.block_bytes), 0xff));
  std::vector<uint8_t*> writable;
  for (auto& b : c.blocks) writable.push_back(b.data());
  const auto noise = random_floats(n, -5.0f, 5.0f, rng);
  for (int64_t t = 0; t < n_kv; ++t) {
    kv_store_at(c.layout, writable.data(), c.layer, t, c.k.data() + t * n, c.v.data() + t * n);
    kv_store_at(c.layout, writable.data(), 0, t, noise.data(), noise.data());
  }
  for (auto* b : writable) c.table.push_back(b);
  c.kd.resize(c.k.size());
  c.vd.resize(c.v.size());
  for (int64_t t = 0; t < n_kv; ++t) {
    const KvSlot s = kv_slot(c.layout, t);
    const uint8_t* block = c.table[static_cast<size_t>(s.block)];
    decode_row_reference(k_type, c.layout.group, block + c.layout.k_row_offset(c.layer, s.row), n, c.kd.data() + t * n);
    decode_row_reference(v_type, c.layout.group, block + c.layout.v_row_offset(c.layer, s.row), n, c.vd.data() + t * n);
  }
  return c;
}

std::vector<float> run_paged(const KvOpsTable& t, const PagedCase& c, int64_t window = 0, int head_begin = 0,
                             int head_end = -1) {
  const AttentionShape& s = c.shape;
  if (head_end < 0) head_end = s.n_kv_head;
  const int64_t n_att = c.n_kv - paged_window_begin(c.view(window), c.n_kv);
  std::vector<float> out(static_cast<size_t>(s.n_head * s.head_dim), 0.0f);
  std::vector<float> scratch(static_cast<size_t>(paged_attention_scratch_floats(s, n_att)));
  attention_paged_with(t, c.q.data(), c.view(window), c.n_kv, s, head_begin, head_end, out.data(), scratch.data());
  return out;
}

// softmax(q.k * scale) . v per query head in double over positions [begin, n_kv) of rows
// k, v: (n_kv, n_kv_head * head_dim). weights, when given, receives (n_head, n_kv - begin).
std::vector<double> attention_double(const PagedCase& c, const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, int64_t begin,
                                     std::vector<double>* weights = nullptr) {
  const AttentionShape& s = c.shape;
  const int64_t n = c.row_elems();
  const int64_t n_att = c.n_kv - begin;
  std::vector<double> out(static_cast<size_t>(s.n_head * s.head_dim), 0.0);
  if (weights) weights->assign(static_cast<size_t>(s.n_head * n_att), 0.0);
  for (int i = 0; i < s.n_head; ++i) {
    const int h = i / (s.n_head / s.n_kv_head);
    std::vector<double> p(static_cast<size_t>(n_att));
    for (int64_t t = 0; t < n_att; ++t) {
      double dot = 0.0;
      for (int d = 0; d < s.head_dim; ++d) {
        dot += static_cast<double>(q[static_cast<size_t>(i * s.head_dim + d)]) *
               static_cast<double>(k[static_cast<size_t>((begin + t) * n + h * s.head_dim + d)]);
      }
      p[static_cast<size_t>(t)] = dot * static_cast<double>(s.scale);
      if (s.softcap > 0) {  // Gemma 2's soft-capped scores
        const double cap = s.softcap;
        p[static_cast<size_t>(t)] = cap * std::tanh(p[static_cast<size_t>(t)] / cap);
      }
    }
    double max = -INFINITY;
    for (double x : p) max = std::max(max, x);
    double sum = 0.0;
    for (double& x : p) sum += (x = std::exp(x - max));
    for (int64_t t = 0; t < n_att; ++t) {
      const double w = p[static_cast<size_t>(t)] / sum;
      if (weights) (*weights)[static_cast<size_t>(i * n_att + t)] = w;
      for (int d = 0; d < s.head_dim; ++d) {
        out[static_cast<size_t>(i * s.head_dim + d)] +=
            w * static_cast<double>(v[static_cast<size_t>((begin + t) * n + h * s.head_dim + d)]);
      }
    }
  }
  return out;
}

// Error of a float attention against exact arithmetic on the same (dequantized) values:
// a dot of head_dim terms errs by <= (head_dim + 2) 2^-24 sum|q k| (one FMA or product and
// one add per term, and the scale), so each score by ds <= that times scale; the weights
// then err relatively by <= e^(2 ds) - 1 plus the softmax's own rounding (exp within 2 ulp,
// a float sum of n_att terms, one division: (n_att + 8) 2^-24), and the weighted sum of
// n_att values adds n_att 2^-24 max|v|.
double float_attention_bound(const PagedCase& c, int64_t begin, const std::vector<float>* q_used = nullptr) {
  const std::vector<float>& q = q_used ? *q_used : c.q;
  const AttentionShape& s = c.shape;
  const int64_t n = c.row_elems();
  double max_qk = 0.0;
  double max_v = 0.0;
  for (int i = 0; i < s.n_head; ++i) {
    const int h = i / (s.n_head / s.n_kv_head);
    for (int64_t t = begin; t < c.n_kv; ++t) {
      double sum = 0.0;
      for (int d = 0; d < s.head_dim; ++d) {
        sum += std::fabs(static_cast<double>(q[static_cast<size_t>(i * s.head_dim + d)]) *
                         static_cast<double>(c.kd[static_cast<size_t>(t * n + h * s.head_dim + d)]));
      }
      max_qk = std::max(max_qk, sum);
    }
  }
  for (int64_t t = begin; t < c.n_kv; ++t) {
    for (int64_t e = 0; e < n; ++e)
      max_v = std::max(max_v, std::fabs(static_cast<double>(c.vd[static_cast<size_t>(t * n + e)])));
  }
  const double u = std::ldexp(1.0, -24);
  const double n_att = static_cast<double>(c.n_kv - begin);
  const double ds = (s.head_dim + 2) * u * max_qk * static_cast<double>(s.scale);
  return max_v * (std::expm1(2.0 * ds) + (2.0 * n_att + 8.0) * u);
}

// True when table t scores this case's K with integer dot products (groups of 32 only).
bool integer_k(const KvOpsTable& t, const PagedCase& c) {
  return c.layout.group == k_kv_group_max && ((c.layout.k_type == KvType::q8 && t.score_range_q8_int != nullptr) ||
                                              (c.layout.k_type == KvType::q4 && t.score_range_q4_int != nullptr));
}

// q as the integer K path uses it: d * q8 per head (detail::quantize_q_heads).
std::vector<float> quantized_q(const PagedCase& c) {
  const AttentionShape& s = c.shape;
  std::vector<int8_t> q8(c.q.size());
  std::vector<float> scale(static_cast<size_t>(s.n_head));
  std::vector<int32_t> sums(c.q.size() / 4);
  detail::quantize_q_heads(c.q.data(), s.n_head, s.head_dim, q8.data(), scale.data(), sums.data());
  std::vector<float> out(c.q.size());
  for (size_t e = 0; e < out.size(); ++e)
    out[e] = scale[e / static_cast<size_t>(s.head_dim)] * static_cast<float>(q8[e]);
  return out;
}

// How far the integer K path may be from the float one: |q - q'| <= d_q / 2 per element moves
// each score by at most scale * d_q / 2 * sum |k|, and the output by (e^(2 eps) - 1) max |v|.
double integer_q_bound(const PagedCase& c) {
  const AttentionShape& s = c.shape;
  const int64_t n = c.row_elems();
  double eps = 0.0;
  double max_v = 0.0;
  for (int i = 0; i < s.n_head; ++i) {
    const int h = i / (s.n_head / s.n_kv_head);
    double amax = 0.0;
    for (int d = 0; d < s.head_dim; ++d)
      amax = std::max(amax, std::fabs(static_cast<double>(c.q[static_cast<size_t>(i * s.head_dim + d)])));
    for (int64_t t = 0; t < c.n_kv; ++t) {
      double sum = 0.0;
      for (int d = 0; d < s.head_dim; ++d)
        sum += std::fabs(static_cast<double>(c.kd[static_cast<size_t>(t * n + h * s.head_dim + d)]));
      eps = std::max(eps, static_cast<double>(s.scale) * amax / 127.0 / 2.0 * sum * (1.0 + 1e-6));
    }
  }
  for (float x : c.vd) max_v = std::max(max_v, std::fabs(static_cast<double>(x)));
  return std::expm1(2.0 * eps) * max_v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return max_abs_diff(a, std::vector<double>(b.begin(), b.end()));
}

struct Heads {
  int n_head;
  int n_kv_head;
};
constexpr Heads k_heads[] = {{8, 2}, {4, 1}};  // GQA 8/2, MQA 4/1
constexpr KvType k_types[] = {KvType::f16, KvType::q8, KvType::q4};

}  // namespace

TEST_CASE("paged F16 attention equals attention_f16 on the same data laid out contiguously", "[kernels]") {
  // Exact: every position's score is the same arithmetic as in attention_f16, softmax runs on
  // the same score array, and each accumulator sums positions in the same order (a block
  // boundary only spills the float accumulators to memory and reloads them).
  for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
    INFO(isa_name(t->isa));
    const OpsTable& ops = ops_for(t->isa);
    for (int block_tokens : {16, 32}) {
      for (int64_t n_kv : {1, 15, 16, 17, 100}) {
        for (const Heads& hd : k_heads) {
          for (int head_dim : {64, 80}) {
            INFO("B " << block_tokens << " n_kv " << n_kv << " heads " << hd.n_head << "/" << hd.n_kv_head
                      << " head_dim " << head_dim);
            const PagedCase c = make_case(hd.n_head, hd.n_kv_head, head_dim, n_kv, block_tokens, KvType::f16,
                                          KvType::f16, 2.0f, static_cast<uint32_t>(n_kv * 7 + block_tokens));
            AttentionShape s = c.shape;
            s.kv_stride = c.row_elems();
            std::vector<uint16_t> k(c.k.size());
            std::vector<uint16_t> v(c.v.size());
            for (size_t i = 0; i < k.size(); ++i) {
              k[i] = f32_to_fp16(c.k[i]);
              v[i] = f32_to_fp16(c.v[i]);
            }
            std::vector<float> want(static_cast<size_t>(s.n_head * s.head_dim), 0.0f);
            std::vector<float> scratch(static_cast<size_t>(s.n_head / s.n_kv_head * n_kv));
            attention_f16_with(ops, c.q.data(), k.data(), v.data(), n_kv, s, 0, s.n_kv_head, want.data(),
                               scratch.data());
            const std::vector<float> got = run_paged(*t, c);
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("paged attention: SIMD matches the scalar reference, the reference matches double precision", "[kernels]") {
  for (KvType kt : k_types) {
    for (KvType vt : k_types) {
      for (int block_tokens : {16, 32}) {
        for (int64_t n_kv : {1, 17, 100}) {
          for (const Heads& hd : k_heads) {
            for (int head_dim : {64, 96}) {
              INFO("K " << kv_type_name(kt) << " V " << kv_type_name(vt) << " B " << block_tokens << " n_kv " << n_kv
                        << " heads " << hd.n_head << "/" << hd.n_kv_head << " head_dim " << head_dim);
              const PagedCase c = make_case(hd.n_head, hd.n_kv_head, head_dim, n_kv, block_tokens, kt, vt, 2.0f,
                                            static_cast<uint32_t>(n_kv + head_dim));
              const double bound = float_attention_bound(c, 0);
              const std::vector<float> ref = run_paged(kv_ops_scalar(), c);
              const double err_ref = max_abs_diff(ref, attention_double(c, c.q, c.kd, c.vd, 0));
              INFO("reference vs double " << err_ref << " bound " << bound);
              CHECK(err_ref <= bound);
              for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
                INFO(isa_name(t->isa));
                const std::vector<float> got = run_paged(*t, c);
                if (integer_k(*t, c)) {
                  // Exact integer dots on the quantized q: as close to double attention with
                  // that q as the float path is with the float q; and near the reference.
                  const std::vector<float> qq = quantized_q(c);
                  const double err_q = max_abs_diff(got, attention_double(c, qq, c.kd, c.vd, 0));
                  const double bound_q = float_attention_bound(c, 0, &qq);
                  INFO("integer K vs double with quantized q " << err_q << " bound " << bound_q);
                  CHECK(err_q <= bound_q);
                  const double err = max_abs_diff(got, ref);
                  const double bound_int = 2.0 * bound + integer_q_bound(c);
                  INFO("integer K vs reference " << err << " bound " << bound_int);
                  CHECK(err <= bound_int);
                } else {
                  const double err = max_abs_diff(got, ref);
                  INFO("vs reference " << err << " bound " << 2 * bound);
                  CHECK(err <= 2.0 * bound);
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("quantized KV attention stays within its quantization error of F16 attention", "[kernels]") {
  // With scores perturbed by at most eps (computed from the actual dequantized K) the softmax
  // weights change by a factor in [e^-2eps, e^2eps], so per output element
  //   |o_q - o_f16| <= max_t |dv_t| + (e^(2 eps) - 1) sum_t p_t |v_t|   (p: the F16 weights)
  // plus the float error of the quantized run (float_attention_bound).
  // Head sizes 64 (groups of 32), 80 and 48 (16), 8 (8, as stories260K).
  const int64_t n_kv = 100;
  for (int head_dim : {64, 80, 48, 8}) {
    for (KvType kt : k_types) {
      for (KvType vt : k_types) {
        if (kt == KvType::f16 && vt == KvType::f16) continue;
        for (const Heads& hd : k_heads) {
          INFO("K " << kv_type_name(kt) << " V " << kv_type_name(vt) << " heads " << hd.n_head << "/" << hd.n_kv_head
                    << " head_dim " << head_dim);
          const PagedCase c = make_case(hd.n_head, hd.n_kv_head, head_dim, n_kv, 16, kt, vt, 2.0f, 5);
          const PagedCase f = make_case(hd.n_head, hd.n_kv_head, head_dim, n_kv, 16, KvType::f16, KvType::f16, 2.0f, 5);
          REQUIRE(c.k == f.k);
          std::vector<double> p;
          const std::vector<double> want = attention_double(f, f.q, f.kd, f.vd, 0, &p);
          const std::vector<float> got = run_paged(kv_ops_active(), c);
          const AttentionShape& s = c.shape;
          const int64_t n = c.row_elems();
          const double slack = float_attention_bound(c, 0);
          double worst = 0.0;
          double worst_ratio = 0.0;
          for (int i = 0; i < s.n_head; ++i) {
            const int h = i / (s.n_head / s.n_kv_head);
            double eps = 0.0;
            for (int64_t t = 0; t < n_kv; ++t) {
              double ds = 0.0;
              for (int d = 0; d < head_dim; ++d) {
                const size_t e = static_cast<size_t>(t * n + h * head_dim + d);
                ds += static_cast<double>(c.q[static_cast<size_t>(i * head_dim + d)]) *
                      (static_cast<double>(c.kd[e]) - static_cast<double>(f.kd[e]));
              }
              eps = std::max(eps, std::fabs(ds) * static_cast<double>(s.scale));
            }
            for (int d = 0; d < head_dim; ++d) {
              double max_dv = 0.0;
              double mean_abs_v = 0.0;
              for (int64_t t = 0; t < n_kv; ++t) {
                const size_t e = static_cast<size_t>(t * n + h * head_dim + d);
                max_dv = std::max(max_dv, std::fabs(static_cast<double>(c.vd[e]) - static_cast<double>(f.vd[e])));
                mean_abs_v += p[static_cast<size_t>(i * n_kv + t)] * std::fabs(static_cast<double>(f.vd[e]));
              }
              const double bound = max_dv + std::expm1(2.0 * eps) * mean_abs_v + slack;
              const size_t o = static_cast<size_t>(i * head_dim + d);
              const double err = std::fabs(static_cast<double>(got[o]) - want[o]);
              worst = std::max(worst, err);
              worst_ratio = std::max(worst_ratio, err / bound);
              if (!(err <= bound)) {
                INFO("head " << i << " dim " << d << " err " << err << " bound " << bound);
                REQUIRE(err <= bound);
              }
            }
          }
          INFO("max |o_q - o_f16| " << worst << ", at most " << worst_ratio << " of its bound");
          CHECK(worst > 0.0);  // quantized KV does differ from F16
        }
      }
    }
  }
}

TEST_CASE("paged attention with groups of 16 and 8 matches double precision on every ISA", "[kernels]") {
  // Head sizes that are not a multiple of 32 (the small-group loops: scalar, AVX2): each ISA's
  // result against exact arithmetic on the dequantized values (the same bound as for groups of
  // 32), and against the scalar reference.
  struct Dim {
    int head_dim;
    int group;
  };
  // Query heads per kv head: 4, 2 (stories260K), 3, and 5 (a tile of 4 and one of 1).
  constexpr Heads k_small_heads[] = {{8, 2}, {8, 4}, {6, 2}, {5, 1}};
  for (const Dim dim : {Dim{8, 8}, Dim{16, 16}, Dim{48, 16}, Dim{80, 16}, Dim{40, 8}}) {
    for (KvType kt : k_types) {
      for (KvType vt : k_types) {
        for (int64_t n_kv : {1, 17, 100}) {
          for (const Heads& hd : k_small_heads) {
            INFO("K " << kv_type_name(kt) << " V " << kv_type_name(vt) << " n_kv " << n_kv << " heads " << hd.n_head
                      << "/" << hd.n_kv_head << " head_dim " << dim.head_dim);
            const PagedCase c = make_case(hd.n_head, hd.n_kv_head, dim.head_dim, n_kv, 16, kt, vt, 2.0f,
                                          static_cast<uint32_t>(n_kv * 3 + dim.head_dim));
            REQUIRE(c.layout.group == dim.group);
            const double bound = float_attention_bound(c, 0);
            const std::vector<double> want = attention_double(c, c.q, c.kd, c.vd, 0);
            const std::vector<float> ref = run_paged(kv_ops_scalar(), c);
            for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
              INFO(isa_name(t->isa));
              const std::vector<float> got = run_paged(*t, c);
              for (float x : got) REQUIRE(std::isfinite(x));
              const double err = max_abs_diff(got, want);
              INFO("vs double " << err << " bound " << bound);
              CHECK(err <= bound);
              CHECK(max_abs_diff(got, ref) <= 2.0 * bound);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("sliding-window paged attention attends only to the window and never reads outside it", "[kernels]") {
  const int64_t n_kv = 100;
  const int block_tokens = 16;
  for (KvType type : k_types) {
    for (int64_t window : {1, 5, 16, 20, 37, 100, 150}) {
      INFO(kv_type_name(type) << " window " << window);
      PagedCase c = make_case(8, 2, 64, n_kv, block_tokens, type, type, 2.0f, static_cast<uint32_t>(window));
      const int64_t begin = n_kv - std::min(window, n_kv);
      REQUIRE(paged_window_begin(c.view(window), n_kv) == begin);
      // Blocks wholly before the window become null; rows before it in its first block are
      // overwritten with NaN bytes (every layer), so reading any of them shows in the output.
      for (int64_t b = 0; b < begin / block_tokens; ++b) c.table[static_cast<size_t>(b)] = nullptr;
      uint8_t* first = c.blocks[static_cast<size_t>(begin / block_tokens)].data();
      for (int row = 0; row < begin % block_tokens; ++row) {
        for (int layer = 0; layer < c.layout.n_layer; ++layer) {
          std::memset(first + c.layout.k_row_offset(layer, row), 0xff, static_cast<size_t>(c.layout.k_row_bytes));
          std::memset(first + c.layout.v_row_offset(layer, row), 0xff, static_cast<size_t>(c.layout.v_row_bytes));
        }
      }
      const double bound = float_attention_bound(c, begin);
      const std::vector<double> want = attention_double(c, c.q, c.kd, c.vd, begin);
      for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
        INFO(isa_name(t->isa));
        const std::vector<float> got = run_paged(*t, c, window);
        for (float x : got) REQUIRE(std::isfinite(x));
        if (integer_k(*t, c)) {
          const std::vector<float> qq = quantized_q(c);
          CHECK(max_abs_diff(got, attention_double(c, qq, c.kd, c.vd, begin)) <= float_attention_bound(c, begin, &qq));
        } else {
          CHECK(max_abs_diff(got, want) <= bound);
        }
        if (type == KvType::f16) {
          // Exactly attention_f16 over the window's positions alone.
          AttentionShape s = c.shape;
          s.kv_stride = c.row_elems();
          std::vector<uint16_t> k(c.k.size());
          std::vector<uint16_t> v(c.v.size());
          for (size_t i = 0; i < k.size(); ++i) {
            k[i] = f32_to_fp16(c.k[i]);
            v[i] = f32_to_fp16(c.v[i]);
          }
          std::vector<float> exact(got.size(), 0.0f);
          std::vector<float> scratch(static_cast<size_t>(4 * (n_kv - begin)));
          attention_f16_with(ops_for(t->isa), c.q.data(), k.data() + begin * s.kv_stride,
                             v.data() + begin * s.kv_stride, n_kv - begin, s, 0, 2, exact.data(), scratch.data());
          CHECK(std::memcmp(got.data(), exact.data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("paged attention with soft-capped scores matches double precision on every ISA", "[kernels]") {
  // Scores up to about 4 x 64 / 8 = 32 against a cap of 5: the cap bends most of them, so
  // attention without it lands far away. tanh's derivative is at most 1, so the float score
  // errors do not grow through the cap; tanh adds a few ulp of the cap.
  for (KvType kt : {KvType::f16, KvType::q8}) {
    PagedCase c = make_case(8, 2, 64, 100, 16, kt, KvType::f16, 4.0f, 7);
    c.shape.softcap = 5.0f;
    const std::vector<double> want = attention_double(c, c.q, c.kd, c.vd, 0);
    const double bound = 2.0 * float_attention_bound(c, 0) + 1e-5;
    for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
      INFO(isa_name(t->isa) << " K " << kv_type_name(kt));
      const std::vector<float> got = run_paged(*t, c);
      if (integer_k(*t, c)) {
        CHECK(max_abs_diff(got, want) <= bound + integer_q_bound(c));
      } else {
        CHECK(max_abs_diff(got, want) <= bound);
      }
    }
    PagedCase uncapped = c;
    uncapped.shape.softcap = 0.0f;
    CHECK(max_abs_diff(run_paged(kv_ops_scalar(), c), attention_double(uncapped, c.q, c.kd, c.vd, 0)) > 1e-2);
  }
}

TEST_CASE("paged attention over a split of kv heads equals attention over all of them", "[kernels]") {
  const PagedCase c = make_case(8, 4, 64, 37, 16, KvType::q4, KvType::q8, 2.0f, 3);
  for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
    INFO(isa_name(t->isa));
    const std::vector<float> whole = run_paged(*t, c);
    const std::vector<float> first = run_paged(*t, c, 0, 0, 1);
    const std::vector<float> rest = run_paged(*t, c, 0, 1, 4);
    std::vector<float> joined(whole.size());
    for (size_t i = 0; i < joined.size(); ++i) joined[i] = i < 2 * 64 ? first[i] : rest[i];
    CHECK(joined == whole);
    CHECK(std::all_of(first.begin() + 2 * 64, first.end(), [](float x) { return x == 0.0f; }));
  }
}

TEST_CASE("paged attention with no attended position writes zeros", "[kernels]") {
  PagedCase c = make_case(4, 1, 64, 1, 16, KvType::q8, KvType::q8, 1.0f, 9);
  c.n_kv = 0;
  std::vector<float> out(4 * 64, 1.0f);
  attention_paged(c.q.data(), c.view(), 0, c.shape, 0, 1, out.data(), nullptr);
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; }));
}

TEST_CASE("query heads quantize to int8 within half a step, with per-lane sums", "[kernels]") {
  std::mt19937 rng(4);
  const std::vector<float> q = random_floats(3 * 64, -3.0f, 3.0f, rng);
  std::vector<int8_t> q8(q.size());
  float scale[3];
  std::vector<int32_t> sums(q.size() / 4);
  detail::quantize_q_heads(q.data(), 3, 64, q8.data(), scale, sums.data());
  for (int j = 0; j < 3; ++j) {
    double amax = 0.0;
    for (int d = 0; d < 64; ++d)
      amax = std::max(amax, std::fabs(static_cast<double>(q[static_cast<size_t>(j * 64 + d)])));
    CHECK(static_cast<double>(scale[j]) == Approx(amax / 127.0));
    for (int d = 0; d < 64; ++d) {
      const size_t e = static_cast<size_t>(j * 64 + d);
      CHECK(std::fabs(static_cast<double>(q[e]) - static_cast<double>(scale[j]) * q8[e]) <=
            static_cast<double>(scale[j]) * 0.5 * (1 + 1e-5));
    }
    for (int l = 0; l < 16; ++l) {
      const size_t b = static_cast<size_t>(j * 64 + 4 * l);
      CHECK(sums[static_cast<size_t>(j * 16 + l)] == q8[b] + q8[b + 1] + q8[b + 2] + q8[b + 3]);
    }
  }
}

TEST_CASE("attention sinks (gpt-oss): each query head's sink joins its softmax's denominator only", "[kernels]") {
  // Sinks from strongly negative (no effect) to above every score (most weight on nothing),
  // against exp(s_t) / (sum_u exp(s_u) + exp(sink)) in double, whole and windowed, every table.
  PagedCase c = make_case(8, 2, 64, 150, 16, KvType::f16, KvType::f16, 2.0f, 71);
  const std::vector<float> sinks = {-30.0f, -1.0f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f, 6.0f};
  for (int64_t window : {int64_t{0}, int64_t{40}}) {
    const int64_t begin = paged_window_begin(c.view(window), c.n_kv);
    std::vector<double> plain_w;
    const std::vector<double> plain = attention_double(c, c.q, c.kd, c.vd, begin, &plain_w);
    // The sink scales head i's weights by S / (S + exp(sink)), S = sum exp(s_u).
    std::vector<double> want(plain.size());
    for (int i = 0; i < c.shape.n_head; ++i) {
      const int h = i / (c.shape.n_head / c.shape.n_kv_head);
      std::vector<double> s(static_cast<size_t>(c.n_kv - begin));
      double max = -INFINITY;
      for (int64_t t = begin; t < c.n_kv; ++t) {
        double dot = 0;
        for (int d = 0; d < c.shape.head_dim; ++d)
          dot += static_cast<double>(c.q[static_cast<size_t>(i * c.shape.head_dim + d)]) *
                 static_cast<double>(c.kd[static_cast<size_t>(t * c.row_elems() + h * c.shape.head_dim + d)]);
        s[static_cast<size_t>(t - begin)] = dot * static_cast<double>(c.shape.scale);
        max = std::max(max, s[static_cast<size_t>(t - begin)]);
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - max);
      const double f = sum / (sum + std::exp(static_cast<double>(sinks[static_cast<size_t>(i)]) - max));
      for (int d = 0; d < c.shape.head_dim; ++d)
        want[static_cast<size_t>(i * c.shape.head_dim + d)] = plain[static_cast<size_t>(i * c.shape.head_dim + d)] * f;
    }
    c.shape.sinks = sinks.data();
    for (const KvOpsTable* t : test::all_kv_tables()) {
      INFO("window " << window << " table " << isa_name(t->isa));
      const std::vector<float> got = run_paged(*t, c, window);
      for (size_t e = 0; e < got.size(); ++e) {
        INFO("element " << e << " got " << got[e] << " want " << want[e]);
        REQUIRE(std::fabs(static_cast<double>(got[e]) - want[e]) <= 1e-5 + 1e-4 * std::fabs(want[e]));
      }
      // The larger sinks take a visible share: without them the output differs.
      c.shape.sinks = nullptr;
      const std::vector<float> none = run_paged(*t, c, window);
      c.shape.sinks = sinks.data();
      const size_t last_head = static_cast<size_t>(7 * c.shape.head_dim);
      double moved = 0;
      for (size_t e = last_head; e < got.size(); ++e)
        moved = std::max(moved, std::fabs(double{got[e]} - double{none[e]}));
      CHECK(moved > 1e-3);
    }
    c.shape.sinks = nullptr;
  }
}
