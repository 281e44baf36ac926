// The tokenizer against llama.cpp's own expected ids: its test cases (VOCAB.gguf.inp/.out) for
// the SentencePiece vocabularies in tests/data/vocab, through the library and kvchat-cli.
#include <catch2/catch.hpp>

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
// it too); the .out file one line of ids per text.
std::vector<Case> llama_cases(const std::string& vocab) {
  const std::string inp = test::read_file(test::model_path(vocab + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t b = 0, e; (e = inp.find(sep, b)) != std::string::npos; b = e + sep.size()) {
    cases.push_back({inp.substr(b, e - b), {}});
  }
  std::istringstream out(test::read_file(test::model_path(vocab + ".out")));
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

std::string ids_line(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

}  // namespace

TEST_CASE("tokenizer: llama.cpp's test cases for the SentencePiece vocabularies", "[core]") {
  for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"}) {
    DYNAMIC_SECTION(vocab) {
      const auto tok = load_tokenizer(vocab);
      const auto cases = llama_cases(vocab);
      REQUIRE(cases.size() >= 40);
      int n_empty = 0;
      for (const Case& c : cases) {
        INFO("text: \"" << c.text << "\"");
        CHECK(tok.encode(c.text, false, false) == c.ids);
        n_empty += c.ids.empty();
      }
      CHECK(n_empty <= 1);  // only the empty text has no ids: the files were read right
    }
  }
}

TEST_CASE("cli: tokenize --no-bos -f prints llama.cpp's ids for every test case", "[app][e2e]") {
  test::TempDir tmp;
  for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"}) {
    int n = 0;
    for (const Case& c : llama_cases(vocab)) {
      const std::string file = tmp.file("case" + std::to_string(n++) + ".txt");
      std::ofstream(file, std::ios::binary) << c.text;
      const auto r = test::cli("tokenize -m " + test::quoted(test::model_path(vocab)) + " --no-bos -f " + test::quoted(file), tmp);
      INFO(vocab << " text: \"" << c.text << "\"\n" << r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(r.out == ids_line(c.ids) + "\n");
    }
  }
}
