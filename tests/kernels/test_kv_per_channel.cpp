// K per channel (q4c / int4c): the block layout, sealing a block from its F16 holding rows
// (each value within half its channel's step), and paged attention over sealed blocks plus a
// tail read from the holding area, SIMD against the scalar reference and the reference
// against double precision.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/kv_format.h"
#include "kernels/cpu/kv_ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_attention_impl.h"
#include "kernels/cpu/quant.h"
#include "kernels/kv_ops_tables.h"
#include "support/test_support.h"

using namespace kvc::kernels;

namespace {

// (n_rows, n) near-normal values; in every head two channels `scale` times larger with an
// offset of 2 `scale` (the large key channels of trained models).
std::vector<float> outlier_rows(int64_t n_rows, int64_t n, int head_dim, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n_rows * n));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = i % head_dim;
      const bool outlier = c == 3 || c == head_dim - 2;
      x[static_cast<size_t>(r * n + i)] = outlier ? scale * (2.0f + normal(rng)) : normal(rng);
    }
  }
  return x;
}

// n_pos positions of one layer stored as the CPU backend stores them: rows through the holding
// area, each block sealed when its last row is in. kd, vd: K and V as attention for position
// n_pos - 1 sees them (decoded from the blocks, the F16 rows for that position's own block).
struct Stored {
  KvBlockLayout layout;
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<const uint8_t*> table;
  std::vector<uint16_t> tail;  // (n_layer, 2, B, n): K rows, then V rows
  std::vector<float> kd, vd;   // (n_pos, n)
  int64_t tail_block = -1;
};

Stored store_rows(const KvBlockLayout& l, const std::vector<float>& k, const std::vector<float>& v, int64_t n_pos,
                  int layer) {
  Stored s;
  s.layout = l;
  const int64_t n = l.row_elems();
  const int64_t B = l.block_tokens;
  const int64_t n_blocks = (n_pos + B - 1) / B;
  s.blocks.assign(static_cast<size_t>(n_blocks), std::vector<uint8_t>(static_cast<size_t>(l.block_bytes), 0xa5));
  s.tail.assign(static_cast<size_t>(l.n_layer * l.tail_layer_elems()), 0);
  uint16_t* tail = s.tail.data() + layer * l.tail_layer_elems();
  std::vector<uint8_t*> w;
  for (auto& b : s.blocks) w.push_back(b.data());
  for (int64_t t = 0; t < n_pos; ++t) {
    kv_store_at(l, w.data(), layer, t, k.data() + t * n, v.data() + t * n, tail);
    if ((t + 1) % B == 0) kv_seal_block(l, w[static_cast<size_t>(t / B)], layer, tail);
  }
  for (auto* b : w) s.table.push_back(b);
  s.tail_block = (n_pos - 1) / B;  // the last query's own block, sealed or not, is read in F16
  s.kd.resize(static_cast<size_t>(n_pos * n));
  s.vd.resize(static_cast<size_t>(n_pos * n));
  std::vector<float> kr(static_cast<size_t>(n)), vr(static_cast<size_t>(n));
  for (int64_t t = 0; t < n_pos; ++t) {
    const KvSlot slot = kv_slot(l, t);
    const bool own = slot.block == s.tail_block;
    if (!own || slot.block < n_pos / B) {  // sealed: K decodes
      kv_load(l, s.table[static_cast<size_t>(slot.block)], layer, slot.row, kr.data(), vr.data());
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto e = static_cast<size_t>(t * n + i);
      s.kd[e] = own ? fp16_to_f32(tail[slot.row * n + i]) : kr[static_cast<size_t>(i)];
      s.vd[e] = own ? fp16_to_f32(tail[(B + slot.row) * n + i]) : vr[static_cast<size_t>(i)];
    }
  }
  return s;
}

}  // namespace

TEST_CASE("kv int4c: K rows of nibbles after two F16 rows per layer, V as int4h", "[kernels]") {
  CHECK(kv_k_per_channel(KvType::q4c));
  CHECK_FALSE(kv_k_per_channel(KvType::q4h));
  CHECK(kv_storage_type(KvType::q4c) == KvType::q4);
  CHECK(std::string(kv_type_name(KvType::q4c)) == "q4c");
  const auto l = make_kv_block_layout(2, 2, 64, 16, KvType::q4c, KvType::q4c);
  REQUIRE(l.has_value());
  const int64_t n = 2 * 64;
  CHECK(l->k_row_bytes == n / 2);
  CHECK(l->k_anchor_bytes == 4 * n);  // minima and scales
  CHECK(l->v_row_bytes == row_bytes(KvType::q4h, 32, n));
  CHECK(l->layer_bytes == 4 * n + 16 * (n / 2 + l->v_row_bytes));
  CHECK(l->k_head_offset(1) == 32);
  CHECK(l->k_row_offset(1, 2) == l->layer_bytes + 4 * n + 2 * (n / 2));
  CHECK(l->check_invariants());
}

TEST_CASE("kv int4c seals a block no worse than each channel's own min-max grid", "[kernels]") {
  for (int head_dim : {64, 80, 8}) {
    INFO("head_dim " << head_dim);
    const auto l = make_kv_block_layout(1, 2, head_dim, 16, KvType::q4c, KvType::q4c);
    REQUIRE(l.has_value());
    const int64_t n = l->row_elems();
    const std::vector<float> k = outlier_rows(16, n, head_dim, 20.0f, 3);
    const Stored s = store_rows(*l, k, k, 16, 0);
    std::vector<float> kd(k.size()), vd(k.size());  // the sealed block decoded
    for (int r = 0; r < 16; ++r) kv_load(*l, s.table[0], 0, r, kd.data() + r * n, vd.data() + r * n);
    for (int64_t c = 0; c < n; ++c) {
      float lo = INFINITY, hi = -INFINITY;
      for (int r = 0; r < 16; ++r) {
        const float x = fp16_to_f32(f32_to_fp16(k[static_cast<size_t>(r * n + c)]));
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      // The min-max grid (step (hi - lo) / 15) keeps each value within half a step plus the
      // F16 rounding of the minimum and the scale; the fitted grid's squared error is at most
      // that grid's.
      const double bound = static_cast<double>(hi - lo) / 30.0 +
                           1e-3 * static_cast<double>(std::max(std::fabs(lo), std::fabs(hi))) + 1e-6;
      double sse = 0.0;
      for (int r = 0; r < 16; ++r) {
        const auto i = static_cast<size_t>(r * n + c);
        const double e = static_cast<double>(kd[i]) - static_cast<double>(k[i]);
        sse += e * e;
      }
      CHECK(sse <= 16 * bound * bound);
    }
  }
}

TEST_CASE("paged attention over int4c K: SIMD matches the scalar reference, the reference double precision",
          "[kernels]") {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (KvType vt : {KvType::q4c, KvType::f16}) {
    for (int head_dim : {128, 64, 96, 8}) {
      for (int64_t n_kv : {1, 16, 17, 100}) {
        INFO("V " << kv_type_name(vt) << " head_dim " << head_dim << " n_kv " << n_kv);
        AttentionShape sh;
        sh.n_head = 8;
        sh.n_kv_head = 2;
        sh.head_dim = head_dim;
        sh.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        const int64_t n = sh.n_kv_head * head_dim;
        const auto l = make_kv_block_layout(2, sh.n_kv_head, head_dim, 16, KvType::q4c, vt);
        REQUIRE(l.has_value());
        const std::vector<float> k = outlier_rows(n_kv, n, head_dim, 4.0f, static_cast<uint32_t>(n_kv));
        const std::vector<float> v = outlier_rows(n_kv, n, head_dim, 2.0f, static_cast<uint32_t>(n_kv + 1));
        const Stored s = store_rows(*l, k, v, n_kv, 1);
        std::vector<float> q(static_cast<size_t>(sh.n_head * head_dim));
        for (float& e : q) e = unit(rng);
        std::vector<double> want(q.size(), 0.0);
        double max_v = 0.0;
        for (float e : s.vd) max_v = std::max(max_v, std::fabs(static_cast<double>(e)));
        for (int i = 0; i < sh.n_head; ++i) {
          const int h = i / (sh.n_head / sh.n_kv_head);
          std::vector<double> p(static_cast<size_t>(n_kv));
          double mx = -INFINITY, sum = 0.0;
          for (int64_t t = 0; t < n_kv; ++t) {
            double dot = 0.0;
            for (int d = 0; d < head_dim; ++d) {
              dot += static_cast<double>(q[static_cast<size_t>(i * head_dim + d)]) *
                     static_cast<double>(s.kd[static_cast<size_t>(t * n + h * head_dim + d)]);
            }
            p[static_cast<size_t>(t)] = dot * static_cast<double>(sh.scale);
            mx = std::max(mx, p[static_cast<size_t>(t)]);
          }
          for (double& x : p) sum += (x = std::exp(x - mx));
          for (int64_t t = 0; t < n_kv; ++t) {
            for (int d = 0; d < head_dim; ++d) {
              want[static_cast<size_t>(i * head_dim + d)] +=
                  p[static_cast<size_t>(t)] / sum *
                  static_cast<double>(s.vd[static_cast<size_t>(t * n + h * head_dim + d)]);
            }
          }
        }
        const int64_t B = l->block_tokens;
        const uint16_t* tail = s.tail.data() + 1 * l->tail_layer_elems();
        const PagedKvView view{
            s.table.data(), static_cast<int64_t>(s.table.size()), &s.layout, 1, 0, tail, tail + B * n, s.tail_block};
        std::vector<float> scratch(static_cast<size_t>(paged_attention_scratch_floats(sh, n_kv)));
        std::vector<float> ref(q.size());
        attention_paged_reference(q.data(), view, n_kv, sh, 0, sh.n_kv_head, ref.data(), scratch.data());
        double err_ref = 0.0;
        for (size_t e = 0; e < ref.size(); ++e)
          err_ref = std::max(err_ref, std::fabs(static_cast<double>(ref[e]) - want[e]));
        // Float rounding only; a wrong scale, minimum or nibble is off by whole values.
        CHECK(err_ref <= 2e-4 * max_v);
        for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
          INFO(isa_name(t->isa));
          std::vector<float> got(q.size());
          attention_paged_with(*t, q.data(), view, n_kv, sh, 0, sh.n_kv_head, got.data(), scratch.data());
          double err = 0.0;
          for (size_t e = 0; e < got.size(); ++e) err = std::max(err, static_cast<double>(std::fabs(got[e] - ref[e])));
          // Integer K scores (AVX-512 VNNI, groups of 32) round q * d to int8 per block.
          const bool int_k = l->group == 32 && t->score_block_q4c_int != nullptr;
          CHECK(err <= (int_k ? 2e-2 : 2e-4) * max_v);
        }
      }
    }
  }
}

TEST_CASE("int4c integer block scores: q * d rounded to int8 as quantize_q_heads rounds, exact integer dots",
          "[kernels]") {
  // The VNNI loop against a scalar model of the same arithmetic: q8 and the integer dot are
  // the model's exactly, so only the order of the float sum q . m may differ. One int8 level
  // wrong anywhere moves a score by scale * s_j, far beyond the bound. Every unit mix of the
  // loop (head sizes 32 to 256), padded query tiles (3, 5-7, 9 rows) and partial position
  // groups (n_pos not a multiple of 16 / tile rows); rows and positions past the ends stay
  // untouched.
  std::vector<const KvOpsTable*> tables;
  for (const KvOpsTable* t : kvc::kernels::test::all_kv_tables()) {
    if (t->score_block_q4c_int != nullptr) tables.push_back(t);
  }
  if (tables.empty()) KVC_SKIP("no integer int4c K loop on this CPU (AVX-512 VNNI)");
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int head_dim = 32; head_dim <= k_max_int_head_dim; head_dim += 32) {
    for (int n_q : {1, 2, 3, 4, 5, 7, 8, 9, 16}) {
      for (int64_t n_pos : {16, 13, 1}) {
        INFO("head_dim " << head_dim << " n_q " << n_q << " n_pos " << n_pos);
        const int64_t k_stride = head_dim + 16;  // bytes: half a row of two heads, and a little more
        std::vector<uint8_t> k(static_cast<size_t>(n_pos * k_stride));
        for (uint8_t& b : k) b = static_cast<uint8_t>(byte(rng));
        std::vector<uint16_t> d(static_cast<size_t>(head_dim)), m(d.size());
        for (int c = 0; c < head_dim; ++c) {
          // one channel 30x the others, as the outliers of trained models
          const float spread = c == 5 ? 30.0f : 1.0f;
          d[static_cast<size_t>(c)] = f32_to_fp16(spread * (0.01f + 0.2f * std::fabs(unit(rng))));
          m[static_cast<size_t>(c)] = f32_to_fp16(spread * 2.0f * unit(rng));
        }
        std::vector<float> q(static_cast<size_t>(n_q * head_dim));
        for (float& e : q) e = unit(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        const int64_t stride = n_pos + 3;
        for (const KvOpsTable* t : tables) {
          INFO(isa_name(t->isa));
          std::vector<float> got(static_cast<size_t>((n_q + 1) * stride), -1e30f);
          t->score_block_q4c_int(q.data(), n_q, head_dim, d.data(), m.data(), k.data(), k_stride, n_pos, scale,
                                 got.data(), stride);
          int n_off = 0;      // scores outside the bound
          int n_written = 0;  // entries past the rows or positions that changed
          for (int j = 0; j < n_q; ++j) {
            const float* qj = q.data() + j * head_dim;
            std::vector<float> x(static_cast<size_t>(head_dim));
            float amax = 0.0f;
            double qm = 0.0, qm_abs = 0.0;
            for (int c = 0; c < head_dim; ++c) {
              x[static_cast<size_t>(c)] = qj[c] * fp16_to_f32(d[static_cast<size_t>(c)]);
              amax = std::max(amax, std::fabs(x[static_cast<size_t>(c)]));
              const double p = static_cast<double>(qj[c]) * static_cast<double>(fp16_to_f32(m[static_cast<size_t>(c)]));
              qm += p;
              qm_abs += std::fabs(p);
            }
            const float s = amax / 127.0f;
            const float id = s != 0.0f ? 1.0f / s : 0.0f;
            std::vector<int> q8(static_cast<size_t>(head_dim));
            for (int c = 0; c < head_dim; ++c) {
              const float v = std::min(std::max(x[static_cast<size_t>(c)] * id, -127.0f), 127.0f);
              q8[static_cast<size_t>(c)] = static_cast<int>(std::nearbyint(v));  // nearest even
            }
            const float rs = scale * s;
            for (int64_t p = 0; p < n_pos; ++p) {
              const uint8_t* row = k.data() + p * k_stride;
              int64_t dot = 0;
              for (int c = 0; c < head_dim; ++c) {
                const uint8_t b = row[(c / 32) * 16 + c % 16];
                dot += q8[static_cast<size_t>(c)] * (c % 32 < 16 ? b & 0x0f : b >> 4);
              }
              const double sd = static_cast<double>(static_cast<float>(dot) * rs);
              const double want = sd + static_cast<double>(scale) * qm;
              const double bound =
                  1e-6 * (std::fabs(sd) + std::fabs(want)) + 1e-5 * static_cast<double>(scale) * qm_abs + 1e-7;
              if (!(std::fabs(static_cast<double>(got[static_cast<size_t>(j * stride + p)]) - want) <= bound)) ++n_off;
            }
            for (int64_t p = n_pos; p < stride; ++p) n_written += got[static_cast<size_t>(j * stride + p)] != -1e30f;
          }
          for (int64_t p = 0; p < stride; ++p) n_written += got[static_cast<size_t>(n_q * stride + p)] != -1e30f;
          CHECK(n_off == 0);
          CHECK(n_written == 0);
        }
      }
    }
  }
}
