// The model and the token ids that the KV cache, tier store and engine tests share.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
#include "core/model/session.h"
#include "support/test_support.h"

namespace kvc::test {

// The tiny GQA Q8_0 test model on a 2-thread CPU backend.
struct LoadedModel {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
  std::unique_ptr<model::Model> m;
  LoadedModel() {
    auto r = model::Model::load(model_path("tiny-gqa-q8_0.gguf"), *be);
    REQUIRE(r.ok());
    m = std::move(*r);
  }
};

// n token ids in [1, 31000), spread so that no two prompts of different `salt` share a block.
inline std::vector<int32_t> tokens_of(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(1 + (i * 7919 + salt * 104729) % 31000);
  return t;
}

// A one-layer random-weight F16 model with stories260K's vocabulary and the chat template
// tests/data/templates/TEMPLATE, written into `dir` by kvchat-cli mkmodel: its path.
inline std::filesystem::path model_with_template(const TempDir& dir, const std::string& template_name) {
  auto f = gguf::GgufFile::open(model_path("stories260K.gguf"));
  REQUIRE(f.ok());
  auto vocab = model::vocabulary_from_gguf(*f);
  REQUIRE(vocab.ok());
  const std::string tmpl = read_file(data_dir() / "templates" / template_name);
  REQUIRE(model::write_vocabulary_file(*vocab, tmpl, dir.file("vocab.gguf")).ok());
  const std::string out = dir.file("with-template.gguf");
  const auto made = cli("mkmodel --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn 64 --type f16 -q --vocab-from " +
                            quoted(dir.file("vocab.gguf")) + " -o " + quoted(out),
                        dir);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  return out;
}

// The config a file with w's metadata would load with.
inline Result<model::ModelConfig> config_of(const gguf::GgufWriter& w) {
  auto bytes = w.write_to_memory();
  REQUIRE(bytes.ok());
  auto f = gguf::GgufFile::from_memory(std::move(*bytes));
  REQUIRE(f.ok());
  return model::ModelConfig::from_gguf(*f);
}

// A copy of test model `model` written into tmp, with `edit_meta` applied to its metadata,
// `edit_shape` to each tensor's shape and `edit_data` to each tensor's bytes (given its name);
// without edit_data the bytes are the file's, as they are.
inline std::string variant(const std::string& model, const TempDir& tmp,
                           const std::function<void(gguf::GgufWriter&)>& edit_meta,
                           const std::function<void(const std::string&, std::vector<int64_t>&)>& edit_shape = {},
                           const std::function<void(const std::string&, std::vector<uint8_t>&)>& edit_data = {}) {
  auto src = gguf::GgufFile::open(model_path(model + ".gguf"));
  REQUIRE(src.ok());
  gguf::GgufWriter w;
  for (const auto& e : src->metadata()) {
    if (e.key != "general.alignment") w.set(e.key, e.value);
  }
  edit_meta(w);
  for (const auto& t : src->tensors()) {
    std::vector<int64_t> shape = t.shape;
    if (edit_shape) edit_shape(t.name, shape);
    if (edit_data) {
      std::vector<uint8_t> bytes(src->tensor_data(t), src->tensor_data(t) + t.n_bytes);
      edit_data(t.name, bytes);
      w.add_tensor(t.name, shape, t.type, std::move(bytes));
    } else {
      w.add_tensor_view(t.name, shape, t.type, {src->tensor_data(t), t.n_bytes});
    }
  }
  const std::string path = tmp.file(model + "-variant.gguf");
  REQUIRE(w.write(path).ok());
  return path;
}

// A file's logits against llama.cpp's (llama-dump-logits, tests/data/references).
struct Agreement {
  double worst_rel_rms = 0;  // the worst row's RMS difference over that row's spread
  int top1_checked = 0;      // rows whose reference top-1 leads by more than twice our largest error
  int top1_agree = 0;        // of those, rows where ours has the same top-1
  int rows = 0;
};

// The file's logits at the reference's prompt positions (512-token context, as
// llama-dump-logits ran it) against the reference `reference_of`.
inline Agreement against_llama(const std::string& reference_of, const std::string& path) {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(path, *be);
  INFO((m.ok() ? std::string() : m.error().what()));
  REQUIRE(m.ok());
  const auto ids = read_reference_ids(reference_path(reference_of + ".reference.txt"), "prompt");
  const std::vector<int32_t> prompt(ids.begin(), ids.end());
  auto s = model::Session::create(**m, 512);
  REQUIRE(s.ok());
  auto all = s->evaluate_all(prompt);
  REQUIRE(all.ok());
  const int64_t n_vocab = (*m)->config().n_vocab;
  const auto ref = reference_logits(reference_of);
  const std::vector<float> ours = ref.same_rows(*all, n_vocab);
  Agreement a;
  for (size_t r = 0; r < ref.rows.size(); ++r) {
    double mean = 0, var = 0, d2 = 0, dmax = 0;
    const float* e = ref.values.data() + r * static_cast<size_t>(n_vocab);
    const float* o = ours.data() + r * static_cast<size_t>(n_vocab);
    for (int64_t v = 0; v < n_vocab; ++v) mean += static_cast<double>(e[v]);
    mean /= static_cast<double>(n_vocab);
    for (int64_t v = 0; v < n_vocab; ++v) {
      const double ev = e[v], d = static_cast<double>(o[v]) - ev;
      var += (ev - mean) * (ev - mean);
      d2 += d * d;
      dmax = std::max(dmax, std::abs(d));
    }
    a.worst_rel_rms = std::max(a.worst_rel_rms, std::sqrt(d2 / var));
    double best = -INFINITY, second = -INFINITY;  // the reference's two largest logits
    for (int64_t v = 0; v < n_vocab; ++v) {
      const double ev = e[v];
      second = std::max(second, std::min(best, ev));
      best = std::max(best, ev);
    }
    if (best - second > 2 * dmax) {
      ++a.top1_checked;
      a.top1_agree += std::max_element(e, e + n_vocab) - e == std::max_element(o, o + n_vocab) - o ? 1 : 0;
    }
    ++a.rows;
  }
  return a;
}

// A stream of n token ids in [2, 502) after BOS; `salt` makes a different one.
inline std::vector<int32_t> token_stream(size_t n, int salt = 0) {
  std::vector<int32_t> t = {1};
  for (size_t i = 1; i < n; ++i)
    t.push_back(2 + static_cast<int32_t>((i * 131 + static_cast<size_t>(salt) * 17) % 500));
  return t;
}

// The largest difference between got's last row and row n - 1 of want (rows of n_vocab).
inline double last_row_diff(std::span<const float> got, const std::vector<float>& want, size_t n, int64_t n_vocab) {
  REQUIRE(got.size() >= static_cast<size_t>(n_vocab));
  REQUIRE(want.size() >= n * static_cast<size_t>(n_vocab));
  double d = 0;
  for (int64_t v = 0; v < n_vocab; ++v) {
    const double a = got[got.size() - static_cast<size_t>(n_vocab) + static_cast<size_t>(v)];
    const double b = want[(n - 1) * static_cast<size_t>(n_vocab) + static_cast<size_t>(v)];
    d = std::max(d, std::abs(a - b));
  }
  return d;
}

// Every position's logits of one uncached pass over `tokens`.
inline std::vector<float> uncached_logits(const model::Model& m, std::span<const int32_t> tokens) {
  auto s = model::Session::create(m, 1024);
  REQUIRE(s.ok());
  auto all = s->evaluate_all(tokens);
  REQUIRE(all.ok());
  return {all->begin(), all->end()};
}

// A 200-token stream evaluated in turns of 50 (prefill chunks of 16, which group a batch's tokens
// otherwise than one whole pass) gives each turn's last logits bit for bit as one uncached pass
// does (F16 KV, the same kernels), reusing every earlier turn; and again after every block went
// to T1 and came back.
inline void check_turns_equal_uncached(model::Model& m) {
  const int64_t n_vocab = m.config().n_vocab;
  const std::vector<int32_t> stream = token_stream(200);
  const std::vector<float> want = uncached_logits(m, stream);
  auto probe = model::Session::create(m, 256);
  REQUIRE(probe.ok());
  model::SessionOptions o;
  o.n_ctx = 256;
  o.n_batch = 16;
  o.budget.t1_bytes = 64 * probe->cache().layout().block_bytes;  // room in T1 for every block
  auto s = model::Session::create(m, o);
  REQUIRE(s.ok());
  for (size_t n = 50; n <= stream.size(); n += 50) {
    auto l = s->evaluate(std::span(stream).first(n));
    INFO("after " << n << " tokens");
    REQUIRE(l.ok());
    CHECK(s->n_reused() == static_cast<int64_t>(n - 50));
    CHECK(last_row_diff(*l, want, n, n_vocab) == 0.0);
  }
  s->clear();
  s->cache().demote_all_unpinned(kv::Tier::t1);
  auto back = s->evaluate(stream);
  REQUIRE(back.ok());
  CHECK(s->n_reused() == 192);
  CHECK(last_row_diff(*back, want, stream.size(), n_vocab) == 0.0);
}

}  // namespace kvc::test
