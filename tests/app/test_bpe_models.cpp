// Models with byte-level BPE vocabularies end to end: mkmodel --vocab-from the converted Llama 3
// and Qwen vocabularies, their chat templates recognised, UTF-8 streamed whole, and a reply
// that stops at the end-of-generation token the vocabulary declares.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
#include "core/model/session.h"
#include "core/tokenizer/tokenizer.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

const char* k_shape = " --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 -q";
const char* k_prompt = "你好，世界 🦙 — naïve café";

std::string fetched_missing() {
  const auto why = test::models_dir() / "hf-vocab-missing.txt";
  return std::filesystem::exists(why) ? "Llama 3 / Qwen vocabularies not fetched: " + test::read_file(why) : "";
}

std::string make_model(const test::TempDir& tmp, const std::string& vocab_path, const std::string& name) {
  const auto r = test::cli(std::string("mkmodel") + k_shape + " --vocab-from " + test::quoted(vocab_path) + " -o " +
                               test::quoted(tmp.file(name)),
                           tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return tmp.file(name);
}

// True when `s` is valid UTF-8 throughout.
bool valid_utf8(const std::string& s) {
  std::string rest = s, out;
  tokenizer::drain_utf8(rest, out, true);
  return out == s;
}

}  // namespace

TEST_CASE("bpe models: chat with the Llama 3 and Qwen vocabularies streams valid UTF-8 in their templates",
          "[app][e2e]") {
  if (const std::string why = fetched_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  for (const auto& [vocab, tmpl] :
       {std::pair{"ggml-vocab-llama-bpe.gguf", "llama-3"}, {"ggml-vocab-qwen2.gguf", "chatml"}}) {
    INFO(vocab);
    const std::string m = make_model(tmp, test::model_path(vocab), std::string("m-") + vocab);
    const auto r = test::cli("chat -m " + test::quoted(m) + " -n 24 --temp 0", tmp, std::string(k_prompt) + "\n");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains(std::string("chat template: ") + tmpl));
    CHECK(r.out.size() > 10);
    CHECK(valid_utf8(r.out));
  }
}

TEST_CASE("bpe models: a reply stops at the vocabulary's end-of-generation token", "[app][e2e]") {
  if (const std::string why = fetched_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  const std::string vocab_path = test::model_path("ggml-vocab-qwen2.gguf");
  const std::string m1 = make_model(tmp, vocab_path, "m1.gguf");
  // The greedy reply of this random model, with no stop.
  auto be = backend::make_cpu_backend(2);
  auto model = model::Model::load(m1, *be);
  REQUIRE(model.ok());
  const auto& tok = (*model)->tokenizer();
  const auto prompt = tok.encode(k_prompt, tok.wants_bos(), false);
  auto s = model::Session::create(**model, 256);
  REQUIRE(s.ok());
  const model::GenerateOptions opt = test::greedy_options(12);
  auto greedy = model::generate(*s, prompt, opt);
  REQUIRE(greedy.ok());
  const auto& g = greedy->tokens;
  REQUIRE(g.size() == 12);
  // The first token after the second that has not come before: declared the EOS in a copy of the vocabulary.
  size_t cut = 2;
  while (cut < g.size() && std::find(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(cut), g[cut]) !=
                               g.begin() + static_cast<std::ptrdiff_t>(cut))
    ++cut;
  REQUIRE(cut < g.size());
  auto f = gguf::GgufFile::open(vocab_path);
  REQUIRE(f.ok());
  auto v = model::vocabulary_from_gguf(*f);
  REQUIRE(v.ok());
  REQUIRE_FALSE(tok.is_end_of_generation(g[cut]));
  v->eos_id = g[cut];
  REQUIRE(model::write_vocabulary_file(*v, "", tmp.file("eos.gguf")).ok());
  // Same options and seed: the same weights, only the EOS differs.
  const std::string m2 = make_model(tmp, tmp.file("eos.gguf"), "m2.gguf");
  auto gen = [&](const std::string& m) {
    const auto r = test::cli(
        "generate -m " + test::quoted(m) + " -p " + test::quoted(k_prompt) + " -n 12 --temp 0 --repeat-penalty 1 -q",
        tmp);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const std::string full = gen(m1), stopped = gen(m2);
  const std::string want = tok.decode(std::span<const int32_t>(g).first(cut));
  INFO("full: " << full << "\nstopped: " << stopped << "\ncut at token " << cut);
  CHECK(stopped.substr(0, stopped.find_last_not_of('\n') + 1) == want.substr(0, want.find_last_not_of('\n') + 1));
  CHECK(full.size() > stopped.size());
  CHECK(full.rfind(stopped.substr(0, stopped.find_last_not_of('\n') + 1), 0) == 0);
}

TEST_CASE("cli: inspect of a vocabulary-only GGUF describes the tokenizer and says it holds no model", "[app][e2e]") {
  test::TempDir tmp;
  const auto r = test::cli("inspect " + test::quoted(test::model_path("ggml-vocab-gpt-2.gguf")), tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("tokenizer: byte-level BPE, pre-tokenizer gpt-2, 50257 tokens, 50000 merges"));
  CHECK_THAT(r.out, Catch::Contains("a reply ends at: \"<|endoftext|>\""));
  CHECK_THAT(r.out, Catch::Contains("model:     none: a vocabulary-only file"));
}
