// ModelConfig's KV helpers: the block layout per head size (with its scale group) and the
// bytes per token of each KV format.
#include <catch2/catch.hpp>

#include <string>

#include "core/model/model_config.h"

using namespace kvc;

namespace {

model::ModelConfig config_with_head_dim(int64_t head_dim) {
  model::ModelConfig c;
  c.arch = "llama";
  c.n_layer = 5;
  c.n_head = 8;
  c.n_head_kv = 4;
  c.head_dim = head_dim;
  c.n_embd = c.n_head * head_dim;
  return c;
}

}  // namespace

TEST_CASE("model config: quantized KV for head size 12 is refused with an error naming it", "[core]") {
  const model::ModelConfig c = config_with_head_dim(12);
  for (kv::KvFormat f : {kv::KvFormat::int8, kv::KvFormat::int4}) {
    auto l = c.kv_layout(16, f, kv::KvFormat::f16);
    REQUIRE_FALSE(l.ok());
    CHECK(l.error().code == ErrorCode::unsupported);
    const std::string msg = l.error().what();
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("head size is 12"));
    CHECK_THAT(msg, Catch::Contains("multiple of 8"));
    CHECK_THAT(msg, Catch::Contains("F16 KV works"));
    CHECK_FALSE(c.kv_layout(16, kv::KvFormat::f16, f).ok());
    CHECK(c.kv_bytes_per_token(f) == 0.0);
  }
  // F16 needs no group.
  auto f16 = c.kv_layout(16, kv::KvFormat::f16, kv::KvFormat::f16);
  REQUIRE(f16.ok());
  CHECK(f16->group == 0);
  CHECK(f16->k_row_bytes == 4 * 12 * 2);
  CHECK(c.kv_bytes_per_token(kv::KvFormat::f16) == 2.0 * 5 * 4 * 12 * 2);
  // A bad block size is its own error.
  auto b = config_with_head_dim(64).kv_layout(0, kv::KvFormat::int8, kv::KvFormat::int8);
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.error().what(), Catch::Contains("block size"));
}

TEST_CASE("model config: KV bytes per token follow the head size's group", "[core]") {
  struct Case {
    int64_t head_dim;
    int group;
  };
  for (const Case k : {Case{64, 32}, Case{80, 16}, Case{48, 16}, Case{8, 8}}) {
    INFO("head_dim " << k.head_dim);
    const model::ModelConfig c = config_with_head_dim(k.head_dim);
    auto l = c.kv_layout(16, kv::KvFormat::int8, kv::KvFormat::int4);
    REQUIRE(l.ok());
    CHECK(l->group == k.group);
    // The layout's bytes and the per-element formula agree: (K int8 + V int4) per token.
    const double elems = static_cast<double>(c.n_layer * c.kv_width());
    CHECK(static_cast<double>(l->block_bytes) / 16 ==
          Approx(elems * (kv::kv_bytes_per_element(kv::KvFormat::int8, k.group) +
                          kv::kv_bytes_per_element(kv::KvFormat::int4, k.group))));
    CHECK(c.kv_bytes_per_token(kv::KvFormat::int8) == Approx(2.0 * elems * (1.0 + 2.0 / k.group)));
    CHECK(c.kv_bytes_per_token(kv::KvFormat::int4) == Approx(2.0 * elems * (0.5 + 2.0 / k.group)));
  }
  // stories260K's shape (5 layers, 4 kv heads of 8): F16 640 bytes/token, INT8 400, INT4 240.
  const model::ModelConfig s = config_with_head_dim(8);
  CHECK(s.kv_bytes_per_token(kv::KvFormat::f16) == 640.0);
  CHECK(s.kv_bytes_per_token(kv::KvFormat::int8) == 400.0);
  CHECK(s.kv_bytes_per_token(kv::KvFormat::int4) == 240.0);
}
