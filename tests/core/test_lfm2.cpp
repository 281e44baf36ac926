// lfm2: its layer pattern as kvchat reads it (LFM2-1.2B's shape), logits against llama.cpp's, chunked
// prefill against token-by-token decode, and its conv states cached as a recurrent KV group: cached ==
// uncached across turns, T1, a restart, an edit inside a block, and a random replay of the cache.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "core/backend/backend.h"
#include "core/engine/engine.h"
#include "core/gguf/gguf_writer.h"
#include "core/kv/kv_group_spec.h"
#include "core/model/kv_setup.h"
#include "core/model/model.h"
#include "core/model/model_config.h"
#include "core/model/session.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/no_moe_backend.h"
#include "support/restart_check.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

using test::config_of;
using test::last_row_diff;
using test::token_stream;
using test::uncached_logits;

// LFM2-1.2B's metadata as llama.cpp's converter writes it (config.json on Hugging Face), no
// tensors, a small vocabulary.
gguf::GgufWriter lfm2_1_2b() {
  gguf::GgufWriter w;
  const std::string a = "lfm2.";
  w.set_string("general.architecture", "lfm2");
  w.set_u32(a + "block_count", 16);
  w.set_u32(a + "context_length", 128000);
  w.set_u32(a + "embedding_length", 2048);
  w.set_u32(a + "feed_forward_length", 8192);
  w.set_u32(a + "attention.head_count", 32);
  std::vector<int32_t> kv;
  for (int l = 0; l < 16; ++l) kv.push_back(l == 2 || l == 5 || l == 8 || l == 10 || l == 12 || l == 14 ? 8 : 0);
  w.set_vector(a + "attention.head_count_kv", kv);
  w.set_f32(a + "rope.freq_base", 1000000.0f);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32(a + "shortconv.l_cache", 3);
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(std::to_string(1000 + i));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  return w;
}

std::string tiny_lfm2() { return test::model_path("tiny-lfm2-f16.gguf"); }

}  // namespace

TEST_CASE("lfm2 config: LFM2-1.2B has 6 attention layers in a full group and 10 conv layers in a recurrent one",
          "[core]") {
  auto c = config_of(lfm2_1_2b());
  INFO((c.ok() ? std::string() : c.error().what()));
  REQUIRE(c.ok());
  CHECK(c->lfm2);
  CHECK(c->n_head_kv == 8);
  CHECK(c->head_dim == 64);
  CHECK(c->shortconv_l_cache == 3);
  CHECK(c->qk_norm);
  CHECK_FALSE(c->rope.interleaved);  // NeoX halves, as llama.cpp's lfm2
  CHECK(c->n_recurrent_layers() == 10);
  CHECK_FALSE(c->layer_is_recurrent(2));
  CHECK(c->layer_is_recurrent(3));
  // A sequence's state: 2 earlier gated inputs of 2048 floats in each of 10 layers, 160 KiB.
  CHECK(c->recurrent_state_bytes() == 10 * 2 * 2048 * 4);
  // K and V of the 6 attention layers only: 6 x 2 x 8 x 64 x 2 bytes a token in F16.
  CHECK(c->kv_bytes_per_token(2.0) == 6.0 * 2 * 8 * 64 * 2);
  const model::KvGroupMap map = c->kv_group_map();
  REQUIRE(map.groups.size() == 2);
  CHECK(map.groups[0].kind == kv::KvGroupKind::full);
  CHECK(map.groups[0].n_layer == 6);
  CHECK(map.groups[1].kind == kv::KvGroupKind::recurrent);
  CHECK(map.groups[1].n_layer == 10);
  CHECK(map.groups[1].state_bytes == c->recurrent_state_bytes());
  CHECK(map.kv_layer[5] == 1);  // the second attention layer
  CHECK(map.kv_layer[4] == 3);  // the fourth conv layer
  // The recurrent group's blocks hold one F32 state a layer, whatever B is.
  auto state = c->kv_group_layout(1, 16, kv::KvFormat::f16, kv::KvFormat::f16);
  REQUIRE(state.ok());
  CHECK(state->state);
  CHECK(state->block_bytes == c->recurrent_state_bytes());
  auto attn = c->kv_group_layout(0, 16, kv::KvFormat::f16, kv::KvFormat::f16);
  REQUIRE(attn.ok());
  CHECK(attn->block_bytes == 16 * 6 * 2 * 8 * 64 * 2);
}

TEST_CASE(
    "lfm2 config: a scalar head_count_kv, attention layers that disagree, no l_cache, a sliding window are refused",
    "[core]") {
  gguf::GgufWriter w = lfm2_1_2b();
  w.set_u32("lfm2.attention.head_count_kv", 8);
  auto scalar = config_of(w);
  REQUIRE_FALSE(scalar.ok());
  CHECK_THAT(scalar.error().what(), Catch::Contains("lfm2.attention.head_count_kv"));
  w = lfm2_1_2b();
  std::vector<int32_t> kv(16, 0);
  kv[2] = 8;
  kv[5] = 4;
  w.set_vector("lfm2.attention.head_count_kv", kv);
  auto mixed = config_of(w);
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.error().code == ErrorCode::unsupported);
  w = lfm2_1_2b();
  w.erase("lfm2.shortconv.l_cache");
  auto no_cache = config_of(w);
  REQUIRE_FALSE(no_cache.ok());
  CHECK_THAT(no_cache.error().what(), Catch::Contains("lfm2.shortconv.l_cache"));
  // A sliding window on the attention layers (llama.cpp honours it): refused, not run in full.
  w = lfm2_1_2b();
  w.set_u32("lfm2.attention.sliding_window", 512);
  auto swa = config_of(w);
  REQUIRE_FALSE(swa.ok());
  CHECK(swa.error().code == ErrorCode::unsupported);
  CHECK_THAT(swa.error().what(), Catch::Contains("sliding window"));
  w.set_u32("lfm2.attention.sliding_window", 0);  // none
  CHECK(config_of(w).ok());
}

TEST_CASE("lfm2 tokenizer: pre-tokenizer lfm2 splits as llama3's and adds BOS, as llama.cpp reads it", "[core]") {
  auto lfm2 = tokenizer::PreTokenizer::create("lfm2");
  auto llama3 = tokenizer::PreTokenizer::create("llama-bpe");
  REQUIRE(lfm2.ok());
  REQUIRE(llama3.ok());
  CHECK(lfm2->default_add_bos());  // llama.cpp: add_bos for lfm2, as for llama3
  const std::string text = "Hello, world! It's 12345 o'clock\n\n  <|im_start|>user\nnaïve café 😀";
  std::vector<std::string_view> a, b;
  lfm2->split(text, a);
  llama3->split(text, b);
  CHECK(a == b);
  CHECK(a.size() > 10);
}

TEST_CASE("lfm2: logits match llama.cpp's over 203 positions", "[core][e2e]") {
  const test::Agreement a = test::against_llama("tiny-lfm2-f16", tiny_lfm2());
  INFO("worst rel_rms " << a.worst_rel_rms << ", top-1 " << a.top1_agree << "/" << a.top1_checked);
  CHECK(a.worst_rel_rms <= 0.02);
  CHECK(a.top1_agree == a.top1_checked);
  CHECK(a.top1_checked >= 25);
}

TEST_CASE("lfm2: a backend without the short-convolution op (CUDA) refuses the model by name", "[core]") {
  test::NoMoeBackend be;  // the CPU backend's ops without its CPU-only ones, as CUDA shows them
  auto m = model::Model::load(tiny_lfm2(), be);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == ErrorCode::unsupported);
  CHECK_THAT(m.error().what(), Catch::Contains("short-convolution layers") && Catch::Contains("--backend cpu"));
}

TEST_CASE("lfm2: chunked prefill gives the logits of token-by-token decode", "[core][e2e]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(tiny_lfm2(), *be);
  REQUIRE(m.ok());
  const int64_t n_vocab = (*m)->config().n_vocab;
  const std::vector<int32_t> prompt = token_stream(120, 3);
  const std::vector<float> chunked = uncached_logits(**m, prompt);  // chunks of the session's batch
  auto s = model::Session::create(**m, 256, 1);
  REQUIRE(s.ok());
  double worst = 0;
  for (size_t n = 1; n <= prompt.size(); ++n) {
    auto l = s->evaluate(std::span(prompt).first(n));  // one more token each time
    REQUIRE(l.ok());
    REQUIRE(s->n_evaluated() == 1);
    worst = std::max(worst, last_row_diff(*l, chunked, n, n_vocab));
  }
  INFO("largest difference " << worst);
  CHECK(worst <= 1e-3);
}

TEST_CASE("lfm2: cached logits equal uncached ones across turns, T1 and a restart, the state in its blocks",
          "[core][e2e]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(tiny_lfm2(), *be);
  REQUIRE(m.ok());
  test::check_turns_equal_uncached(**m);
  test::TempDir tmp;
  // The whole 400 cached on T1: its last token is recomputed, and the conv state before it exists
  // only as the snapshot at 384, so 15 positions are recomputed (the attention layers had 399).
  test::check_turns_t1_and_restart(**m, (tmp.path() / "kv").string(), 384);
}

TEST_CASE("lfm2: an edit or a branch inside a block resumes from the block's start, n_recomputed exact",
          "[core][e2e]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(tiny_lfm2(), *be);
  REQUIRE(m.ok());
  const int64_t n_vocab = (*m)->config().n_vocab;
  model::SessionOptions o;
  o.n_ctx = 512;
  o.n_batch = 16;
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  const std::vector<int32_t> a = token_stream(200, 1);
  REQUIRE(s->evaluate(a).ok());
  // Edit the token at 101: positions [0, 101) are the same, 101 is 5 into block 6 ([96, 112)).
  std::vector<int32_t> b = a;
  b[101] = 7;
  const std::vector<float> want_b = uncached_logits(**m, b);
  auto lb = s->evaluate(b);
  REQUIRE(lb.ok());
  CHECK(s->n_reused() == 96);                        // the conv states exist at 96, not at 101
  CHECK(s->last_prefix().n_recomputed == 101 - 96);  // the attention layers had 101
  CHECK(last_row_diff(*lb, want_b, b.size(), n_vocab) == 0.0);
  REQUIRE(s->cache().check_invariants().ok());
  // Branch back to the first history, longer: its blocks are in the index up to 192.
  std::vector<int32_t> a2 = a;
  for (int32_t t : token_stream(30, 2)) a2.push_back(t);
  const std::vector<float> want_a2 = uncached_logits(**m, a2);
  auto la = s->evaluate(a2);
  REQUIRE(la.ok());
  CHECK(s->n_reused() == 192);
  CHECK(s->last_prefix().n_recomputed == 0);  // the attention layers' own index also ends at 192
  CHECK(last_row_diff(*la, want_a2, a2.size(), n_vocab) == 0.0);
  // The next turn continues its own partial tail (230 = 14 blocks + 6): nothing recomputed.
  std::vector<int32_t> a3 = a2;
  for (int32_t t : token_stream(20, 4)) a3.push_back(t);
  const std::vector<float> want_a3 = uncached_logits(**m, a3);
  auto l3 = s->evaluate(a3);
  REQUIRE(l3.ok());
  CHECK(s->n_reused() == static_cast<int64_t>(a2.size()));
  CHECK(s->last_prefix().n_recomputed == 0);
  CHECK(last_row_diff(*l3, want_a3, a3.size(), n_vocab) == 0.0);
  REQUIRE(s->cache().check_invariants().ok());
}

// Two conversations in one batch, each with its own conv states: the engine's greedy replies are
// a solo session's.
TEST_CASE("lfm2: the engine's batched turns match solo sessions", "[core][kv][e2e][engine]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(tiny_lfm2(), *be);
  REQUIRE(m.ok());
  engine::RequestOptions ro;
  ro.max_tokens = 12;
  ro.sampling.temperature = 0;
  ro.sampling.repeat_penalty = 1.0f;
  ro.stop_at_eog = false;
  auto solo = [&](const std::vector<int32_t>& prompt) {
    auto s = model::Session::create(**m, 1024);
    REQUIRE(s.ok());
    model::GenerateOptions g = test::greedy_options(12);
    g.stop_at_eog = false;
    auto r = model::generate(*s, prompt, g);
    REQUIRE(r.ok());
    return r->tokens;
  };
  model::KvSetup ks;
  ks.t0_tokens = 1024;
  auto cache = model::create_kv_cache(**m, ks);
  REQUIRE(cache.ok());
  engine::Engine eng(**m, **cache);
  const std::vector<int32_t> a = token_stream(150, 2), b = token_stream(90, 7);
  const auto ia = eng.submit({1, a, ro, {}, {}});
  const auto ib = eng.submit({2, b, ro, {}, {}});
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  auto ra = eng.result(ia), rb = eng.result(ib);
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(ra->tokens == solo(a));
  CHECK(rb->tokens == solo(b));
}

// A replay of random operations (turns, branches, parking, eviction to T1 / T2, restarts over the
// same store) on an lfm2 cache: the invariants hold after each step, and every prefix reused is
// one the recurrent group can resume from (a block boundary, or the sequence's own history's end).
TEST_CASE("lfm2: random turns, branches, evictions and restarts keep its recurrent cache's invariants", "[core][kv]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(tiny_lfm2(), *be);
  REQUIRE(m.ok());
  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  model::KvSetup ks;
  ks.t0_tokens = 512;
  ks.budget.t1_bytes = 1 << 20;
  ks.cold = cold->get();
  auto cache = model::create_kv_cache(**m, ks);
  REQUIRE(cache.ok());
  REQUIRE((*cache)->n_groups() == 2);
  REQUIRE((*cache)->group(1).recurrent());
  const int64_t B = (*cache)->block_tokens();
  std::mt19937 rng(48);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  struct Seq {
    kv::SeqId id;
    std::vector<int32_t> tokens;
  };
  std::vector<Seq> seqs;
  std::vector<std::vector<int32_t>> histories = {token_stream(40, 1)};
  int64_t n_hits = 0, n_mid_block = 0;
  for (int step = 0; step < 300; ++step) {
    kv::KvCache& kc = **cache;
    const int op = pick(10);
    INFO("step " << step << " op " << op);
    if (op <= 3 || seqs.empty()) {
      std::vector<int32_t> prompt;
      size_t i = 0;
      if (!seqs.empty() && op <= 1) {  // the next turn of a conversation
        i = static_cast<size_t>(pick(static_cast<int>(seqs.size())));
        prompt = seqs[i].tokens;
      } else {  // a branch of a known history at a random point
        const auto& h = histories[static_cast<size_t>(pick(static_cast<int>(histories.size())))];
        prompt.assign(h.begin(), h.begin() + 1 + pick(static_cast<int>(h.size())));
        i = seqs.size();
        seqs.push_back({kc.create_sequence(), {}});
      }
      Seq& s = seqs[i];
      const auto held = static_cast<int64_t>(s.tokens.size());
      const std::vector<int32_t> more = token_stream(static_cast<size_t>(2 + pick(60)), step);
      prompt.insert(prompt.end(), more.begin() + 1, more.end());
      auto info = kc.prepare(s.id, prompt);
      if (!info.ok()) {
        REQUIRE(kc.check_invariants().ok());
        continue;
      }
      n_hits += info->n_cached > 0 ? 1 : 0;
      // The recurrent group's rule: a snapshot at a block boundary, or its own history's end.
      CHECK((info->n_cached % B == 0 || info->n_cached == held));
      n_mid_block += info->n_cached % B != 0 ? 1 : 0;
      CHECK(kc.group(1).n_tokens(s.id) == info->n_cached);
      const auto rest = std::span(prompt).subspan(static_cast<size_t>(info->n_cached));
      if (kc.reserve(s.id, static_cast<int64_t>(rest.size()))) {
        kc.commit(s.id, rest);
        s.tokens = prompt;
        histories.push_back(prompt);
      } else {
        s.tokens.assign(prompt.begin(), prompt.begin() + info->n_cached);
      }
      kc.park(s.id);
    } else if (op <= 5) {
      const auto i = static_cast<size_t>(pick(static_cast<int>(seqs.size())));
      kc.destroy_sequence(seqs[i].id);
      seqs.erase(seqs.begin() + static_cast<int64_t>(i));
    } else if (op <= 7) {
      kc.demote_all_unpinned(op == 6 ? kv::Tier::t1 : kv::Tier::t2);
    } else if (op == 8) {
      kc.emit_tier_usage();
    } else {  // restart over the same store
      seqs.clear();
      cache->reset();
      (*cold)->flush();
      cache = model::create_kv_cache(**m, ks);
      REQUIRE(cache.ok());
    }
    const Status st = (*cache)->check_invariants();
    INFO((st.ok() ? std::string() : st.error().what()));
    REQUIRE(st.ok());
  }
  CHECK(n_hits > 10);
  CHECK(n_mid_block > 0);  // some turns continued their own partial tail
}
