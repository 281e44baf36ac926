// Sliding-window attention: the window is read from GGUF, bounds what each position attends
// to, and lets the cache keep only the blocks inside it on T0.
#include <catch2/catch.hpp>

#include <cstdio>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

constexpr int64_t k_window = 24;

// stories260K with llama.attention.sliding_window added.
std::string windowed_copy(const test::TempDir& tmp, int64_t window) {
  auto src = gguf::GgufFile::open(test::model_path("stories260K.gguf"));
  REQUIRE(src.ok());
  gguf::GgufWriter w;
  for (const auto& e : src->metadata()) {
    if (e.key != "general.alignment") w.set(e.key, e.value);
  }
  w.set_u32("llama.attention.sliding_window", static_cast<uint32_t>(window));
  for (const auto& t : src->tensors()) {
    w.add_tensor(t.name, t.shape, t.type, std::vector<uint8_t>(src->tensor_data(t), src->tensor_data(t) + t.n_bytes));
  }
  auto bytes = w.write_to_memory();
  REQUIRE(bytes.ok());
  const std::string path = tmp.file("windowed.gguf");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fwrite(bytes->data(), 1, bytes->size(), f);
  std::fclose(f);
  return path;
}

std::vector<int32_t> some_tokens(int n) {
  std::vector<int32_t> t = {1};
  for (int i = 1; i < n; ++i) t.push_back(2 + (i * 131) % 500);
  return t;
}

std::vector<float> last_row(std::span<const float> all, int64_t n_vocab) { return {all.end() - n_vocab, all.end()}; }

}  // namespace

TEST_CASE("sliding window: read from GGUF, part of the KV fingerprint, and it bounds attention", "[core][kv][window]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto full = model::Model::load(test::model_path("stories260K.gguf"), *be);
  auto win = model::Model::load(windowed_copy(tmp, k_window), *be);
  REQUIRE(full.ok());
  REQUIRE(win.ok());
  CHECK((*full)->config().sliding_window == 0);
  CHECK((*win)->config().sliding_window == k_window);

  auto sf = model::Session::create(**full, 128);
  auto sw = model::Session::create(**win, 128);
  REQUIRE(sf.ok());
  REQUIRE(sw.ok());
  CHECK_FALSE(sf->cache().fingerprint() == sw->cache().fingerprint());

  const int64_t n_vocab = (*full)->config().n_vocab;
  const auto prompt = some_tokens(80);
  auto lf = sf->evaluate_all(prompt);
  REQUIRE(lf.ok());
  const std::vector<float> all_full(lf->begin(), lf->end());
  auto lw = sw->evaluate_all(prompt);
  REQUIRE(lw.ok());
  const std::vector<float> all_win(lw->begin(), lw->end());
  // Positions that see no more than the window attend to the same keys: identical logits.
  for (int64_t p = 0; p < k_window; ++p) {
    for (int64_t v = 0; v < n_vocab; ++v) {
      REQUIRE(all_full[static_cast<size_t>(p * n_vocab + v)] == all_win[static_cast<size_t>(p * n_vocab + v)]);
    }
  }
  // The edge, exactly: position k_window is the first whose window (k_window positions, itself
  // included) leaves out position 0, so its logits are the first to change. A window one
  // longer would leave them equal; one shorter would already change position k_window - 1.
  double edge_diff = 0;
  for (int64_t v = 0; v < n_vocab; ++v) {
    const size_t i = static_cast<size_t>(k_window * n_vocab + v);
    edge_diff = std::max(edge_diff, std::abs(static_cast<double>(all_full[i]) - static_cast<double>(all_win[i])));
  }
  CHECK(edge_diff > 1e-4);
  // Later positions forget the start: the logits change.
  double diff = 0;
  for (int64_t v = 0; v < n_vocab; ++v) {
    const size_t i = static_cast<size_t>(79 * n_vocab + v);
    diff = std::max(diff, std::abs(static_cast<double>(all_full[i]) - static_cast<double>(all_win[i])));
  }
  CHECK(diff > 1e-3);
}

TEST_CASE("sliding window: a conversation longer than T0 runs, with the logits of an unbounded cache",
          "[core][kv][window]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto win = model::Model::load(windowed_copy(tmp, k_window), *be);
  REQUIRE(win.ok());
  const int64_t n_vocab = (*win)->config().n_vocab;
  const auto stream = some_tokens(241);

  // Reference: every position computed at once, in a cache that holds all of them.
  auto ref = model::Session::create(**win, 256);
  REQUIRE(ref.ok());
  auto all = ref->evaluate_all(stream);
  REQUIRE(all.ok());
  const std::vector<float> want(all->begin(), all->end());

  // 8 blocks of 16 = 128 positions of T0 for a 240-token conversation fed in turns of 16:
  // without the window it would run out of blocks half way.
  model::SessionOptions o;
  o.n_ctx = 256;
  o.n_batch = 16;
  o.budget.t0_bytes = 8 * ref->cache().layout().block_bytes;
  o.budget.t1_bytes = 64 * ref->cache().layout().block_bytes;
  auto s = model::Session::create(**win, o);
  REQUIRE(s.ok());
  for (size_t n = 16; n < stream.size(); n += 16) {
    auto l = s->evaluate(std::span(stream).first(n));
    INFO("after " << n << " tokens: " << (l.ok() ? std::string() : l.error().what()));
    REQUIRE(l.ok());
    const auto got = last_row(*l, n_vocab);
    for (int64_t v = 0; v < n_vocab; ++v)
      REQUIRE(got[static_cast<size_t>(v)] == want[(n - 1) * static_cast<size_t>(n_vocab) + static_cast<size_t>(v)]);
    REQUIRE(s->cache().check_invariants().ok());
    CHECK(s->cache().tier_usage(kv::Tier::t0).used_blocks <= 8);
  }

  // Everything pushed down to T1: resuming the whole stream brings back only the blocks the
  // window still needs (plus one of margin), not the 15 of the history.
  s->clear();
  s->cache().demote_all_unpinned(kv::Tier::t1);
  const int64_t promoted_before = s->cache().counters().n_promotions[1][0];
  auto l = s->evaluate(stream);
  REQUIRE(l.ok());
  const auto got = last_row(*l, n_vocab);
  for (int64_t v = 0; v < n_vocab; ++v)
    REQUIRE(got[static_cast<size_t>(v)] == want[240 * static_cast<size_t>(n_vocab) + static_cast<size_t>(v)]);
  const int64_t promoted = s->cache().counters().n_promotions[1][0] - promoted_before;
  CHECK(promoted >= 2);
  CHECK(promoted <= (k_window + 16) / 16 + 1);
  CHECK(s->cache().check_invariants().ok());
}
