// KV group kinds (core/kv/kv_group_spec.h): each kind's rules, the layer -> group map, and kvchat's
// test models whose last layers share K/V (full + shared, full + window + shared): cached logits
// equal uncached ones across turns, T1, a restart over the same store and the engine's batches.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "core/backend/backend.h"
#include "core/engine/engine.h"
#include "core/gguf/gguf_file.h"
#include "core/kv/kv_group_spec.h"
#include "core/model/kv_setup.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
#include "core/model/session.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/restart_check.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

using test::last_row_diff;
using test::token_stream;
using test::uncached_logits;

// A kvchat-only shared-KV test model on stories260K's vocabulary, F16, sharp attention: "llama"
// (4 layers, all global) or "gemma2" (6 layers, local and global alternating, window 64).
std::string write_model(const test::TempDir& dir, const std::string& arch, int64_t shared_from) {
  auto vf = gguf::GgufFile::open(test::model_path("stories260K.gguf"));
  REQUIRE(vf.ok());
  auto vocab = model::vocabulary_from_gguf(*vf);
  REQUIRE(vocab.ok());
  model::ModelSpec spec;
  spec.arch = arch;
  spec.type = model::FileType::f16;
  spec.qk_std = 0.1f;
  spec.n_embd = 256;
  spec.n_head = 8;
  spec.n_head_kv = 2;
  spec.n_ff = 512;
  spec.n_layer = arch == "llama" ? 4 : 6;
  if (arch == "gemma2") {
    spec.head_dim = 64;
    spec.sliding_window = 64;
    spec.attn_softcap = 10;
    spec.final_softcap = 1;
  }
  spec.shared_kv_from_layer = shared_from;
  spec.n_threads = 1;
  const std::string path = (dir.path() / (arch + "-shared" + std::to_string(shared_from) + ".gguf")).string();
  auto st = model::write_random_model(spec, *vocab, path);
  INFO((st.ok() ? std::string() : st.error().what()));
  REQUIRE(st.ok());
  return path;
}

}  // namespace

TEST_CASE("KV group kinds: each kind's hit rule, what T2 keeps and whether it runs", "[core][kv]") {
  kv::KvGroupSpec full{kv::KvGroupKind::full, 2, 0, -1, 0, 0};
  kv::KvGroupSpec window{kv::KvGroupKind::window, 3, 64, -1, 0, 0};
  kv::KvGroupSpec latent{kv::KvGroupKind::latent, 2, 0, -1, 0, 0};
  kv::KvGroupSpec shared{kv::KvGroupKind::shared, 2, 0, 0, 0, 0};
  kv::KvGroupSpec recurrent{kv::KvGroupKind::recurrent, 3, 0, -1, 0, 1 << 20};
  auto needs = [](const kv::KvGroupSpec& s, int64_t p) {
    const kv::HitNeed h = s.hit_needs(p);
    return std::tuple(h.begin, h.end, h.state_at_end);
  };
  CHECK(needs(full, 200) == std::tuple(int64_t{0}, int64_t{200}, false));
  CHECK(needs(latent, 200) == std::tuple(int64_t{0}, int64_t{200}, false));
  CHECK(needs(window, 200) == std::tuple(int64_t{136}, int64_t{200}, false));
  CHECK(needs(window, 40) == std::tuple(int64_t{0}, int64_t{40}, false));
  CHECK(needs(shared, 200) == std::tuple(int64_t{200}, int64_t{200}, false));  // nothing of its own
  CHECK(needs(recurrent, 200) == std::tuple(int64_t{200}, int64_t{200}, true));
  CHECK(full.t2_keeps() == kv::T2Keeps::every_block);
  CHECK(latent.t2_keeps() == kv::T2Keeps::every_block);
  CHECK(window.t2_keeps() == kv::T2Keeps::checkpoints);
  CHECK(shared.t2_keeps() == kv::T2Keeps::nothing);
  CHECK(recurrent.t2_keeps() == kv::T2Keeps::state_snapshots);
  CHECK(kv::kv_group_kind_supported(kv::KvGroupKind::shared));
  CHECK(kv::kv_group_kind_supported(kv::KvGroupKind::latent));     // deepseek2 (test_deepseek2.cpp)
  CHECK(kv::kv_group_kind_supported(kv::KvGroupKind::recurrent));  // lfm2 (test_lfm2.cpp)
  // A recurrent group resumes at a snapshot: every block's end (N = 1), or every Nth block's.
  CHECK(recurrent.hit_boundary(200, 16) == 192);
  CHECK(recurrent.hit_boundary(192, 16) == 192);
  kv::KvGroupSpec every4 = recurrent;
  every4.snapshot_every = 4;
  CHECK(every4.hit_boundary(200, 16) == 192);
  CHECK(every4.hit_boundary(190, 16) == 128);
  CHECK(full.hit_boundary(200, 16) == 200);
  CHECK_FALSE(shared.stores());
  CHECK(recurrent.stores());
}

TEST_CASE("KV group kinds: a shared-KV model's layers map to the groups they read, and store nothing", "[core][kv]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(1);
  SECTION("llama: layers 2 and 3 read layer 1's K/V") {
    auto m = model::Model::load(write_model(tmp, "llama", 2), *be);
    INFO((m.ok() ? std::string() : m.error().what()));
    REQUIRE(m.ok());
    const model::ModelConfig& c = (*m)->config();
    const model::KvGroupMap map = c.kv_group_map();
    REQUIRE(map.groups.size() == 2);
    CHECK(map.groups[0].kind == kv::KvGroupKind::full);
    CHECK(map.groups[0].n_layer == 2);
    CHECK(map.groups[1].kind == kv::KvGroupKind::shared);
    CHECK(map.groups[1].source == 0);
    CHECK(map.n_storing() == 1);
    CHECK(map.layer_group == std::vector<int>{0, 0, 1, 1});
    CHECK(map.kv_group == std::vector<int>{0, 0, 0, 0});
    CHECK(map.kv_layer == std::vector<int>{0, 1, 1, 1});
    // Half the layers store: half the bytes per token, in the cache's one layout too.
    CHECK(c.kv_bytes_per_token(2.0) == 2.0 * 2 * static_cast<double>(c.kv_width()) * 2.0);
    auto cache = model::create_kv_cache(**m, model::KvSetup{});
    REQUIRE(cache.ok());
    REQUIRE((*cache)->n_groups() == 1);
    CHECK((*cache)->layout().n_layer == 2);
    // int4c's holding area is per storing layer and batch: refused by name, as for two groups.
    model::KvSetup int4c;
    int4c.k_format = int4c.v_format = kv::KvFormat::int4c;
    auto refused = model::create_kv_cache(**m, int4c);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.error().what(), Catch::Contains("int4c"));
  }
  SECTION("gemma2: layer 4 (local) reads layer 2, layer 5 (global) reads layer 3") {
    auto m = model::Model::load(write_model(tmp, "gemma2", 4), *be);
    REQUIRE(m.ok());
    const model::ModelConfig& c = (*m)->config();
    const model::KvGroupMap map = c.kv_group_map();
    REQUIRE(map.groups.size() == 4);
    CHECK(map.groups[0].kind == kv::KvGroupKind::full);
    CHECK(map.groups[1].kind == kv::KvGroupKind::window);
    CHECK(map.groups[1].window == 64);
    CHECK(map.groups[2].kind == kv::KvGroupKind::shared);
    CHECK(map.groups[2].source == 1);
    CHECK(map.groups[3].kind == kv::KvGroupKind::shared);
    CHECK(map.groups[3].source == 0);
    CHECK(map.layer_group == std::vector<int>{1, 0, 1, 0, 2, 3});
    CHECK(map.kv_group == std::vector<int>{1, 0, 1, 0, 1, 0});
    CHECK(map.kv_layer == std::vector<int>{0, 0, 1, 1, 1, 1});
    auto cache = model::create_kv_cache(**m, model::KvSetup{});
    REQUIRE(cache.ok());
    REQUIRE((*cache)->n_groups() == 2);
    CHECK((*cache)->group(0).layout().n_layer == 2);
    CHECK((*cache)->group(1).layout().n_layer == 2);
    CHECK((*cache)->group(1).window() == 64);
  }
  SECTION("a shared layer with no earlier layer of its kind is refused by mkmodel") {
    model::ModelSpec spec;
    spec.arch = "gemma3";
    spec.n_layer = 6;  // L L L L L G: the global layer 5 has no earlier global layer to read
    spec.head_dim = 64;
    spec.sliding_window = 64;
    spec.shared_kv_from_layer = 3;
    const Status st = spec.validate(512);
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.error().what(), Catch::Contains("layer 5"));
  }
}

// Four turns from T0, a round trip through T1, then a restart over the same store; every logit
// the same as an uncached run's, bit for bit (F16 KV).
TEST_CASE("KV group kinds: cached logits equal uncached ones for full + shared and full + window + shared",
          "[core][kv][e2e]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  const auto arch = GENERATE(std::string("llama"), std::string("gemma2"));
  INFO("arch " << arch);
  const std::string path = write_model(tmp, arch, arch == "llama" ? 2 : 4);
  auto m = model::Model::load(path, *be);
  REQUIRE(m.ok());
  const int64_t n_vocab = (*m)->config().n_vocab;
  const std::vector<int32_t> head = token_stream(440, 1);
  const std::vector<float> want = uncached_logits(**m, std::span(head).first(100));
  {
    // The same weights without sharing give other logits: the shared layers do read other K/V.
    auto plain = model::Model::load(write_model(tmp, arch, 0), *be);
    REQUIRE(plain.ok());
    REQUIRE((*plain)->config().shared_kv_from_layer == 0);
    CHECK(last_row_diff(uncached_logits(**plain, std::span(head).first(100)), want, 100, n_vocab) > 1e-3);
  }
  test::check_turns_t1_and_restart(**m, (tmp.path() / ("kv-" + arch)).string());
}

// Two conversations in one batch: each sequence's block table per group goes to its own rows.
TEST_CASE("KV group kinds: the engine's batched turns on a full + window + shared model match solo sessions",
          "[core][kv][e2e][engine]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(write_model(tmp, "gemma2", 4), *be);
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
  REQUIRE((*cache)->n_groups() == 2);
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

// A replay of random operations (append, branch, park, evict to T1 / T2, restart over the same
// store) on the cache of a full + window + shared model, its invariants checked after each step.
// The KV bytes are whatever the blocks hold: this is about the block bookkeeping of every group.
TEST_CASE("KV group kinds: random appends, branches, evictions and restarts keep a mixed cache's invariants",
          "[core][kv]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(write_model(tmp, "gemma2", 4), *be);
  REQUIRE(m.ok());
  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  model::KvSetup ks;
  ks.t0_tokens = 512;  // small: appends and branches run into eviction
  ks.budget.t1_bytes = 4 << 20;
  ks.cold = cold->get();
  auto cache = model::create_kv_cache(**m, ks);
  REQUIRE(cache.ok());
  REQUIRE((*cache)->n_groups() == 2);
  std::mt19937 rng(44);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  struct Seq {
    kv::SeqId id;
    std::vector<int32_t> tokens;
  };
  std::vector<Seq> seqs;
  std::vector<std::vector<int32_t>> histories = {token_stream(40, 1)};
  int64_t n_hits = 0;
  for (int step = 0; step < 300; ++step) {
    kv::KvCache& kc = **cache;
    const int op = pick(10);
    INFO("step " << step << " op " << op);
    if (op <= 3 || seqs.empty()) {  // a turn: a new or existing sequence takes a longer prompt
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
      const std::vector<int32_t> more = token_stream(static_cast<size_t>(2 + pick(60)), step);
      prompt.insert(prompt.end(), more.begin() + 1, more.end());
      auto info = kc.prepare(s.id, prompt);
      if (!info.ok()) {  // T0 cannot hold the prefix: a normal outcome, nothing kept
        REQUIRE(kc.check_invariants().ok());
        continue;
      }
      n_hits += info->n_cached > 0 ? 1 : 0;
      CHECK(info->n_cached < static_cast<int64_t>(prompt.size()));
      const auto rest = std::span(prompt).subspan(static_cast<size_t>(info->n_cached));
      if (kc.reserve(s.id, static_cast<int64_t>(rest.size()))) {
        kc.commit(s.id, rest);
        s.tokens = prompt;
        histories.push_back(prompt);
      }
      kc.park(s.id);
    } else if (op <= 5) {  // a conversation ends
      const auto i = static_cast<size_t>(pick(static_cast<int>(seqs.size())));
      kc.destroy_sequence(seqs[i].id);
      seqs.erase(seqs.begin() + static_cast<int64_t>(i));
    } else if (op <= 7) {
      kc.demote_all_unpinned(op == 6 ? kv::Tier::t1 : kv::Tier::t2);
    } else if (op == 8) {
      kc.emit_tier_usage();
    } else {  // restart: the cache closes (checkpoints written) and a new one opens over the store
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
  CHECK(n_hits > 10);  // the replay did reuse prefixes, across groups and restarts
}
