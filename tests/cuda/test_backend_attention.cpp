// kv_store and paged attention on every available backend: the stored block bytes equal the
// CPU reference encoding, and attention over F16 / INT8 / INT4 blocks (GQA, MQA, a window,
// a prefill chunk and a decode row in one batch) matches attention_paged_reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/backend/backend.h"
#include "cuda/each_backend.h"
#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/paged_attention.h"
#include "support/test_support.h"

using namespace kvc;
using kernels::KvType;
using test::DeviceBuffer;

namespace {

using test::random_floats;

// One sequence: its blocks in backend memory and a host mirror written by the CPU reference.
struct Seq {
  std::vector<uint8_t*> dev;               // (n_blocks) backend blocks
  std::vector<std::vector<uint8_t>> host;  // (n_blocks, block_bytes) reference blocks
  std::vector<uint8_t*> host_ptrs;
};

}  // namespace

KVC_BACKEND_TEST_CASE("backend ops: kv_store bytes and paged attention over F16/INT8/INT4 blocks", "[cuda][backend]") {
  struct Shape {
    int n_head, n_kv_head;
  };
  struct Types {
    KvType k, v;
  };
  // Head sizes 64, 48 and 8 store quantized rows in groups of 32, 16 and 8.
  for (int head_dim : {64, 48, 8}) {
    for (Shape sh : {Shape{4, 2}, Shape{4, 1}}) {
      for (Types ty : {Types{KvType::f16, KvType::f16}, Types{KvType::q8, KvType::q8}, Types{KvType::q4, KvType::q4},
                       Types{KvType::q8, KvType::q4}}) {
        const int B = 16, layer = 1;
        const auto layout = kernels::make_kv_block_layout(2, sh.n_kv_head, head_dim, B, ty.k, ty.v);
        REQUIRE(layout.has_value());
        REQUIRE(layout->group == kernels::kv_group_for_head_dim(head_dim));
        const int64_t kv_width = int64_t{sh.n_kv_head} * head_dim, q_width = int64_t{sh.n_head} * head_dim;
        // Sequence A: 40 cached positions, then a prefill chunk of 5; B: 18 cached, one decode.
        const int64_t hist[2] = {40, 18}, n_new[2] = {5, 1};
        Seq seqs[2];
        for (int i = 0; i < 2; ++i) {
          const int64_t n_blocks = (hist[i] + n_new[i] + B - 1) / B;
          for (int64_t b = 0; b < n_blocks; ++b) {
            seqs[i].dev.push_back(static_cast<uint8_t*>(be.alloc(static_cast<size_t>(layout->block_bytes))));
            REQUIRE(seqs[i].dev.back() != nullptr);
            seqs[i].host.emplace_back(static_cast<size_t>(layout->block_bytes), 0);
            seqs[i].host_ptrs.push_back(seqs[i].host.back().data());
          }
        }
        auto store = [&](const int64_t pos0[2], const int64_t n[2], uint32_t seed) {
          const int64_t n_rows = n[0] + n[1];
          const auto k = random_floats(static_cast<size_t>(n_rows * kv_width), seed);
          const auto v = random_floats(static_cast<size_t>(n_rows * kv_width), seed + 1);
          const backend::SeqSlice slices[2] = {{seqs[0].dev, pos0[0], n[0], 0}, {seqs[1].dev, pos0[1], n[1], n[0]}};
          DeviceBuffer<float> dk(be, k), dv(be, v);
          be.kv_store(*layout, layer, slices, dk.get(), dv.get());
          for (int i = 0; i < 2; ++i) {
            for (int64_t t = 0; t < n[i]; ++t) {
              const int64_t row = (i == 0 ? 0 : n[0]) + t;
              kernels::kv_store_at(*layout, seqs[i].host_ptrs.data(), layer, pos0[i] + t, k.data() + row * kv_width,
                                   v.data() + row * kv_width);
            }
          }
        };
        const int64_t zero[2] = {0, 0};
        store(zero, hist, 30);
        store(hist, n_new, 40);
        for (int i = 0; i < 2; ++i) {
          for (size_t b = 0; b < seqs[i].dev.size(); ++b) {
            std::vector<uint8_t> got(static_cast<size_t>(layout->block_bytes));
            be.copy_to_host(seqs[i].dev[b], got.data(), got.size());
            INFO(be.name() << " head_dim " << head_dim << " seq " << i << " block " << b);
            REQUIRE(got == seqs[i].host[b]);
          }
        }
        const auto q = random_floats(static_cast<size_t>((n_new[0] + n_new[1]) * q_width), 50, 0.5f);
        const kernels::AttentionShape s{sh.n_head, sh.n_kv_head, head_dim, kv_width,
                                        1.0f / std::sqrt(static_cast<float>(head_dim))};
        for (int64_t window : {0, 7}) {
          INFO(be.name() << " head_dim " << head_dim << " heads " << sh.n_head << "/" << sh.n_kv_head << " K "
                         << kernels::kv_type_name(ty.k) << " V " << kernels::kv_type_name(ty.v) << " window "
                         << window);
          const backend::SeqSlice slices[2] = {{seqs[0].dev, hist[0], n_new[0], 0},
                                               {seqs[1].dev, hist[1], n_new[1], n_new[0]}};
          DeviceBuffer<float> dq(be, q), dout(be, q.size());
          be.attention(*layout, layer, slices, dq.get(), s, window, dout.get());
          const auto out = dout.to_host();
          REQUIRE(be.take_error().ok());
          for (int i = 0; i < 2; ++i) {
            for (int64_t t = 0; t < n_new[i]; ++t) {
              const int64_t row = (i == 0 ? 0 : n_new[0]) + t;
              const int64_t n_kv = hist[i] + t + 1;
              const kernels::PagedKvView view{seqs[i].host_ptrs.data(), static_cast<int64_t>(seqs[i].host_ptrs.size()),
                                              &*layout, layer, window};
              std::vector<float> ref(static_cast<size_t>(q_width));
              std::vector<float> scratch(static_cast<size_t>(kernels::paged_attention_scratch_floats(s, n_kv)));
              kernels::attention_paged_reference(q.data() + row * q_width, view, n_kv, s, 0, sh.n_kv_head, ref.data(),
                                                 scratch.data());
              // The CPU may score INT8/INT4 K against q quantized to int8 per head, moving each
              // score by at most delta = scale * (max|q_head| / 127) / 2 * max_t sum|k_t|; that
              // scales the softmax weights by at most e^(+-2 delta), so out moves by at most
              // (e^(2 delta) - 1) max|v|. Float rounding adds ~1e-5 max|v| (F16 K: that alone).
              double qmax = 0, ksum_max = 0, vmax = 0;
              for (int64_t j = 0; j < q_width; ++j)
                qmax = std::max(qmax, std::abs(static_cast<double>(q[static_cast<size_t>(row * q_width + j)])));
              for (int64_t p = 0; p < n_kv; ++p) {
                std::vector<float> kr(static_cast<size_t>(kv_width)), vr(kr.size());
                const kernels::KvSlot sl = kernels::kv_slot(*layout, p);
                kernels::decode_row_reference(
                    ty.k, layout->group,
                    seqs[i].host_ptrs[static_cast<size_t>(sl.block)] + layout->k_row_offset(layer, sl.row), kv_width,
                    kr.data());
                kernels::decode_row_reference(
                    ty.v, layout->group,
                    seqs[i].host_ptrs[static_cast<size_t>(sl.block)] + layout->v_row_offset(layer, sl.row), kv_width,
                    vr.data());
                for (int h = 0; h < sh.n_kv_head; ++h) {
                  double ks = 0;
                  for (int d = 0; d < head_dim; ++d)
                    ks += std::abs(static_cast<double>(kr[static_cast<size_t>(h * head_dim + d)]));
                  ksum_max = std::max(ksum_max, ks);
                }
                for (float e : vr) vmax = std::max(vmax, std::abs(static_cast<double>(e)));
              }
              const double delta =
                  ty.k == KvType::f16 ? 0.0 : static_cast<double>(s.scale) * (qmax / 127) / 2 * ksum_max;
              const double bound = (std::exp(2 * delta) - 1) * vmax + 1e-5 * vmax;
              for (int64_t j = 0; j < q_width; ++j) {
                REQUIRE(std::abs(static_cast<double>(out[static_cast<size_t>(row * q_width + j)] -
                                                     ref[static_cast<size_t>(j)])) <= bound);
              }
            }
          }
        }
        for (auto& sq : seqs) {
          for (uint8_t* p : sq.dev) be.free(p);
        }
      }
    }
  }
}
