// KV groups (core/kv/kv_cache.h): a Gemma-3-shaped model's local and global layers keep their own
// block chains; cached logits equal uncached ones through T1, T2, a restart and a partial hit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/backend/backend.h"
#include "core/engine/engine.h"
#include "core/kv/kv_view.h"
#include "core/kv/stream_keys.h"
#include "core/model/kv_setup.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// tiny-gemma3-f16: 6 layers, 5 local (window 64) and one global (layer 5); B = 16.
constexpr int64_t k_window = 64;
constexpr int64_t k_block = 16;

using test::last_row_diff;
using test::token_stream;
using test::uncached_logits;

}  // namespace

TEST_CASE("KV groups: a Gemma 3 model has a local and a global group with their own layouts and key chains",
          "[core][kv]") {
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  const model::ModelConfig& c = (*m)->config();
  REQUIRE(c.n_kv_groups() == 2);
  CHECK(c.n_kv_group_layers(0) == 1);
  CHECK(c.n_kv_group_layers(1) == 5);
  CHECK(c.kv_group(5) == 0);
  CHECK(c.kv_group_layer(5) == 0);
  CHECK(c.kv_group_layer(4) == 4);
  auto cache = model::create_kv_cache(**m, model::KvSetup{});
  REQUIRE(cache.ok());
  kv::KvCache& kc = **cache;
  REQUIRE(kc.n_groups() == 2);
  CHECK(kc.group(0).window() == 0);
  CHECK(kc.group(1).window() == k_window);
  CHECK(kc.group(0).layout().n_layer == 1);
  CHECK(kc.group(1).layout().n_layer == 5);
  CHECK(kc.group(1).layout().block_bytes == 5 * kc.group(0).layout().block_bytes);
  CHECK(kc.group(0).tier_store().config().checkpoints_only == false);
  CHECK(kc.group(1).tier_store().config().checkpoints_only == true);
  CHECK(kc.group(0).fingerprint() != kc.group(1).fingerprint());

  // Models of one group keep the one cache and the fingerprint they always had.
  auto llama = model::Model::load(test::model_path("tiny-gqa-q8_0.gguf"), *be);
  REQUIRE(llama.ok());
  CHECK((*llama)->config().n_kv_groups() == 1);
  auto lc = model::create_kv_cache(**llama, model::KvSetup{});
  REQUIRE(lc.ok());
  CHECK((*lc)->n_groups() == 1);
  auto layout = (*llama)->config().kv_layout(16, kv::KvFormat::f16, kv::KvFormat::f16);
  REQUIRE(layout.ok());
  CHECK((*lc)->fingerprint() == model::kv_fingerprint(**llama, *layout));
  CHECK(model::kv_group_fingerprint(**llama, *layout, 0) == model::kv_fingerprint(**llama, *layout));
}

// [slow]: 600 positions evaluated uncached and again in turns; the sanitized runs leave it to the
// release suite (tests/sanitized/CMakeLists.txt), their other KV group cases run the same paths shorter.
TEST_CASE("KV groups: cached logits equal uncached ones across turns, T1 and T2, a restart and a branch",
          "[core][kv][e2e][slow]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  INFO((m.ok() ? std::string() : m.error().what()));
  REQUIRE(m.ok());
  const int64_t n_vocab = (*m)->config().n_vocab;
  const std::vector<int32_t> stream = token_stream(600, 0);
  const std::vector<float> want = uncached_logits(**m, stream);
  model::SessionOptions o;
  o.n_ctx = 1024;
  o.n_batch = 16;
  o.budget.t1_bytes = 2 * 64 * 3 * 1024 * k_block;  // 128 blocks of every group: room for all of it

  {
    auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
    REQUIRE(cold.ok());
    o.cold = cold->get();
    auto s = model::Session::create(**m, o);
    REQUIRE(s.ok());
    kv::KvCache& kc = s->cache();
    // Turns of 100 tokens, each past the window: the previous turns come from T0.
    for (size_t n = 100; n <= 400; n += 100) {
      INFO("turn ending at " << n);
      auto l = s->evaluate(std::span(stream).first(n));
      REQUIRE(l.ok());
      CHECK(s->n_reused() == static_cast<int64_t>(n - 100));
      CHECK(s->last_prefix().n_recomputed == 0);
      CHECK(last_row_diff(*l, want, n, n_vocab) == 0.0);
      REQUIRE(kc.check_invariants().ok());
    }
    // The local group's sequence holds only its window on T0; the global one holds everything.
    CHECK(kc.group(0).sequence_table().sequences().begin()->second.table.n_retired == 0);
    CHECK(kc.group(1).sequence_table().sequences().begin()->second.table.n_retired >= (400 - 2 * k_window) / k_block);

    // T1 and back: every group's blocks come back (the local ones of the window at least).
    s->clear();
    kc.demote_all_unpinned(kv::Tier::t1);
    CHECK(kc.tier_usage(kv::Tier::t0, 0).used_blocks == 0);
    auto t1 = s->evaluate(std::span(stream).first(400));
    REQUIRE(t1.ok());
    CHECK(s->n_reused() == 399);
    CHECK(s->last_prefix().n_from_tier[1] > 0);
    CHECK(last_row_diff(*t1, want, 400, n_vocab) == 0.0);

    // T2 and back: the global blocks were written behind; the local ones only as the checkpoint
    // of the turn boundary at 400 (clear() is one), so the rest of them is dropped, not written.
    s->clear();
    (*cold)->flush();
    kc.demote_all_unpinned(kv::Tier::t2);
    CHECK(kc.tier_usage(kv::Tier::t0, 1).used_blocks == 0);
    CHECK(kc.tier_usage(kv::Tier::t1, 1).used_blocks == 0);
    auto t2 = s->evaluate(std::span(stream).first(500));
    REQUIRE(t2.ok());
    CHECK(s->n_reused() == 400);
    CHECK(s->last_prefix().n_from_tier[2] == 400);
    CHECK(s->last_prefix().n_recomputed == 0);
    CHECK(last_row_diff(*t2, want, 500, n_vocab) == 0.0);
    REQUIRE(kc.check_invariants().ok());
  }  // the cache closes first (a checkpoint at 500), then the store drains its queue to disk

  // Restart: a new cache over the same data directory; its index is empty.
  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  o.cold = cold->get();
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  auto r = s->evaluate(stream);
  REQUIRE(r.ok());
  CHECK(s->n_reused() == 496);  // 31 whole blocks; the private tail of 500 did not survive
  CHECK(s->last_prefix().n_from_tier[2] == 496);
  CHECK(s->last_prefix().n_recomputed == 0);
  CHECK(last_row_diff(*r, want, 600, n_vocab) == 0.0);

  // A branch at 250, before the window of every checkpoint after 200: the global layer has
  // [0, 240) cached, the local layers' window only before 192 (the checkpoint at 200 kept its
  // blocks 7..11), so [192, 240) is recomputed: a partial hit.
  s->clear();
  std::vector<int32_t> branch(stream.begin(), stream.begin() + 250);
  const std::vector<int32_t> other = token_stream(60, 3);  // differs from stream at every position
  branch.insert(branch.end(), other.begin() + 1, other.end());
  const std::vector<float> want_branch = uncached_logits(**m, branch);
  auto b = s->evaluate(branch);
  REQUIRE(b.ok());
  CHECK(s->n_reused() == 192);
  CHECK(s->last_prefix().n_recomputed == 240 - 192);
  CHECK(s->n_evaluated() == static_cast<int64_t>(branch.size()) - 192);
  CHECK(last_row_diff(*b, want_branch, branch.size(), n_vocab) == 0.0);
  REQUIRE(s->cache().check_invariants().ok());
}

TEST_CASE("KV groups: T2 holds the global layers' KV and only checkpoints of the local ones", "[core][kv][e2e]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  const model::ModelConfig& c = (*m)->config();
  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  constexpr size_t k_turn = 256, k_turns = 8;
  const std::vector<int32_t> stream = token_stream(k_turn * k_turns, 3);
  {
    model::SessionOptions o;
    o.n_ctx = static_cast<int64_t>(stream.size()) + 16;
    o.cold = cold->get();
    auto s = model::Session::create(**m, o);
    REQUIRE(s.ok());
    for (size_t n = k_turn; n <= stream.size(); n += k_turn) REQUIRE(s->evaluate(std::span(stream).first(n)).ok());
  }  // the last turn's checkpoint is written as the cache closes
  (*cold)->flush();
  const kv::ColdStoreStats st = (*cold)->stats();
  const auto n_full = static_cast<double>(stream.size() / k_block * k_block);
  const double full = c.kv_bytes_per_token(2.0);           // every layer, every position
  const double global = c.kv_bytes_per_token_global(2.0);  // the global layer's share
  const double local = c.kv_bytes_per_token_local(2.0);    // the local layers'
  // Each turn boundary keeps the blocks a resume reads: the window before the last full block
  // with a block of margin, ceil(W / B) + 1 blocks.
  const double ckpt_positions = static_cast<double>((k_window + k_block - 1) / k_block + 1) * k_block;
  const double expected = global + local * ckpt_positions * static_cast<double>(k_turns) / n_full;
  const double measured = static_cast<double>(st.used_bytes) / n_full;
  std::printf(
      "KV groups, T2 bytes per token after %zu turns of %zu tokens: %.0f (full KV %.0f, global %.0f; "
      "expected %.0f, %.1f%% of full)\n",
      k_turns, k_turn, measured, full, global, expected, 100.0 * measured / full);
  CHECK(measured <= expected * 1.001);
  CHECK(measured >= global);
  CHECK(measured < 0.5 * full);  // 8 turns of 256 tokens, a window of 64: under half of full KV
}

TEST_CASE("KV groups: the engine's turns over a disk tier match a fresh session's after a restart",
          "[core][kv][e2e][engine]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  engine::RequestOptions ro;
  ro.max_tokens = 16;
  ro.sampling.temperature = 0;
  ro.sampling.repeat_penalty = 1.0f;
  ro.stop_at_eog = false;
  auto solo = [&](const std::vector<int32_t>& prompt) {
    auto s = model::Session::create(**m, 1024);
    REQUIRE(s.ok());
    model::GenerateOptions g = test::greedy_options(16);
    g.stop_at_eog = false;
    auto r = model::generate(*s, prompt, g);
    REQUIRE(r.ok());
    return r->tokens;
  };
  std::vector<int32_t> prompt = token_stream(200, 5);
  auto turn = [&](engine::Engine& eng, int64_t conversation) {
    const auto id = eng.submit({conversation, prompt, ro, {}, {}});
    REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
    auto r = eng.result(id);
    REQUIRE(r);
    REQUIRE(r->state == engine::RequestState::finished);
    CHECK(r->tokens == solo(prompt));
    return *r;
  };
  {
    auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
    REQUIRE(cold.ok());
    model::KvSetup ks;
    ks.t0_tokens = 1024;
    ks.cold = cold->get();
    auto cache = model::create_kv_cache(**m, ks);
    REQUIRE(cache.ok());
    engine::Engine eng(**m, **cache);
    const auto r1 = turn(eng, 1);
    prompt.insert(prompt.end(), r1.tokens.begin(), r1.tokens.end());
    const std::vector<int32_t> more = token_stream(80, 9);
    prompt.insert(prompt.end(), more.begin() + 1, more.end());
    const auto r2 = turn(eng, 1);
    CHECK(r2.prefix.n_cached == 200 + 16 - 1);  // the parked sequence's own history
    prompt.insert(prompt.end(), r2.tokens.begin(), r2.tokens.end());
  }
  // After a restart the reply's end is a checkpoint: the next turn is a full hit from disk.
  const auto n_history = static_cast<int64_t>(prompt.size());
  const std::vector<int32_t> next = token_stream(40, 11);
  prompt.insert(prompt.end(), next.begin() + 1, next.end());
  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  model::KvSetup ks;
  ks.t0_tokens = 1024;
  ks.cold = cold->get();
  auto cache = model::create_kv_cache(**m, ks);
  REQUIRE(cache.ok());
  engine::Engine eng(**m, **cache);
  const auto r3 = turn(eng, 1);
  // The reply's last token was sampled, never computed: the history holds n - 1 positions.
  CHECK(r3.prefix.n_cached == (n_history - 1) / k_block * k_block);
  CHECK(r3.prefix.n_recomputed == 0);
  CHECK(r3.prefix.n_from_tier[2] == r3.prefix.n_cached);
}

TEST_CASE("KV groups: a history on disk is staged for both groups while another conversation decodes",
          "[core][kv][engine]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  kv::MemoryColdStore cold(int64_t{1} << 30);
  model::KvSetup ks;
  ks.t0_tokens = 1024;
  ks.budget.t1_bytes = int64_t{8} << 20;
  ks.cold = &cold;
  auto cache = model::create_kv_cache(**m, ks);
  REQUIRE(cache.ok());
  engine::Engine eng(**m, **cache);
  auto greedy = [](int64_t n) {
    engine::RequestOptions ro;
    ro.max_tokens = n;
    ro.sampling.temperature = 0;
    ro.sampling.repeat_penalty = 1.0f;
    ro.stop_at_eog = false;
    return ro;
  };
  auto solo = [&](const std::vector<int32_t>& prompt, int64_t n) {
    auto s = model::Session::create(**m, 1024);
    REQUIRE(s.ok());
    model::GenerateOptions g = test::greedy_options(n);
    g.stop_at_eog = false;
    auto r = model::generate(*s, prompt, g);
    REQUIRE(r.ok());
    return r->tokens;
  };
  std::vector<int32_t> history = token_stream(240, 13);
  const auto first = eng.submit({2, history, greedy(8), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  const auto r1 = eng.result(first);
  REQUIRE(r1);
  history.insert(history.end(), r1->tokens.begin(), r1->tokens.end());
  const std::vector<int32_t> more = token_stream(20, 17);
  history.insert(history.end(), more.begin() + 1, more.end());
  (*cache)->demote_all_unpinned(kv::Tier::t2);
  CHECK((*cache)->tier_usage(kv::Tier::t1, 1).used_blocks == 0);

  const std::vector<int32_t> other = token_stream(8, 19);
  const auto busy = eng.submit({1, other, greedy(30), {}, {}});
  for (int i = 0; i < 3; ++i) eng.step();
  const auto resumed = eng.submit({2, history, greedy(8), {}, {}});
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  const auto r = eng.result(resumed);
  INFO((r->state == engine::RequestState::failed ? r->error.what() : std::string()));
  REQUIRE(r->state == engine::RequestState::finished);
  // 240 + 8 - 1 positions were computed: 15 whole blocks, all on disk for the global layer, and
  // the checkpoint of the reply's end (the window before block 15) for the local layers; the
  // parked sequence's private tail (7 positions) stayed on T0 in both groups.
  CHECK(r->prefix.n_cached == 247);
  CHECK(r->prefix.n_from_tier[2] == 240);
  CHECK(r->prefix.n_recomputed == 0);
  CHECK(eng.stats().n_staged_requests == 1);
  CHECK(eng.stats().n_staged_blocks >= 15 + 5);  // the global blocks and the local window's
  CHECK(r->tokens == solo(history, 8));
  CHECK(eng.result(busy)->tokens == solo(other, 30));
}

TEST_CASE("KV groups: describe() gives each group its own blocks, tree, tier use and owners", "[core][kv]") {
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  model::SessionOptions o;
  o.n_ctx = 1024;
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  const std::vector<int32_t> stream = token_stream(400, 5);
  REQUIRE(s->evaluate(stream).ok());
  const kv::KvCache& kc = s->cache();

  // The stream's keys in each group's own chain, as the app computes them once per turn.
  REQUIRE(kc.n_groups() == 2);
  const std::vector<kv::BlockKey> keys0 = kv::stream_block_keys(kc.group(0).fingerprint(), kc.block_tokens(), stream);
  const std::vector<std::vector<kv::BlockKey>> keys1 = {
      kv::stream_block_keys(kc.group(1).fingerprint(), kc.block_tokens(), stream)};
  const kv::KvOwner with_keys{7, stream, keys0, keys1};
  const kv::KvOwner hashed{7, stream, {}, {}};
  for (const kv::KvOwner& owner : {with_keys, hashed}) {
    kv::KvViewOptions vo;
    vo.owners = std::span(&owner, 1);
    kv::KvView v;
    kc.describe(v, vo);
    CHECK(v.group == 0);
    CHECK(v.n_layers == 1);
    CHECK(v.window == 0);
    REQUIRE(v.more_groups.size() == 1);
    const kv::KvView& local = v.more_groups[0];
    CHECK(local.group == 1);
    CHECK(local.n_layers == 5);
    CHECK(local.window == k_window);
    CHECK(local.more_groups.empty());
    CHECK(local.block_bytes == 5 * v.block_bytes);
    // Both groups index the 400 positions' 25 full blocks, each in its own chain, owned by the stream.
    int64_t n_full = 0;
    for (const kv::KvView* g : {static_cast<const kv::KvView*>(&v), &local}) {
      n_full = 0;
      for (const kv::KvBlockView& b : g->blocks) {
        if (b.is_private) continue;
        ++n_full;
        CHECK(b.owner_id == 7);
      }
      CHECK(n_full == 400 / k_block);
      CHECK(!g->nodes.empty());
    }
    CHECK(v.blocks.front().key != local.blocks.front().key);
    // Each group's own pools; the totals add both up.
    for (kv::Tier t : {kv::Tier::t0, kv::Tier::t1}) {
      const auto ti = static_cast<size_t>(kv::tier_index(t));
      CHECK(v.group_tiers[ti].used_blocks == kc.tier_usage(t, 0).used_blocks);
      CHECK(local.group_tiers[ti].used_blocks == kc.tier_usage(t, 1).used_blocks);
      CHECK(v.metrics.tiers[ti].used_bytes == v.group_tiers[ti].used_bytes + local.group_tiers[ti].used_bytes);
    }
    CHECK(local.group_tiers[0].used_bytes == local.group_tiers[0].used_blocks * local.block_bytes);
    // Shares are each group's: the owner holds the group's blocks' bytes.
    REQUIRE(local.metrics.shares.size() == 1);
    CHECK(local.metrics.shares[0].seq_id == 7);
    CHECK(local.metrics.shares[0].bytes[0] >= 4 * local.block_bytes);
  }

  // A model of one group: no more groups, its layers all of the model's.
  auto llama = model::Model::load(test::model_path("tiny-gqa-q8_0.gguf"), *be);
  REQUIRE(llama.ok());
  auto ls = model::Session::create(**llama, o);
  REQUIRE(ls.ok());
  REQUIRE(ls->evaluate(stream).ok());
  kv::KvView lv;
  ls->cache().describe(lv);
  CHECK(lv.more_groups.empty());
  CHECK(lv.n_layers == (*llama)->config().n_layer);
  CHECK(lv.window == 0);
}
