// The model and the token ids that the KV cache, tier store and engine tests share.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
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

}  // namespace kvc::test
