// Gemma 2 / 3: their hyperparameters as kvchat reads them (real model shapes), KV bytes per
// layer group, and a Gemma-3-shaped model's cached logits equal to its uncached ones.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/backend/backend.h"
#include "core/engine/engine.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/kv_setup.h"
#include "core/model/model.h"
#include "core/model/model_config.h"
#include "core/model/session.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// The metadata of a Gemma model (no tensors: ModelConfig::from_gguf reads none), with a small
// vocabulary: the KV figures do not depend on it.
struct Shape {
  std::string arch;
  uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, window, n_ctx;
  float rope_base, rope_linear;  // rope_linear 0: no rope.scaling keys
};

gguf::GgufWriter gemma_metadata(const Shape& s) {
  gguf::GgufWriter w;
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_u32(a + "block_count", s.n_layer);
  w.set_u32(a + "embedding_length", s.n_embd);
  w.set_u32(a + "attention.head_count", s.n_head);
  w.set_u32(a + "attention.head_count_kv", s.n_head_kv);
  w.set_u32(a + "attention.key_length", s.head_dim);
  w.set_u32(a + "attention.value_length", s.head_dim);
  w.set_u32(a + "feed_forward_length", s.n_ff);
  w.set_u32(a + "context_length", s.n_ctx);
  if (s.window > 0) w.set_u32(a + "attention.sliding_window", s.window);
  w.set_f32(a + "rope.freq_base", s.rope_base);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (s.rope_linear > 0) {
    w.set_string(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", s.rope_linear);
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(std::to_string(1000 + i));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  return w;
}

// Real hyperparameters (the models' config.json on Hugging Face, as their GGUF conversions
// carry them): Gemma 3 1B and 4B, Gemma 2 2B.
const Shape k_gemma3_1b{"gemma3", 26, 1152, 4, 1, 256, 6912, 512, 32768, 1e6f, 0};
const Shape k_gemma3_4b{"gemma3", 34, 2560, 8, 4, 256, 10240, 1024, 131072, 1e6f, 8};
const Shape k_gemma2_2b{"gemma2", 26, 2304, 8, 4, 256, 9216, 4096, 8192, 1e4f, 0};

using test::config_of;

}  // namespace

TEST_CASE("gemma config: Gemma 3 1B and 4B have five local layers per global one, their own rope and KV per group",
          "[core]") {
  auto c1 = config_of(gemma_metadata(k_gemma3_1b));
  INFO((c1.ok() ? std::string() : c1.error().what()));
  REQUIRE(c1.ok());
  // The sixth layer of every six is global: 5, 11, 17, 23 of 26.
  std::vector<int64_t> global;
  for (int64_t l = 0; l < c1->n_layer; ++l) {
    if (!c1->layer_is_local(l)) global.push_back(l);
  }
  CHECK(global == std::vector<int64_t>{5, 11, 17, 23});
  CHECK(c1->n_local_layers() == 22);
  CHECK(c1->gemma);
  CHECK(c1->local_window == 512);
  CHECK(c1->layer_window(0) == 512);
  CHECK(c1->layer_window(5) == 0);
  // No whole-model window: the cache must keep the global layers' old positions.
  CHECK(c1->sliding_window == 0);
  CHECK(c1->layer_rope(0).freq_base == 10000.0f);
  CHECK(c1->layer_rope(5).freq_base == 1e6f);
  CHECK_FALSE(c1->rope.interleaved);       // split halves (neox), as llama.cpp ropes Gemma
  CHECK(c1->query_scale == 1.0f / 16.0f);  // 1 / sqrt(key_length 256)
  CHECK(c1->attn_softcap == 0.0f);
  CHECK(c1->final_softcap == 0.0f);
  // F16 K and V: one KV head of 256 per layer is 1 KiB per token and layer.
  CHECK(c1->kv_bytes_per_token(2.0) == 26 * 1024.0);
  CHECK(c1->kv_bytes_per_token_local(2.0) == 22 * 1024.0);
  CHECK(c1->kv_bytes_per_token_global(2.0) == 4 * 1024.0);
  // A full 32K context: 832 MiB with every layer's positions, 139 MiB with only the window of
  // the local layers (the global layers' 128 MiB plus 22 layers x 512 positions).
  CHECK(c1->kv_bytes_per_token(2.0) * 32768 == 872415232.0);
  CHECK(c1->kv_bytes_window_aware(2.0, 32768) == 4096.0 * 32768 + 22528.0 * 512);
  CHECK(c1->kv_bytes_window_aware(2.0, 300) == c1->kv_bytes_per_token(2.0) * 300);  // inside the window

  auto c4 = config_of(gemma_metadata(k_gemma3_4b));
  REQUIRE(c4.ok());
  CHECK(c4->n_local_layers() == 29);
  CHECK(c4->local_window == 1024);
  // Linear scaling 8 on the global layers only.
  CHECK(c4->layer_rope(5).freq_scale == 0.125f);
  CHECK(c4->layer_rope(4).freq_scale == 1.0f);
  CHECK(c4->layer_rope(4).freq_base == 10000.0f);
  CHECK(c4->kv_bytes_per_token_local(2.0) == 29 * 4096.0);
  CHECK(c4->kv_bytes_per_token_global(2.0) == 5 * 4096.0);
}

TEST_CASE("gemma config: Gemma 2 alternates local and global layers and caps scores and logits", "[core]") {
  auto c = config_of(gemma_metadata(k_gemma2_2b));
  REQUIRE(c.ok());
  CHECK(c->n_local_layers() == 13);
  CHECK(c->layer_is_local(0));
  CHECK_FALSE(c->layer_is_local(1));
  CHECK(c->local_window == 4096);
  CHECK(c->sliding_window == 0);
  // llama.cpp's defaults where the file has no caps; the local layers keep the global base.
  CHECK(c->attn_softcap == 50.0f);
  CHECK(c->final_softcap == 30.0f);
  CHECK(c->layer_rope(0).freq_base == 10000.0f);

  // The 27B models scale queries by n_embd / n_head instead of the head size.
  Shape s27 = k_gemma2_2b;
  s27.n_layer = 46;
  s27.n_embd = 4608;
  s27.n_head = 32;
  s27.head_dim = 128;
  auto c27 = config_of(gemma_metadata(s27));
  REQUIRE(c27.ok());
  CHECK(c27->query_scale == 1.0f / std::sqrt(144.0f));

  // The file's own keys win: caps, the period, the local rope base.
  auto w = gemma_metadata(k_gemma2_2b);
  w.set_f32("gemma2.attn_logit_softcapping", 20.0f);
  w.set_u32("gemma2.attention.sliding_window_pattern", 3);
  w.set_f32("gemma2.rope.freq_base_swa", 5000.0f);
  auto own = config_of(w);
  REQUIRE(own.ok());
  CHECK(own->attn_softcap == 20.0f);
  CHECK(own->n_local_layers() == 18);  // two of every three
  CHECK(own->layer_rope(0).freq_base == 5000.0f);
  CHECK(own->layer_rope(2).freq_base == 10000.0f);
}

TEST_CASE("gemma config: a bad layer pattern or window is refused, naming the key", "[core]") {
  auto w = gemma_metadata(k_gemma3_1b);
  w.set_u32("gemma3.attention.sliding_window_pattern", 0);
  auto c = config_of(w);
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.error().what(), Catch::Contains("gemma3.attention.sliding_window_pattern"));

  auto list = gemma_metadata(k_gemma3_1b);
  list.set_string("gemma3.attention.sliding_window_pattern", "6");
  auto cl = config_of(list);
  REQUIRE_FALSE(cl.ok());
  CHECK(cl.error().code == ErrorCode::unsupported);
  CHECK_THAT(cl.error().what(), Catch::Contains("sliding_window_pattern"));

  auto huge = gemma_metadata(k_gemma3_1b);
  huge.set_u32("gemma3.attention.sliding_window", 0xffffffffu);
  auto ch = config_of(huge);
  REQUIRE_FALSE(ch.ok());
  CHECK_THAT(ch.error().what(), Catch::Contains("gemma3.attention.sliding_window"));

  // Gemma 3 without a window: every layer global (and, as llama.cpp's graph does, capped logits).
  Shape none = k_gemma3_1b;
  none.window = 0;
  auto cn = config_of(gemma_metadata(none));
  REQUIRE(cn.ok());
  CHECK(cn->n_local_layers() == 0);
  CHECK(cn->final_softcap == 30.0f);
}

TEST_CASE("gemma3-shaped model: cached logits equal uncached ones across turns, the window edge and T1",
          "[core][e2e]") {
  // tiny-gemma3-f16: 5 local layers (window 64) and a global one, F16 KV. The global group must
  // keep every block (its layer reads them all); the local group retires what is behind its window.
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  INFO((m.ok() ? std::string() : m.error().what()));
  REQUIRE(m.ok());
  const int64_t n_vocab = (*m)->config().n_vocab;
  std::vector<int32_t> stream = {1};
  for (int i = 1; i < 230; ++i) stream.push_back(2 + (i * 131) % 500);

  auto fresh = model::Session::create(**m, 256);
  REQUIRE(fresh.ok());
  auto all = fresh->evaluate_all(stream);
  REQUIRE(all.ok());
  const std::vector<float> want(all->begin(), all->end());
  // Two KV groups: the global layer's 15 blocks of 230 positions are all held (none retired
  // behind the local window); the local layers' sequence holds only its window.
  REQUIRE(fresh->cache().n_groups() == 2);
  CHECK(fresh->cache().tier_usage(kv::Tier::t0, 0).used_blocks == 15);
  CHECK(fresh->cache().group(0).sequence_table().sequences().begin()->second.table.n_retired == 0);
  CHECK(fresh->cache().group(1).sequence_table().sequences().begin()->second.table.n_retired == 10);

  // Turns of 50 tokens, each reusing the previous turns' KV (the first turn ends inside the
  // window, the later ones far past it), in prefill chunks of 16.
  model::SessionOptions o;
  o.n_ctx = 256;
  o.n_batch = 16;
  o.budget.t1_bytes =
      32 * (fresh->cache().group(0).layout().block_bytes + fresh->cache().group(1).layout().block_bytes);
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  auto check_last = [&](std::span<const float> got, size_t n) {
    REQUIRE(got.size() >= static_cast<size_t>(n_vocab));
    double max_diff = 0;
    for (int64_t v = 0; v < n_vocab; ++v) {
      const double a = got[got.size() - static_cast<size_t>(n_vocab) + static_cast<size_t>(v)];
      const double b = want[(n - 1) * static_cast<size_t>(n_vocab) + static_cast<size_t>(v)];
      max_diff = std::max(max_diff, std::abs(a - b));
    }
    // F16 KV either way and the same kernels: chunking changes no per-token arithmetic.
    CHECK(max_diff == 0.0);
  };
  for (size_t n = 50; n <= stream.size(); n += 50) {
    auto l = s->evaluate(std::span(stream).first(n));
    INFO("after " << n << " tokens");
    REQUIRE(l.ok());
    CHECK(s->n_reused() == static_cast<int64_t>(n - 50));
    check_last(*l, n);
    REQUIRE(s->cache().check_invariants().ok());
  }
  // Through T1 and back: the whole blocks of the 200 tokens held come back from T1 (every one,
  // from before the window edge too), and the logits are the same.
  s->clear();
  s->cache().demote_all_unpinned(kv::Tier::t1);
  auto back = s->evaluate(stream);
  REQUIRE(back.ok());
  CHECK(s->n_reused() == 192);
  check_last(*back, stream.size());
}

TEST_CASE("gemma3-shaped model: the engine's greedy turns match a fresh session's", "[core][e2e][engine]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  model::KvSetup ks;
  ks.t0_tokens = 512;
  auto cache = model::create_kv_cache(**m, ks);
  REQUIRE(cache.ok());
  engine::Engine eng(**m, **cache);
  engine::RequestOptions ro;
  ro.max_tokens = 24;
  ro.sampling.temperature = 0;
  ro.sampling.repeat_penalty = 1.0f;
  ro.stop_at_eog = false;
  auto solo = [&](const std::vector<int32_t>& prompt) {
    auto s = model::Session::create(**m, 512);
    REQUIRE(s.ok());
    model::GenerateOptions g = test::greedy_options(24);
    g.stop_at_eog = false;
    auto r = model::generate(*s, prompt, g);
    REQUIRE(r.ok());
    return r->tokens;
  };
  // Turn 1: 120 tokens (past the window of 64); turn 2 adds the reply and 60 more tokens.
  std::vector<int32_t> prompt = {1};
  for (int i = 1; i < 120; ++i) prompt.push_back(2 + (i * 37) % 500);
  const auto first = eng.submit({1, prompt, ro, {}, {}});
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  auto r1 = eng.result(first);
  REQUIRE(r1);
  REQUIRE(r1->state == engine::RequestState::finished);
  CHECK(r1->tokens == solo(prompt));
  prompt.insert(prompt.end(), r1->tokens.begin(), r1->tokens.end());
  for (int i = 0; i < 60; ++i) prompt.push_back(3 + (i * 53) % 500);
  const auto second = eng.submit({1, prompt, ro, {}, {}});
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  auto r2 = eng.result(second);
  REQUIRE(r2);
  REQUIRE(r2->state == engine::RequestState::finished);
  CHECK(r2->prefix.n_cached >= 128);  // turn 1's whole blocks, from before the window edge too
  CHECK(r2->tokens == solo(prompt));
}
