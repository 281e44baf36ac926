// gemma4: its keys as kvchat reads them (Gemma 4 E2B's shape), the files it refuses, its logits
// against llama.cpp's, shared KV layers that read their producer's K/V only, cached == uncached.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/kv_setup.h"
#include "core/model/model.h"
#include "core/model/model_config.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/no_moe_backend.h"
#include "support/restart_check.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// Gemma 4 E2B's metadata as llama.cpp's converter writes it (its config.json), no tensors, a small
// vocabulary: 35 layers, four local to one global, the last 20 sharing K/V, their FFN double-wide.
gguf::GgufWriter gemma4_e2b() {
  gguf::GgufWriter w;
  const std::string a = "gemma4.";
  w.set_string("general.architecture", "gemma4");
  w.set_u32(a + "block_count", 35);
  w.set_u32(a + "context_length", 131072);
  w.set_u32(a + "embedding_length", 1536);
  std::vector<uint32_t> ff;
  std::vector<bool> pattern;
  for (int l = 0; l < 35; ++l) {
    ff.push_back(l < 15 ? 6144 : 12288);
    pattern.push_back(l % 5 != 4);
  }
  w.set_vector(a + "feed_forward_length", ff);
  w.set_vector(a + "attention.sliding_window_pattern", pattern);
  w.set_u32(a + "attention.head_count", 8);
  w.set_u32(a + "attention.head_count_kv", 1);
  w.set_u32(a + "attention.key_length", 512);
  w.set_u32(a + "attention.value_length", 512);
  w.set_u32(a + "attention.key_length_swa", 256);
  w.set_u32(a + "attention.value_length_swa", 256);
  w.set_u32(a + "attention.sliding_window", 512);
  w.set_u32(a + "attention.shared_kv_layers", 20);
  w.set_u32(a + "embedding_length_per_layer_input", 256);
  w.set_u32(a + "rope.dimension_count", 512);
  w.set_u32(a + "rope.dimension_count_swa", 256);
  w.set_f32(a + "rope.freq_base", 1000000.0f);
  w.set_f32(a + "rope.freq_base_swa", 10000.0f);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32(a + "final_logit_softcapping", 30.0f);
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(std::to_string(1000 + i));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  return w;
}

using test::config_of;
using test::variant;

}  // namespace

TEST_CASE("gemma4 config: Gemma 4 E2B keeps 15 layers' K/V (18 KiB a token in F16), the other 20 read them", "[core]") {
  auto c = config_of(gemma4_e2b());
  INFO((c.ok() ? std::string() : c.error().what()));
  REQUIRE(c.ok());
  CHECK(c->gemma4);
  CHECK(c->gemma);
  CHECK(c->layer_is_local(0));
  CHECK(c->layer_is_local(3));
  CHECK_FALSE(c->layer_is_local(4));
  CHECK(c->n_local_layers() == 28);
  CHECK(c->local_window == 512);
  CHECK(c->layer_head_dim(0) == 256);
  CHECK(c->layer_head_dim(4) == 512);
  CHECK(c->rope.n_rot == 512);
  CHECK(c->rope.freq_base == 1000000.0f);
  CHECK_FALSE(c->rope.interleaved);  // split halves (NEOX), as llama.cpp's gemma4
  CHECK(c->rope_local.n_rot == 256);
  CHECK(c->rope_local.freq_base == 10000.0f);
  CHECK(c->query_scale == 1.0f);
  CHECK(c->attn_softcap == 0.0f);
  CHECK(c->final_softcap == 30.0f);
  CHECK(c->n_embd_per_layer == 256);
  CHECK(c->layer_n_ff(14) == 6144);
  CHECK(c->layer_n_ff(15) == 12288);  // the shared layers' double-wide FFN
  CHECK(c->n_ff == 12288);
  CHECK(c->n_layer_kv() == 15);
  // Storing: 12 local layers of 256 and 3 global ones (4, 9, 14) of 512, one KV head, K and V.
  CHECK(c->kv_bytes_per_token(2.0) == 2.0 * (12 * 256 + 3 * 512) * 2.0);
  CHECK(c->kv_bytes_per_token(2.0) == 18432.0);
  const model::KvGroupMap map = c->kv_group_map();
  REQUIRE(map.groups.size() == 4);
  CHECK(map.groups[0].kind == kv::KvGroupKind::full);
  CHECK(map.groups[0].n_layer == 3);
  CHECK(map.groups[1].kind == kv::KvGroupKind::window);
  CHECK(map.groups[1].n_layer == 12);
  CHECK(map.groups[2].kind == kv::KvGroupKind::shared);
  CHECK(map.groups[2].source == 1);  // layer 15 is local: it reads layer 13
  CHECK(map.groups[3].kind == kv::KvGroupKind::shared);
  CHECK(map.groups[3].source == 0);
  // llama.cpp's producers: n_kv - 2 = 13 (the 12th local layer, index 11) and n_kv - 1 = 14 (index 2).
  for (int l = 15; l < 35; ++l) {
    INFO("layer " << l);
    CHECK(map.kv_group[static_cast<size_t>(l)] == (l % 5 != 4 ? 1 : 0));
    CHECK(map.kv_layer[static_cast<size_t>(l)] == (l % 5 != 4 ? 11 : 2));
  }
  CHECK(map.layer_index[13] == 11);
  CHECK(map.layer_index[14] == 2);
  // The groups' layouts have their own head sizes.
  auto g0 = c->kv_group_layout(0, 16, kv::KvFormat::f16, kv::KvFormat::f16);
  auto g1 = c->kv_group_layout(1, 16, kv::KvFormat::f16, kv::KvFormat::f16);
  REQUIRE(g0.ok());
  REQUIRE(g1.ok());
  CHECK(g0->head_dim == 512);
  CHECK(g1->head_dim == 256);
  CHECK(g0->block_bytes + g1->block_bytes == 16 * 18432);
}

TEST_CASE("gemma4 config: wrong producers, the MoE variant and a short pattern are refused by name", "[core]") {
  gguf::GgufWriter w = gemma4_e2b();
  w.set_u32("gemma4.attention.shared_kv_layers", 19);  // n_kv 16: layer 16 (local) would read layer 14 (global)
  auto p = config_of(w);
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(p.error().what(), Catch::Contains("gemma4.attention.shared_kv_layers"));
  CHECK_THAT(p.error().what(), Catch::Contains("reads layer 14"));
  w = gemma4_e2b();
  w.set_u32("gemma4.expert_count", 128);
  auto moe = config_of(w);
  REQUIRE_FALSE(moe.ok());
  CHECK(moe.error().code == ErrorCode::unsupported);
  CHECK_THAT(moe.error().what(), Catch::Contains("26B-A4B"));
  w = gemma4_e2b();
  w.set_vector("gemma4.attention.sliding_window_pattern", std::vector<bool>{true, false});
  auto pat = config_of(w);
  REQUIRE_FALSE(pat.ok());
  CHECK_THAT(pat.error().what(), Catch::Contains("2 values for 35 layers"));
  w = gemma4_e2b();
  w.erase("gemma4.attention.key_length_swa");
  auto swa = config_of(w);
  REQUIRE_FALSE(swa.ok());
  CHECK_THAT(swa.error().what(), Catch::Contains("key_length_swa"));
}

TEST_CASE("gemma4: logits match llama.cpp's over 203 positions, past the window, through shared layers",
          "[core][e2e]") {
  const test::Agreement a = test::against_llama("tiny-gemma4-f16", test::model_path("tiny-gemma4-f16.gguf"));
  INFO("worst rel_rms " << a.worst_rel_rms << ", top-1 " << a.top1_agree << "/" << a.top1_checked);
  CHECK(a.worst_rel_rms <= 0.02);
  CHECK(a.top1_agree == a.top1_checked);
  CHECK(a.top1_checked >= 25);
}

TEST_CASE("gemma4: the shared layers read their producers' K/V and compute none of their own", "[core][e2e]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma4-f16.gguf"), *be);
  INFO((m.ok() ? std::string() : m.error().what()));
  REQUIRE(m.ok());
  const model::ModelConfig& c = (*m)->config();
  REQUIRE(c.n_layer_kv() == 6);  // layers 6, 7 (local) and 8 (global) read layers 4 and 5
  const std::vector<int32_t> tokens = test::token_stream(200, 2);
  const std::vector<float> want = test::uncached_logits(**m, tokens);
  const int64_t n_vocab = c.n_vocab;
  SECTION("their own K/V weights are never read: scrambled, the logits stay the same bit for bit") {
    const std::string path = variant(
        "tiny-gemma4-f16", tmp, [](gguf::GgufWriter&) {}, {},
        [](const std::string& name, std::vector<uint8_t>& bytes) {
          for (const char* l : {"blk.6.", "blk.7.", "blk.8."}) {
            if (name.rfind(l, 0) == 0 &&
                (name.find("attn_k") != std::string::npos || name.find("attn_v") != std::string::npos)) {
              for (size_t i = 0; i < bytes.size(); i += 2) bytes[i] ^= 0x5a;
            }
          }
        });
    auto scrambled = model::Model::load(path, *be);
    REQUIRE(scrambled.ok());
    CHECK(test::last_row_diff(test::uncached_logits(**scrambled, tokens), want, tokens.size(), n_vocab) == 0.0);
  }
  SECTION("without sharing (the same weights, each layer its own K/V) the logits differ") {
    const std::string path =
        variant("tiny-gemma4-f16", tmp, [](gguf::GgufWriter& w) { w.set_u32("gemma4.attention.shared_kv_layers", 0); });
    auto plain = model::Model::load(path, *be);
    REQUIRE(plain.ok());
    REQUIRE(plain.value()->config().n_layer_kv() == 9);
    CHECK(test::last_row_diff(test::uncached_logits(**plain, tokens), want, tokens.size(), n_vocab) > 1e-3);
  }
}

TEST_CASE("gemma4: a backend other than the CPU's refuses the model, saying so", "[core]") {
  test::NoMoeBackend be;
  auto m = model::Model::load(test::model_path("tiny-gemma4-f16.gguf"), be);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == ErrorCode::unsupported);
  CHECK_THAT(m.error().what(), Catch::Contains("gemma4"));
  CHECK_THAT(m.error().what(), Catch::Contains("--backend cpu"));
}

// Four turns from T0, a round trip through T1, a restart over the same store: every logit the
// same as an uncached run's, bit for bit (F16 KV), none recomputed; the disk holds K/V of the
// storing layers only (the shared layers add nothing).
TEST_CASE("gemma4: the cache serves four turns, T1 and a restart from disk, and disk bytes follow the sharing",
          "[core][kv][e2e]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma4-f16.gguf"), *be);
  REQUIRE(m.ok());
  const std::string store = (tmp.path() / "kv").string();
  test::check_turns_t1_and_restart(**m, store);
  const model::ModelConfig& c = (*m)->config();
  // Group 0: the storing global layers 2 and 5 (heads of 128), every block; group 1: the storing
  // local layers 0, 1, 3, 4 (heads of 64), kept on disk as turn checkpoints only.
  auto g0 = c.kv_group_layout(0, 16, kv::KvFormat::f16, kv::KvFormat::f16);
  auto g1 = c.kv_group_layout(1, 16, kv::KvFormat::f16, kv::KvFormat::f16);
  REQUIRE(g0.ok());
  REQUIRE(g1.ok());
  CHECK(g0->block_bytes == 16 * (2 * 2 * 128 * 2));  // 2 layers, K and V, one head of 128, F16
  CHECK(g1->block_bytes == 16 * (4 * 2 * 64 * 2));
  CHECK(c.kv_bytes_per_token(2.0) == 2.0 * (2 * 128 + 4 * 64) * 2.0);
  auto cold = storage::SqliteColdStore::open(store);
  REQUIRE(cold.ok());
  const kv::ColdStoreStats st = (*cold)->stats();
  // 400 positions of group 0 in 25 blocks; the rest of the blocks are group 1's checkpoints.
  const int64_t full_blocks = 400 / 16;
  REQUIRE(st.n_blocks > full_blocks);
  CHECK(st.used_bytes == full_blocks * g0->block_bytes + (st.n_blocks - full_blocks) * g1->block_bytes);
}

TEST_CASE("gemma4: the per-layer embedding table is read from the mapped file, not copied", "[core]") {
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(test::model_path("tiny-gemma4-f16.gguf"), *be);
  REQUIRE(m.ok());
  const kernels::MatrixView& t = (*m)->weights().per_layer_token_embd.view;
  const std::span<const uint8_t> data = (*m)->file().data_section();
  const auto* p = static_cast<const uint8_t*>(t.data);
  REQUIRE(p != nullptr);
  CHECK(t.n_rows == (*m)->config().n_vocab);
  CHECK(t.n_cols == 9 * 64);
  CHECK(p >= data.data());
  CHECK(p < data.data() + data.size());
}
