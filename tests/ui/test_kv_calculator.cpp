// The KV calculator's arithmetic against hand-computed sizes (TinyLlama-1.1B's shape).
#include <catch2/catch.hpp>

#include "ui/kv_calculator.h"

using kvc::kv::KvFormat;
using kvc::ui::estimate_kv;
using kvc::ui::KvShape;
using kvc::ui::KvWhatIf;

namespace {

// TinyLlama 1.1B: 22 layers, 32 query heads, 4 KV heads, head_dim 64.
constexpr KvShape k_tinyllama{22, 32, 4, 64};

}  // namespace

TEST_CASE("kv calculator: element bytes follow the group", "[ui]") {
  CHECK(kvc::ui::kv_element_bytes(KvFormat::f16, 32) == 2.0);
  CHECK(kvc::ui::kv_element_bytes(KvFormat::int8, 32) == 1.0625);
  CHECK(kvc::ui::kv_element_bytes(KvFormat::int4, 32) == 0.5625);
  CHECK(kvc::ui::kv_element_bytes(KvFormat::int8, 16) == 1.125);
  CHECK(kvc::ui::kv_element_bytes(KvFormat::int4, 8) == 0.75);
  // The engine's own formula agrees at its groups.
  for (int g : {32, 16, 8}) {
    CAPTURE(g);
    CHECK(kvc::ui::kv_element_bytes(KvFormat::int8, g) == kvc::kv::kv_bytes_per_element(KvFormat::int8, g));
    CHECK(kvc::ui::kv_element_bytes(KvFormat::int4, g) == kvc::kv::kv_bytes_per_element(KvFormat::int4, g));
  }
}

TEST_CASE("kv calculator: TinyLlama per token and per conversation, F16 / INT8 / INT4", "[ui]") {
  auto f16 = estimate_kv(k_tinyllama, {}, KvFormat::f16, 32, 2048);
  REQUIRE(f16.ok());
  CHECK(f16->bytes_per_token_layer == 2 * 4 * 64 * 2);   // 1024
  CHECK(f16->bytes_per_token == 22528);                  // 22 * 2 * 4 * 64 * 2
  CHECK(f16->bytes_per_conversation == 22528.0 * 2048);  // 46,137,344 (44 MiB)
  CHECK(f16->n_kv_layers == 22);
  CHECK(f16->n_local_layers == 0);

  auto i8 = estimate_kv(k_tinyllama, {}, KvFormat::int8, 32, 2048);
  REQUIRE(i8.ok());
  CHECK(i8->bytes_per_token == 11968);  // 22 * 2 * 4 * 64 * (1 + 2/32) = 11264 * 1.0625
  auto i4 = estimate_kv(k_tinyllama, {}, KvFormat::int4, 32, 2048);
  REQUIRE(i4.ok());
  CHECK(i4->bytes_per_token == 6336);  // 11264 * 0.5625
  auto i8_g16 = estimate_kv(k_tinyllama, {}, KvFormat::int8, 16, 1);
  REQUIRE(i8_g16.ok());
  CHECK(i8_g16->bytes_per_token == 12672);  // 11264 * 1.125
}

TEST_CASE("kv calculator: MQA and GQA what-ifs", "[ui]") {
  KvWhatIf mqa;
  mqa.n_kv_head = 1;
  auto e = estimate_kv(k_tinyllama, mqa, KvFormat::f16, 32, 100);
  REQUIRE(e.ok());
  CHECK(e->n_kv_head == 1);
  CHECK(e->bytes_per_token == 5632);  // 22 * 2 * 1 * 64 * 2
  CHECK(e->bytes_per_conversation == 563200);

  KvWhatIf gqa8;
  gqa8.n_kv_head = 8;
  e = estimate_kv(k_tinyllama, gqa8, KvFormat::f16, 32, 1);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_token == 45056);

  KvWhatIf mha;
  mha.n_kv_head = 32;
  e = estimate_kv(k_tinyllama, mha, KvFormat::f16, 32, 1);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_token == 180224);  // 22 * 2 * 32 * 64 * 2

  KvWhatIf bad;
  bad.n_kv_head = 5;  // does not divide 32
  auto err = estimate_kv(k_tinyllama, bad, KvFormat::f16, 32, 1);
  REQUIRE_FALSE(err.ok());
  CHECK(err.error().message.find("5 KV heads do not divide 32") != std::string::npos);
  bad.n_kv_head = 64;  // more KV heads than query heads
  CHECK_FALSE(estimate_kv(k_tinyllama, bad, KvFormat::f16, 32, 1).ok());
}

TEST_CASE("kv calculator: sliding-window layers keep at most the window", "[ui]") {
  KvWhatIf local;
  local.local_fraction = 0.5;
  local.window_tokens = 256;
  auto e = estimate_kv(k_tinyllama, local, KvFormat::f16, 32, 2048);
  REQUIRE(e.ok());
  CHECK(e->n_local_layers == 11);
  CHECK(e->bytes_per_token == 22528);  // while inside the window every layer keeps the token
  // 11 full layers * 2048 tokens + 11 local layers * 256 tokens, 1024 bytes per token and layer.
  CHECK(e->bytes_per_conversation == 1024.0 * (11 * 2048 + 11 * 256));  // 25,952,256
  // A conversation shorter than the window: no saving.
  e = estimate_kv(k_tinyllama, local, KvFormat::f16, 32, 100);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_conversation == 22528.0 * 100);
  // All layers local.
  local.local_fraction = 1;
  e = estimate_kv(k_tinyllama, local, KvFormat::f16, 32, 4096);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_conversation == 22528.0 * 256);

  local.window_tokens = 0;
  CHECK_FALSE(estimate_kv(k_tinyllama, local, KvFormat::f16, 32, 10).ok());
}

TEST_CASE("kv calculator: cross-layer sharing stores one KV per run of k layers", "[ui]") {
  KvWhatIf share;
  share.share_every = 2;
  auto e = estimate_kv(k_tinyllama, share, KvFormat::f16, 32, 1);
  REQUIRE(e.ok());
  CHECK(e->n_kv_layers == 11);
  CHECK(e->bytes_per_token == 11264);
  share.share_every = 3;  // ceil(22 / 3) = 8 stored layers
  e = estimate_kv(k_tinyllama, share, KvFormat::f16, 32, 1);
  REQUIRE(e.ok());
  CHECK(e->n_kv_layers == 8);
  CHECK(e->bytes_per_token == 8192);
  // Combined: MQA + sharing by 2 + INT4 = 11 layers * 2 * 1 * 64 * 0.5625.
  share.share_every = 2;
  share.n_kv_head = 1;
  e = estimate_kv(k_tinyllama, share, KvFormat::int4, 32, 1);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_token == 792);
  share.share_every = 0;
  CHECK_FALSE(estimate_kv(k_tinyllama, share, KvFormat::f16, 32, 1).ok());
}

TEST_CASE("kv calculator: an unknown shape is a message, not a crash", "[ui]") {
  auto e = estimate_kv(KvShape{}, {}, KvFormat::f16, 32, 10);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("load a model") != std::string::npos);
  CHECK_FALSE(estimate_kv(k_tinyllama, {}, KvFormat::int8, 0, 10).ok());
}

TEST_CASE("kv calculator: Gemma 3 1B and 4B per layer group, and what the local layers' window saves", "[ui]") {
  // Gemma 3 1B: 26 layers (22 local of window 512, 4 global), 4 query heads, 1 KV head of 256.
  constexpr KvShape gemma3_1b{26, 4, 1, 256};
  const KvWhatIf w1 = kvc::ui::model_local_layers(22, 26, 512);
  auto e = estimate_kv(gemma3_1b, w1, KvFormat::f16, 32, 32768);
  REQUIRE(e.ok());
  CHECK(e->n_local_layers == 22);
  CHECK(e->bytes_per_token_layer == 1024);  // 2 * 1 * 256 * 2
  CHECK(e->bytes_per_token == 26624);
  CHECK(e->bytes_per_token_local == 22528);
  CHECK(e->bytes_per_token_global == 4096);
  // At its 32K context: the global layers keep every position, the local ones 512.
  CHECK(e->bytes_per_conversation == 4096.0 * 32768 + 22528.0 * 512);  // 139 MiB
  CHECK(e->bytes_per_conversation_full == 26624.0 * 32768);            // 832 MiB
  CHECK(e->saved_fraction() == Approx(1.0 - 145752064.0 / 872415232.0));
  CHECK(e->saved_fraction() > 0.83);
  // INT8 KV (one F16 scale per 32 values): the same split, 1.0625 bytes an element.
  e = estimate_kv(gemma3_1b, w1, KvFormat::int8, 32, 4096);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_token_local == 22 * 2 * 256 * 1.0625);
  CHECK(e->bytes_per_token_global == 4 * 2 * 256 * 1.0625);
  // Within the window nothing is saved.
  e = estimate_kv(gemma3_1b, w1, KvFormat::f16, 32, 512);
  REQUIRE(e.ok());
  CHECK(e->saved_fraction() == 0);

  // Gemma 3 4B: 34 layers (29 local of window 1024, 5 global), 8 query heads, 4 KV heads of 256.
  constexpr KvShape gemma3_4b{34, 8, 4, 256};
  e = estimate_kv(gemma3_4b, kvc::ui::model_local_layers(29, 34, 1024), KvFormat::f16, 32, 131072);
  REQUIRE(e.ok());
  CHECK(e->n_local_layers == 29);
  CHECK(e->bytes_per_token_local == 29 * 4096);
  CHECK(e->bytes_per_token_global == 5 * 4096);
  CHECK(e->bytes_per_conversation == 20480.0 * 131072 + 118784.0 * 1024);
  CHECK(e->saved_fraction() == Approx(1.0 - (20480.0 * 131072 + 118784.0 * 1024) / (139264.0 * 131072)));

  // A model without local layers: everything global, nothing saved.
  e = estimate_kv(KvShape{22, 32, 4, 64}, kvc::ui::model_local_layers(0, 22, 0), KvFormat::f16, 32, 2048);
  REQUIRE(e.ok());
  CHECK(e->bytes_per_token_local == 0);
  CHECK(e->bytes_per_token_global == e->bytes_per_token);
  CHECK(e->saved_fraction() == 0);
}

TEST_CASE("kv calculator: LFM2-1.2B's 6 attention layers per token and its 10 conv layers' state per sequence",
          "[ui]") {
  // 16 layers, 10 of them short convolutions keeping 2 x 2048 floats each; GQA 32 / 8 heads of 64.
  constexpr KvShape lfm2{16, 32, 8, 64, 10, 2 * 2048};
  auto e = estimate_kv(lfm2, {}, KvFormat::f16, 32, 4096);
  REQUIRE(e.ok());
  CHECK(e->n_kv_layers == 6);
  CHECK(e->bytes_per_token == 6 * 2 * 8 * 64 * 2);          // 12 KiB: the attention layers only
  CHECK(e->state_bytes_per_sequence == 10 * 2 * 2048 * 4);  // 160 KiB
  // A snapshot every block of 16 (256 at 4096 tokens) and the live state.
  CHECK(e->state_bytes_per_conversation == 163840.0 * 257);
  CHECK(e->bytes_per_conversation == 12288.0 * 4096 + 163840.0 * 257);
  CHECK_FALSE(estimate_kv(KvShape{16, 32, 8, 64, 16, 4096}, {}, KvFormat::f16, 32, 10).ok());  // no attention layer
}
