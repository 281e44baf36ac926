// gpt-oss: its keys as kvchat reads them (gpt-oss-20b's shape), logits of the tiny gpt-oss files
// against llama.cpp's, what removing the sinks, the window or YaRN does to them, cached == uncached.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/model_config.h"
#include "core/model/session.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// gpt-oss-20b's metadata as its GGUF conversions carry it (config.json on Hugging Face), no
// tensors, a small vocabulary.
gguf::GgufWriter gpt_oss_20b() {
  gguf::GgufWriter w;
  const std::string a = "gpt-oss.";
  w.set_string("general.architecture", "gpt-oss");
  w.set_u32(a + "block_count", 24);
  w.set_u32(a + "context_length", 131072);
  w.set_u32(a + "embedding_length", 2880);
  w.set_u32(a + "feed_forward_length", 2880);
  w.set_u32(a + "attention.head_count", 64);
  w.set_u32(a + "attention.head_count_kv", 8);
  w.set_u32(a + "attention.key_length", 64);
  w.set_u32(a + "attention.value_length", 64);
  w.set_u32(a + "attention.sliding_window", 128);
  w.set_f32(a + "rope.freq_base", 150000.0f);
  w.set_string(a + "rope.scaling.type", "yarn");
  w.set_f32(a + "rope.scaling.factor", 32.0f);
  w.set_u32(a + "rope.scaling.original_context_length", 4096);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32(a + "expert_count", 32);
  w.set_u32(a + "expert_used_count", 4);
  w.set_u32(a + "expert_feed_forward_length", 2880);
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(std::to_string(1000 + i));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  return w;
}

using test::against_llama;
using test::Agreement;
using test::config_of;

}  // namespace

TEST_CASE("gpt-oss config: gpt-oss-20b's local and global layers, YaRN, router and activation", "[core]") {
  auto c = config_of(gpt_oss_20b());
  INFO((c.ok() ? std::string() : c.error().what()));
  REQUIRE(c.ok());
  CHECK(c->gpt_oss);
  CHECK(c->is_moe());
  CHECK(c->n_expert == 32);
  CHECK(c->n_expert_used == 4);
  CHECK(c->n_ff_exp == 2880);
  CHECK(c->head_dim == 64);
  CHECK(c->q_width() == 4096);  // wider than the model, as the real one
  CHECK(c->qkv_bias);
  CHECK_FALSE(c->qk_norm);
  CHECK_FALSE(c->gemma);
  CHECK_FALSE(c->rope.interleaved);  // neox halves
  // llama.cpp's pattern: with period 2, layer l slides when l % 2 < 1: even layers local, odd global.
  CHECK(c->local_window == 128);
  CHECK(c->sliding_window == 0);
  for (int64_t l = 0; l < 24; ++l) {
    INFO("layer " << l);
    CHECK(c->layer_is_local(l) == (l % 2 == 0));
    CHECK(c->layer_window(l) == (l % 2 == 0 ? 128 : 0));
  }
  CHECK(c->n_kv_groups() == 2);
  // YaRN with ggml's bounds for 64 dims, base 150000 over 4096 positions: pairs below
  // floor(8.09) keep their frequency, above ceil(17.4) are scaled by 1/32; cos and sin by
  // 1 + 0.1 ln 32.
  CHECK(c->rope.yarn);
  CHECK(c->rope.freq_scale == 1.0f / 32.0f);
  CHECK(c->rope.yarn_low == 8.0f);
  CHECK(c->rope.yarn_high == 18.0f);
  CHECK(c->rope.attn_factor == Approx(1.0 + 0.1 * std::log(32.0)));
  CHECK(c->rope_local.yarn);
  CHECK(c->rope_local.freq_base == c->rope.freq_base);
  CHECK(c->rope_local.attn_factor == c->rope.attn_factor);
  // The router: a softmax over the chosen experts' logits, unnormalised, whatever the key says.
  const kernels::MoeRouting& r = c->routing;
  CHECK(r.gating == kernels::MoeGating::softmax_weight);
  CHECK_FALSE(r.norm_weights);
  CHECK(r.weights_scale == 0.0f);
  gguf::GgufWriter w = gpt_oss_20b();
  w.set_u32("gpt-oss.expert_gating_func", 1);
  CHECK(config_of(w)->routing.gating == kernels::MoeGating::softmax_weight);
  // A window pattern and a local rope base where the file has them.
  w.set_u32("gpt-oss.attention.sliding_window_pattern", 3);
  w.set_f32("gpt-oss.rope.freq_base_swa", 10000.0f);
  auto d = config_of(w);
  REQUIRE(d.ok());
  CHECK(d->layer_is_local(0));
  CHECK(d->layer_is_local(1));
  CHECK_FALSE(d->layer_is_local(2));
  CHECK(d->rope_local.freq_base == 10000.0f);
  CHECK(d->rope_local.yarn_high == 23.0f);  // the bounds follow the base: ceil(22.5) for 10000
  // No window: refused, naming the key. YaRN is gpt-oss's only (other architectures refuse it).
  w = gpt_oss_20b();
  w.erase("gpt-oss.attention.sliding_window");
  auto nw = config_of(w);
  REQUIRE_FALSE(nw.ok());
  CHECK_THAT(nw.error().what(), Catch::Contains("gpt-oss.attention.sliding_window"));
}

TEST_CASE("gpt-oss: the tiny files' logits match llama.cpp's", "[core][e2e]") {
  // 2 layers (one local of window 32, one global) of 8 experts of 128, 2 per token; 203 positions
  // of stories260K's vocabulary, past the window (every 4th row kept). F16: experts of std 0.3,
  // so their gates and ups pass the clamp often; MXFP4: llama.cpp's MXFP4_MOE mix (experts MXFP4,
  // the rest Q8_0). Measured worst rows in the comments; top-1 checked where llama.cpp's lead
  // exceeds twice our largest error in the row.
  struct Case {
    const char* file;
    double max_rel_rms;
  };
  const Case cases[] = {{"tiny-gpt-oss-f16", 0.02}, {"tiny-gpt-oss-mxfp4", 0.02}};
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.file) {
      const Agreement a = against_llama(c.file, test::model_path(std::string(c.file) + ".gguf"));
      INFO(c.file << ": worst rel_rms " << a.worst_rel_rms << ", top-1 " << a.top1_agree << " / " << a.top1_checked
                  << " of " << a.rows);
      CHECK(a.worst_rel_rms < c.max_rel_rms);
      CHECK(a.top1_agree == a.top1_checked);
      CHECK(a.top1_checked >= a.rows / 2);
      CHECK(a.rows >= 50);
    }
  }
}

TEST_CASE("gpt-oss: without its sinks, window or YaRN the logits miss llama.cpp's by far", "[core][e2e]") {
  struct Variant {
    const char* what;
    std::function<void(gguf::GgufWriter&)> edit_meta;
    std::function<void(const std::string&, std::vector<uint8_t>&)> edit_data;
  };
  const auto no_sinks = [](const std::string& name, std::vector<uint8_t>& bytes) {
    if (name.find("attn_sinks") == std::string::npos) return;
    const float off = -1e4f;  // exp(-1e4): a sink that takes nothing
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) std::memcpy(bytes.data() + i, &off, 4);
  };
  const Variant variants[] = {
      {"sinks taken out", [](gguf::GgufWriter&) {}, no_sinks},
      {"window opened", [](gguf::GgufWriter& w) { w.set_u32("gpt-oss.attention.sliding_window", 4096); }, {}},
      {"YaRN factor 1", [](gguf::GgufWriter& w) { w.set_f32("gpt-oss.rope.scaling.factor", 1.0f); }, {}},
  };
  test::TempDir tmp;
  for (const Variant& v : variants) {
    DYNAMIC_SECTION(v.what) {
      const Agreement a =
          against_llama("tiny-gpt-oss-f16", test::variant("tiny-gpt-oss-f16", tmp, v.edit_meta, {}, v.edit_data));
      INFO(v.what << ": worst rel_rms " << a.worst_rel_rms);
      CHECK(a.worst_rel_rms > 0.1);
    }
  }
}

TEST_CASE("gpt-oss: cached logits equal uncached ones across turns and through T1", "[core][e2e]") {
  // Both KV groups (local and global layers), prefill in chunks of 16, F16 KV: bit-identical.
  for (const char* file : {"tiny-gpt-oss-f16.gguf", "tiny-gpt-oss-mxfp4.gguf"}) {
    DYNAMIC_SECTION(file) {
      auto be = backend::make_cpu_backend(2);
      auto m = model::Model::load(test::model_path(file), *be);
      REQUIRE(m.ok());
      REQUIRE((*m)->config().n_kv_groups() == 2);
      test::check_turns_equal_uncached(**m);
    }
  }
}
