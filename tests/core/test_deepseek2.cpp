// deepseek2: the MLA keys as kvchat reads them (DeepSeek-V2-Lite's shape), the files it refuses, its
// logits against llama.cpp's (with and without a Q latent; YaRN's mscale pinned), cached == uncached.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/backend/backend.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/model_check.h"
#include "core/model/model_config.h"
#include "core/model/session.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/no_moe_backend.h"
#include "support/restart_check.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// DeepSeek-V2-Lite's metadata as llama.cpp's converter writes it (config.json on Hugging Face),
// no tensors, a small vocabulary.
gguf::GgufWriter deepseek_v2_lite() {
  gguf::GgufWriter w;
  const std::string a = "deepseek2.";
  w.set_string("general.architecture", "deepseek2");
  w.set_u32(a + "block_count", 27);
  w.set_u32(a + "context_length", 163840);
  w.set_u32(a + "embedding_length", 2048);
  w.set_u32(a + "feed_forward_length", 10944);
  w.set_u32(a + "attention.head_count", 16);
  w.set_u32(a + "attention.head_count_kv", 1);
  w.set_u32(a + "attention.key_length", 576);
  w.set_u32(a + "attention.value_length", 512);
  w.set_u32(a + "attention.key_length_mla", 192);
  w.set_u32(a + "attention.value_length_mla", 128);
  w.set_u32(a + "attention.kv_lora_rank", 512);
  w.set_u32(a + "rope.dimension_count", 64);
  w.set_f32(a + "rope.freq_base", 10000.0f);
  w.set_string(a + "rope.scaling.type", "yarn");
  w.set_f32(a + "rope.scaling.factor", 40.0f);
  w.set_u32(a + "rope.scaling.original_context_length", 4096);
  w.set_f32(a + "rope.scaling.yarn_log_multiplier", 0.0707f);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32(a + "leading_dense_block_count", 1);
  w.set_u32(a + "expert_count", 64);
  w.set_u32(a + "expert_used_count", 6);
  w.set_u32(a + "expert_feed_forward_length", 1408);
  w.set_u32(a + "expert_shared_count", 2);
  w.set_f32(a + "expert_weights_scale", 1.0f);
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(std::to_string(1000 + i));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  return w;
}

using test::config_of;
using test::variant;

}  // namespace

TEST_CASE("deepseek2 config: DeepSeek-V2-Lite keeps a latent row of 512 + 64 a token, YaRN's mscale in the scores",
          "[core]") {
  auto c = config_of(deepseek_v2_lite());
  INFO((c.ok() ? std::string() : c.error().what()));
  REQUIRE(c.ok());
  CHECK(c->mla);
  CHECK(c->kv_lora_rank == 512);
  CHECK(c->q_lora_rank == 0);
  CHECK(c->mla_key_head == 192);
  CHECK(c->mla_nope() == 128);
  CHECK(c->mla_value_head == 128);
  CHECK(c->rope.n_rot == 64);
  CHECK(c->rope.interleaved);  // consecutive pairs, as llama.cpp's deepseek2
  CHECK(c->n_head_kv == 1);
  CHECK(c->head_dim == 576);  // the cached row: latent + rope part
  CHECK(c->n_dense_lead == 1);
  CHECK(c->n_expert_shared == 2);
  CHECK(c->routing.gating == kernels::MoeGating::softmax);
  CHECK_FALSE(c->routing.norm_weights);
  CHECK(c->rope.yarn);
  // The rope keeps magnitude 1 (mscale / mscale_all_dim); the scores take mscale^2 / sqrt(192),
  // mscale = 1 + 0.0707 ln 40 (DeepSeek's yarn_get_mscale(40, 0.707)).
  CHECK(c->rope.attn_factor == Approx(1.0f).epsilon(1e-6));
  const double mscale = 1.0 + 0.0707 * std::log(40.0);
  CHECK(c->query_scale == Approx(mscale * mscale / std::sqrt(192.0)).epsilon(1e-5));

  // A Q latent where the file has one; without YaRN the scale is the plain 1 / sqrt(192).
  gguf::GgufWriter w = deepseek_v2_lite();
  w.set_u32("deepseek2.attention.q_lora_rank", 1536);
  w.erase("deepseek2.rope.scaling.type");
  auto q = config_of(w);
  REQUIRE(q.ok());
  CHECK(q->q_lora_rank == 1536);
  CHECK(q->query_scale == Approx(1.0 / std::sqrt(192.0)).epsilon(1e-6));
}

TEST_CASE("deepseek2 config: an older file with one attn_kv_b, or a latent row of the wrong size, is refused",
          "[core]") {
  gguf::GgufWriter old = deepseek_v2_lite();  // the converters before attn_k_b / attn_v_b wrote no MLA sizes
  old.erase("deepseek2.attention.key_length_mla");
  old.erase("deepseek2.attention.value_length_mla");
  auto o = config_of(old);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error().code == ErrorCode::unsupported);
  CHECK_THAT(o.error().what(), Catch::Contains("attn_kv_b"));
  CHECK_THAT(o.error().what(), Catch::Contains("Reconvert"));
  gguf::GgufWriter w = deepseek_v2_lite();
  w.set_u32("deepseek2.attention.key_length", 512);  // not kv_lora_rank + rope dimensions
  auto k = config_of(w);
  REQUIRE_FALSE(k.ok());
  CHECK_THAT(k.error().what(), Catch::Contains("deepseek2.attention.key_length"));
  w = deepseek_v2_lite();
  w.set_u32("deepseek2.attention.value_length", 128);
  auto v = config_of(w);
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(v.error().what(), Catch::Contains("deepseek2.attention.value_length"));
  w = deepseek_v2_lite();
  w.set_u32("deepseek2.attention.head_count_kv", 16);
  auto h = config_of(w);
  REQUIRE_FALSE(h.ok());
  CHECK_THAT(h.error().what(), Catch::Contains("deepseek2.attention.head_count_kv"));
}

TEST_CASE(
    "deepseek2 config: GLM-4.7-Flash's 48 blocks are 47 layers and an MTP block, and without a gating key it "
    "routes by sigmoid, as llama.cpp reads it",
    "[core]") {
  // GLM-4.7-Flash as llama.cpp's converter writes it (block_count counts the MTP block); the
  // vocabulary's size is what llama.cpp's gating rule looks at.
  auto glm = [](int64_t n_vocab) {
    gguf::GgufWriter w = deepseek_v2_lite();
    w.set_u32("deepseek2.block_count", 48);
    w.set_u32("deepseek2.nextn_predict_layers", 1);
    std::vector<std::string> tokens;
    for (int64_t i = 0; i < n_vocab; ++i) tokens.push_back(std::to_string(1000000 + i));
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    return w;
  };
  gguf::GgufWriter w = glm(154880);
  auto c = config_of(w);
  INFO((c.ok() ? std::string() : c.error().what()));
  REQUIRE(c.ok());
  CHECK(c->n_layer == 47);
  CHECK(c->n_layer_nextn == 1);
  CHECK(c->n_moe_layers() == 46);
  CHECK(c->routing.gating == kernels::MoeGating::sigmoid);
  CHECK(model::is_mtp_tensor("blk.47.nextn.eh_proj.weight", *c));
  CHECK(model::is_mtp_tensor("blk.47.ffn_up_exps.weight", *c));
  CHECK_FALSE(model::is_mtp_tensor("blk.46.ffn_up_exps.weight", *c));
  CHECK_FALSE(model::is_mtp_tensor("blk.48.attn_norm.weight", *c));
  CHECK_FALSE(model::is_mtp_tensor("blk.4x.attn_norm.weight", *c));
  CHECK_FALSE(model::is_mtp_tensor("output.weight", *c));

  w.set_u32("deepseek2.expert_gating_func", 0);  // "none": the same rule
  CHECK(config_of(w)->routing.gating == kernels::MoeGating::sigmoid);
  w.set_u32("deepseek2.expert_gating_func", 1);  // a gating the file names wins
  CHECK(config_of(w)->routing.gating == kernels::MoeGating::softmax);
  // Another vocabulary, or the V2-Lite shape, without the key: DeepSeek's softmax.
  CHECK(config_of(glm(300))->routing.gating == kernels::MoeGating::softmax);
  CHECK(config_of(deepseek_v2_lite())->routing.gating == kernels::MoeGating::softmax);

  // Only prediction heads: nothing to run, and the message says what the file is.
  w = glm(300);
  w.set_u32("deepseek2.nextn_predict_layers", 48);
  auto heads = config_of(w);
  REQUIRE_FALSE(heads.ok());
  CHECK_THAT(heads.error().what(), Catch::Contains("deepseek2.nextn_predict_layers"));
  CHECK_THAT(heads.error().what(), Catch::Contains("MTP"));
}

TEST_CASE("deepseek2: logits match llama.cpp's with and without a Q latent, over 203 positions", "[core][e2e]") {
  // tiny-deepseek2-f16: softmax routing, DeepSeek's YaRN with its mscale; qlora: a Q latent,
  // sigmoid gating with a selection bias, group-limited routing, normalised and scaled weights.
  // mtp: the qlora model with an MTP block after its layers, which both load and neither runs.
  // Measured worst rows 0.0101 and 0.0035 (AVX-512 VNNI).
  for (const char* name : {"tiny-deepseek2-f16", "tiny-deepseek2-qlora-f16", "tiny-deepseek2-mtp-f16"}) {
    DYNAMIC_SECTION(name) {
      const test::Agreement a = test::against_llama(name, test::model_path(std::string(name) + ".gguf"));
      INFO(name << ": worst rel_rms " << a.worst_rel_rms << ", top-1 " << a.top1_agree << "/" << a.top1_checked);
      CHECK(a.worst_rel_rms <= 0.02);
      CHECK(a.top1_agree == a.top1_checked);
      CHECK(a.top1_checked >= 25);
    }
  }
}

TEST_CASE("deepseek2: an MTP block after the layers is loaded and not run: the logits are the model's without it",
          "[core][e2e]") {
  // The two files share every trunk tensor (mkmodel seeds each tensor by its name).
  auto be = backend::make_cpu_backend(2);
  auto with = model::Model::load(test::model_path("tiny-deepseek2-mtp-f16.gguf"), *be);
  INFO((with.ok() ? std::string() : with.error().what()));
  REQUIRE(with.ok());
  auto without = model::Model::load(test::model_path("tiny-deepseek2-qlora-f16.gguf"), *be);
  REQUIRE(without.ok());
  CHECK((*with)->config().n_layer == 3);
  CHECK((*with)->config().n_layer_nextn == 1);
  // The block's experts are not counted among those a token reads.
  CHECK((*with)->expert_bytes() == (*without)->expert_bytes());
  std::vector<int32_t> tokens;  // stories260K's vocabulary: 512 tokens
  for (int i = 0; i < 40; ++i) tokens.push_back(1 + (i * 37) % 500);
  CHECK(test::uncached_logits(**with, tokens) == test::uncached_logits(**without, tokens));
}

TEST_CASE("deepseek2: without YaRN's mscale in the scores the logits miss llama.cpp's by far", "[core][e2e]") {
  // The file's yarn_log_multiplier is what makes the scores' scale (1 + 0.0707 ln 8)^2 / sqrt(96):
  // without it (measured worst row 1.50) the sharp attention of this file goes elsewhere.
  test::TempDir tmp;
  const std::string no_mscale = variant("tiny-deepseek2-f16", tmp, [](gguf::GgufWriter& w) {
    w.set_f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.0f);
  });
  CHECK(test::against_llama("tiny-deepseek2-f16", no_mscale).worst_rel_rms > 0.2);
}

TEST_CASE("deepseek2: a backend without the CPU's MLA and expert ops refuses the model, saying so", "[core]") {
  test::NoMoeBackend be;
  auto m = model::Model::load(test::model_path("tiny-deepseek2-f16.gguf"), be);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == ErrorCode::unsupported);
  CHECK_THAT(m.error().what(), Catch::Contains("multi-head latent attention"));
  CHECK_THAT(m.error().what(), Catch::Contains("--backend cpu"));
}

TEST_CASE("deepseek2: cached logits equal uncached ones across turns and through T1", "[core][e2e]") {
  for (const char* file : {"tiny-deepseek2-f16.gguf", "tiny-deepseek2-qlora-f16.gguf"}) {
    DYNAMIC_SECTION(file) {
      auto be = backend::make_cpu_backend(2);
      auto m = model::Model::load(test::model_path(file), *be);
      REQUIRE(m.ok());
      test::check_turns_equal_uncached(**m);
    }
  }
}

TEST_CASE("deepseek2: the latent cache keeps one row of kv_lora_rank + rope values a token and layer, no V",
          "[core][kv]") {
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(test::model_path("tiny-deepseek2-f16.gguf"), *be);
  REQUIRE(m.ok());
  const model::ModelConfig& c = (*m)->config();
  const model::KvGroupMap map = c.kv_group_map();
  REQUIRE(map.groups.size() == 1);
  CHECK(map.groups[0].kind == kv::KvGroupKind::latent);
  // 3 layers x (128 + 32) values: F16 2 bytes each, int8 1 byte each plus an F16 scale per 32.
  const int64_t row = 128 + 32;
  for (int b : {16, 32}) {
    auto f16 = c.kv_layout(b, kv::KvFormat::f16, kv::KvFormat::f16);
    REQUIRE(f16.ok());
    CHECK(f16->v_in_k);
    CHECK(f16->block_bytes == int64_t{b} * 3 * row * 2);
    auto q8 = c.kv_layout(b, kv::KvFormat::int8, kv::KvFormat::int8);
    REQUIRE(q8.ok());
    CHECK(q8->block_bytes == int64_t{b} * 3 * (row + row / 32 * 2));
  }
  CHECK(c.kv_bytes_per_token(kv::KvFormat::f16) == 3.0 * row * 2);
  CHECK(c.kv_bytes_per_token_mha(2.0) == 3.0 * 4 * (96 + 64) * 2);      // 4 heads, K 64 + 32, V 64
  auto q4 = c.kv_layout(16, kv::KvFormat::int4h, kv::KvFormat::int4h);  // not for a latent yet
  REQUIRE_FALSE(q4.ok());
  CHECK_THAT(q4.error().what(), Catch::Contains("latent"));
  // The session's cache uses it: its blocks hold exactly the latent rows.
  auto s = model::Session::create(**m, 256);
  REQUIRE(s.ok());
  CHECK(s->cache().layout().block_bytes == int64_t{s->cache().layout().block_tokens} * 3 * row * 2);
}

// Four turns from T0, a round trip through T1, then a restart over the same store; every logit
// the same as an uncached run's, bit for bit (F16 latent), none recomputed.
TEST_CASE("deepseek2: the latent cache serves four turns, T1 and a restart from disk, logits unchanged",
          "[core][kv][e2e]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-deepseek2-qlora-f16.gguf"), *be);
  REQUIRE(m.ok());
  test::check_turns_t1_and_restart(**m, (tmp.path() / "kv").string());
}
