// Timing of paged attention per ISA, KV format and block size for head sizes 64 (groups of 32),
// 80 (16) and 8 (8); hidden from the default run: kvc_tests "[.bench][paged]".
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_attention_impl.h"

using namespace kvc::kernels;

TEST_CASE("paged attention timing per ISA, format and head size", "[.bench][paged]") {
  // One query token over 1,200 positions, 32 query heads / 4 kv heads, B = 16 and 32, one thread.
  const int64_t n_kv = 1200;
  std::vector<const KvOpsTable*> tables{&kv_ops_scalar()};
  if (cpu_features().avx2) tables.push_back(&kv_ops_avx2());
  if (cpu_features().avx512) tables.push_back(&kv_ops_avx512());
  if (cpu_features().avx512_vnni) tables.push_back(&kv_ops_avx512_vnni());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int block_tokens : {16, 32}) {
    for (int head_dim : {64, 80, 8}) {
      for (KvType type : {KvType::f16, KvType::q8, KvType::q4}) {
        AttentionShape s;
        s.n_head = 32;
        s.n_kv_head = 4;
        s.head_dim = head_dim;
        s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        const auto layout = make_kv_block_layout(1, s.n_kv_head, head_dim, block_tokens, type, type);
        REQUIRE(layout.has_value());
        const int64_t n_blocks = (n_kv + block_tokens - 1) / block_tokens;
        std::vector<std::vector<uint8_t>> blocks(static_cast<size_t>(n_blocks),
                                                 std::vector<uint8_t>(static_cast<size_t>(layout->block_bytes)));
        std::vector<uint8_t*> writable;
        for (auto& b : blocks) writable.push_back(b.data());
        std::vector<float> row(static_cast<size_t>(s.n_kv_head * head_dim));  // (n_kv_head, head_dim)
        for (int64_t t = 0; t < n_kv; ++t) {
          for (float& x : row) x = dist(rng);
          kv_store_at(*layout, writable.data(), 0, t, row.data(), row.data());
        }
        std::vector<const uint8_t*> table(writable.begin(), writable.end());
        const PagedKvView view{table.data(), n_blocks, &*layout, 0, 0};
        std::vector<float> q(static_cast<size_t>(s.n_head * head_dim));  // (n_head, head_dim)
        for (float& x : q) x = dist(rng);
        std::vector<float> out(q.size());
        std::vector<float> scratch(static_cast<size_t>(paged_attention_scratch_floats(s, n_kv)));
        for (const KvOpsTable* t : tables) {
          double best_us = 1e30;
          for (int rep = 0; rep < 25; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            attention_paged_with(*t, q.data(), view, n_kv, s, 0, s.n_kv_head, out.data(), scratch.data());
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            best_us = std::min(best_us, us);
          }
          for (float x : out) REQUIRE(std::isfinite(x));
          std::printf("B %2d head %3d group %2d  %-4s  %-12s %9.1f us\n", block_tokens, head_dim, layout->group,
                      kv_type_name(type), isa_name(t->isa), best_us);
        }
      }
    }
  }
}

TEST_CASE("paged attention timing at 4096 positions: rotated and per-channel formats against plain ones, A/B",
          "[.bench][paged]") {
  // One query token over 4,096 positions, 32 query heads / 8 kv heads, B = 16, one thread; the
  // two formats of a pair run alternately (best of 40 each), so a busy machine slows both alike.
  const int64_t n_kv = 4096;
  const int block_tokens = 16;
  std::vector<const KvOpsTable*> tables{&kv_ops_scalar()};
  if (cpu_features().avx2) tables.push_back(&kv_ops_avx2());
  if (cpu_features().avx512) tables.push_back(&kv_ops_avx512());
  if (cpu_features().avx512_vnni) tables.push_back(&kv_ops_avx512_vnni());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  struct Pair {
    KvType a, b;
  };
  for (int head_dim : {128, 64, 8}) {
    for (const Pair& p :
         {Pair{KvType::q4, KvType::q4h}, Pair{KvType::q4, KvType::q4c}, Pair{KvType::q8, KvType::q8h}}) {
      AttentionShape s;
      s.n_head = 32;
      s.n_kv_head = 8;
      s.head_dim = head_dim;
      s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      struct Side {
        KvBlockLayout layout;
        std::vector<std::vector<uint8_t>> blocks;
        std::vector<const uint8_t*> table;
        std::vector<uint16_t> tail;  // K per channel: the holding area (the last block's rows in F16)
      } side[2];
      const int64_t n_blocks = (n_kv + block_tokens - 1) / block_tokens;
      std::vector<float> rows(static_cast<size_t>(n_kv * s.n_kv_head * head_dim));
      for (float& x : rows) x = dist(rng);
      for (int i = 0; i < 2; ++i) {
        const KvType type = i == 0 ? p.a : p.b;
        const auto layout = make_kv_block_layout(1, s.n_kv_head, head_dim, block_tokens, type, type);
        REQUIRE(layout.has_value());
        side[i].layout = *layout;
        side[i].blocks.assign(static_cast<size_t>(n_blocks),
                              std::vector<uint8_t>(static_cast<size_t>(layout->block_bytes)));
        std::vector<uint8_t*> writable;
        for (auto& b : side[i].blocks) writable.push_back(b.data());
        const bool per_channel = kv_k_per_channel(type);
        if (per_channel) side[i].tail.assign(static_cast<size_t>(layout->tail_layer_elems()), 0);
        uint16_t* tail = per_channel ? side[i].tail.data() : nullptr;
        const float* r = rows.data();
        for (int64_t t = 0; t < n_kv; ++t, r += s.n_kv_head * head_dim) {
          kv_store_at(*layout, writable.data(), 0, t, r, r, tail);
          if (per_channel && (t + 1) % block_tokens == 0) kv_seal_block(*layout, writable[t / block_tokens], 0, tail);
        }
        side[i].table.assign(writable.begin(), writable.end());
      }
      std::vector<float> q(static_cast<size_t>(s.n_head * head_dim));
      for (float& x : q) x = dist(rng);
      std::vector<float> out(q.size());
      std::vector<float> scratch(static_cast<size_t>(paged_attention_scratch_floats(s, n_kv)));
      for (const KvOpsTable* t : tables) {
        if (t->isa == Isa::scalar) continue;  // the reference: not what runs
        double best[2] = {1e30, 1e30};
        for (int rep = 0; rep < 40; ++rep) {
          for (int i = 0; i < 2; ++i) {
            // K per channel: the query's own block (the last) is read from the F16 rows.
            const uint16_t* tail = side[i].tail.empty() ? nullptr : side[i].tail.data();
            const PagedKvView view{side[i].table.data(),
                                   n_blocks,
                                   &side[i].layout,
                                   0,
                                   0,
                                   tail,
                                   tail != nullptr ? tail + block_tokens * s.n_kv_head * head_dim : nullptr,
                                   tail != nullptr ? n_blocks - 1 : -1};
            const auto t0 = std::chrono::steady_clock::now();
            attention_paged_with(*t, q.data(), view, n_kv, s, 0, s.n_kv_head, out.data(), scratch.data());
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            best[i] = std::min(best[i], us);
            for (float x : out) REQUIRE(std::isfinite(x));
          }
        }
        std::printf("head %3d  %-12s %-4s %8.1f us  %-4s %8.1f us  (%+.1f %%)\n", head_dim, isa_name(t->isa),
                    kv_type_name(p.a), best[0], kv_type_name(p.b), best[1], 100.0 * (best[1] / best[0] - 1.0));
      }
    }
  }
}
