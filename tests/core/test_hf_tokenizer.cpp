// tokenizer.json conversion: the SentencePiece form (Llama 2, Mistral, Gemma exported as BPE over
// U+2581-escaped text) turned back into a scored vocabulary, on small hand-written files. The
// real Gemma 2 / Gemma 3 files are checked against llama.cpp's ids in test_tokenizer_llama_cases.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/tokenizer.h"

using namespace kvc;
using nlohmann::json;

namespace {

const std::string k_mark = "\xE2\x96\x81";  // U+2581

std::string hex_byte(int b) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  return std::string("<0x") + k_hex[b >> 4] + k_hex[b & 15] + ">";
}

// <unk> <s> </s>, the 256 bytes (ids 3..258; the tab's slot spelled "\t" when tab_as_text, as
// Gemma 2's file has it), then pieces joined by four merges.
json spm_tokenizer(bool tab_as_text, json normalizer, json pre_tokenizer = nullptr) {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[b == 9 && tab_as_text ? std::string("\t") : hex_byte(b)] = 3 + b;
  int id = 259;
  for (const std::string& p : {k_mark, std::string("a"), std::string("b"), std::string("ab"), k_mark + "a",
                               k_mark + "ab", std::string("ba")}) {
    vocab[p] = id++;
  }
  json t;
  t["normalizer"] = std::move(normalizer);
  t["pre_tokenizer"] = std::move(pre_tokenizer);
  t["model"] = {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"byte_fallback", true},
                {"dropout", nullptr},
                {"vocab", vocab},
                {"merges", json::array({json::array({"a", "b"}), json::array({k_mark, "a"}),
                                        json::array({k_mark + "a", "b"}), json::array({"b", "a"})})}};
  t["added_tokens"] = json::array({
      {{"id", 0}, {"content", "<unk>"}, {"special", true}},
      {{"id", 1}, {"content", "<s>"}, {"special", true}},
      {{"id", 2}, {"content", "</s>"}, {"special", true}},
      {{"id", 266}, {"content", "<start_of_turn>"}, {"special", false}},
      {{"id", 267}, {"content", "<unused0>"}, {"special", false}},
  });
  return t;
}

json replace_spaces() { return {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", k_mark}}; }

const std::string k_config = R"({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true})";

int32_t id_of(const tokenizer::Vocabulary& v, const std::string& piece) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == piece) return static_cast<int32_t>(i);
  }
  return -1;
}

tokenizer::TokenType type_of(const tokenizer::Vocabulary& v, const std::string& piece) {
  return static_cast<tokenizer::TokenType>(v.types[static_cast<size_t>(id_of(v, piece))]);
}

}  // namespace

TEST_CASE("convert-vocab: a SentencePiece tokenizer.json becomes a scored SentencePiece vocabulary", "[core]") {
  const auto v = tokenizer::vocabulary_from_hf(spm_tokenizer(false, replace_spaces()).dump(), k_config, {});
  INFO((v.ok() ? std::string() : v.error().what()));
  REQUIRE(v.ok());
  CHECK(v->model == "llama");
  CHECK(v->merges.empty());
  CHECK_FALSE(v->add_space_prefix);  // Replace alone: no space before the text (Gemma)
  CHECK(v->bos_id == 1);
  CHECK(v->eos_id == 2);
  CHECK(v->unk_id == 0);
  // A joined piece scores minus the rank of the merge that makes it; nothing a merge makes scores
  // below them all.
  const auto score = [&](const std::string& p) { return v->scores[static_cast<size_t>(id_of(*v, p))]; };
  CHECK(score("ab") == 0.0f);
  CHECK(score(k_mark + "a") == -1.0f);
  CHECK(score(k_mark + "ab") == -2.0f);
  CHECK(score("ba") == -3.0f);
  CHECK(score("a") < -4.0f);
  CHECK(type_of(*v, "<unk>") == tokenizer::TokenType::unknown);
  CHECK(type_of(*v, "<s>") == tokenizer::TokenType::control);
  CHECK(type_of(*v, hex_byte(0x41)) == tokenizer::TokenType::byte);
  CHECK(type_of(*v, "ab") == tokenizer::TokenType::normal);
  // Added tokens: user-defined unless marked special or spelled like a control token.
  CHECK(type_of(*v, "<start_of_turn>") == tokenizer::TokenType::user_defined);
  CHECK(type_of(*v, "<unused0>") == tokenizer::TokenType::control);

  auto tok = tokenizer::Tokenizer::create(*v);
  INFO((tok.ok() ? std::string() : tok.error().what()));
  REQUIRE(tok.ok());
  // "aba ab": "ab" joins before "ba" (higher score), then "▁ab" beats nothing else.
  CHECK(tok->encode("aba ab", false, false) ==
        std::vector<int32_t>{id_of(*v, "ab"), id_of(*v, "a"), id_of(*v, k_mark + "ab")});
  // A character outside the vocabulary falls back to its bytes.
  CHECK(tok->encode("c", false, false) == std::vector<int32_t>{3 + 'c'});
  // A user-defined token is always its id; a control one only when special tokens are parsed.
  CHECK(tok->encode("<start_of_turn>", false, false) == std::vector<int32_t>{266});
  CHECK(tok->encode("<unused0>", false, true) == std::vector<int32_t>{267});
  CHECK(tok->encode("<unused0>", false, false) != std::vector<int32_t>{267});
}

TEST_CASE("convert-vocab: the space prefix follows a Prepend normalizer or a Metaspace prepend_scheme", "[core]") {
  const json prepend = {{"type", "Sequence"},
                        {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", k_mark}}, replace_spaces()})}};
  auto v = tokenizer::vocabulary_from_hf(spm_tokenizer(false, prepend).dump(), k_config, {});
  REQUIRE(v.ok());
  CHECK(v->add_space_prefix);  // Llama 2
  auto tok = tokenizer::Tokenizer::create(*v);
  REQUIRE(tok.ok());
  CHECK(tok->encode("ab", false, false) == std::vector<int32_t>{id_of(*v, k_mark + "ab")});

  for (const auto& [scheme, prefix] :
       {std::pair<std::string, bool>{"first", true}, {"always", true}, {"never", false}}) {
    INFO(scheme);
    const json meta = {{"type", "Metaspace"}, {"replacement", k_mark}, {"prepend_scheme", scheme}, {"split", false}};
    v = tokenizer::vocabulary_from_hf(spm_tokenizer(false, nullptr, meta).dump(), k_config, {});
    REQUIRE(v.ok());
    CHECK(v->model == "llama");
    CHECK(v->add_space_prefix == prefix);
  }
}

TEST_CASE("convert-vocab: a byte slot spelled as its character (Gemma 2's tab) becomes the byte piece", "[core]") {
  const auto v = tokenizer::vocabulary_from_hf(spm_tokenizer(true, replace_spaces()).dump(), k_config, {});
  REQUIRE(v.ok());
  CHECK(v->tokens[3 + 9] == "<0x09>");
  CHECK(v->types[3 + 9] == static_cast<int32_t>(tokenizer::TokenType::byte));
  auto tok = tokenizer::Tokenizer::create(*v);  // SentencePiece needs all 256 byte pieces
  INFO((tok.ok() ? std::string() : tok.error().what()));
  REQUIRE(tok.ok());
  CHECK(tok->encode("\t", false, false) == std::vector<int32_t>{3 + 9});
  const std::vector<int32_t> tab{3 + 9};
  CHECK(tok->decode(tab) == "\t");
}

TEST_CASE("convert-vocab: tokenizer.json files it cannot convert are refused with the reason", "[core]") {
  // --pre names a byte-level pre-tokenizer: meaningless for SentencePiece.
  tokenizer::HfConvertOptions with_pre;
  with_pre.pre = "llama-bpe";
  auto v = tokenizer::vocabulary_from_hf(spm_tokenizer(false, replace_spaces()).dump(), k_config, with_pre);
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(v.error().message, Catch::Contains("SentencePiece"));

  // Neither byte-level nor U+2581-escaped (a BPE that splits on whitespace), and a Unigram model.
  json plain = spm_tokenizer(false, nullptr);
  v = tokenizer::vocabulary_from_hf(plain.dump(), k_config, {});
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().code == ErrorCode::unsupported);
  CHECK_THAT(v.error().message, Catch::Contains("byte-level") && Catch::Contains("SentencePiece"));
  json unigram = spm_tokenizer(false, replace_spaces());
  unigram["model"]["type"] = "Unigram";
  v = tokenizer::vocabulary_from_hf(unigram.dump(), k_config, {});
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().code == ErrorCode::unsupported);
}
