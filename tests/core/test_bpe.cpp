// Byte-level BPE beyond llama.cpp's cases: the pre-tokenizer table, the byte-level alphabet,
// lossless decoding, streaming of split UTF-8, special tokens and end of generation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "support/test_support.h"

using namespace kvc;
using tokenizer::PreTokenizer;

namespace {

tokenizer::Tokenizer load(const std::string& vocab) {
  auto f = gguf::GgufFile::open(test::model_path(vocab));
  REQUIRE(f.ok());
  auto v = model::vocabulary_from_gguf(*f);
  INFO((v.ok() ? std::string() : v.error().what()));
  REQUIRE(v.ok());
  auto t = tokenizer::Tokenizer::create(*v);
  INFO((t.ok() ? std::string() : t.error().what()));
  REQUIRE(t.ok());
  return std::move(*t);
}

const std::string k_mixed =
    "Hello World! It's 2026: 12345 apples, naïve café — 你好世界, 🦙🚀 emoji\n\n\ttabs   spaces\r\nend.";

}  // namespace

TEST_CASE("pre-tokenizer: every known name compiles and its words cover the text exactly", "[core]") {
  const auto names = PreTokenizer::known_names();
  CHECK(names.size() >= 40);
  for (const std::string& name : names) {
    INFO(name);
    auto pre = PreTokenizer::create(name);
    REQUIRE(pre.ok());
    std::vector<std::string_view> words;
    pre->split(k_mixed, words);
    CHECK(words.size() > 5);
    std::string joined;
    for (std::string_view w : words) {
      CHECK(!w.empty());
      joined += w;
    }
    CHECK(joined == k_mixed);
  }
  auto bad = PreTokenizer::create("no-such-pre");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::unsupported);
  CHECK_THAT(bad.error().message, Catch::Contains("'no-such-pre'") && Catch::Contains("llama-bpe"));
}

TEST_CASE("pre-tokenizer: Llama 3 and GPT-2 split as their tokenizer.json expressions say", "[core]") {
  auto words_of = [](const char* pre, std::string_view text) {
    auto p = PreTokenizer::create(pre);
    REQUIRE(p.ok());
    std::vector<std::string_view> w;
    p->split(text, w);
    return std::vector<std::string>(w.begin(), w.end());
  };
  // Llama 3: numbers in groups of up to three, contractions case-insensitive, a newline run alone.
  CHECK(words_of("llama-bpe", "I'M 1234567 ok\n\nx") ==
        std::vector<std::string>{"I", "'M", " ", "123", "456", "7", " ok", "\n\n", "x"});
  // GPT-2: a space belongs to the following word; trailing spaces before a word stay apart.
  CHECK(words_of("gpt-2", "Hello  world's") == std::vector<std::string>{"Hello", " ", " world", "'s"});
  // Qwen 2: digits one by one.
  CHECK(words_of("qwen2", "x 2026") == std::vector<std::string>{"x", " ", "2", "0", "2", "6"});
  // DeepSeek LLM: "$" is the end of the piece only (no match before a final newline).
  CHECK(words_of("deepseek-llm", "ab  \n") == std::vector<std::string>{"ab", "  ", "\n"});
  // Invalid UTF-8 is kept, never dropped.
  const std::string bad = "a\xff\xfe b";
  std::string joined;
  for (const auto& w : words_of("llama-bpe", bad)) joined += w;
  CHECK(joined == bad);
}

TEST_CASE("byte-level alphabet: all 256 bytes round-trip, space and newline as GPT-2 spells them", "[core]") {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string spelled;
  tokenizer::append_byte_level(all, spelled);
  CHECK(tokenizer::decode_byte_level(spelled) == all);
  std::set<std::string> distinct;
  for (int b = 0; b < 256; ++b) {
    std::string one;
    tokenizer::append_byte_level(std::string(1, static_cast<char>(b)), one);
    distinct.insert(one);
  }
  CHECK(distinct.size() == 256);
  std::string s;
  tokenizer::append_byte_level(" \n!", s);
  CHECK(s == "\xc4\xa0\xc4\x8a!");  // U+0120 Ġ, U+010A Ċ, '!' itself
}

TEST_CASE("bpe: decoding gives back the text byte for byte, on every shipped BPE vocabulary", "[core]") {
  for (const char* vocab : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-falcon.gguf",
                            "ggml-vocab-starcoder.gguf", "ggml-vocab-mpt.gguf", "ggml-vocab-gpt-neox.gguf"}) {
    INFO(vocab);
    const auto tok = load(vocab);
    CHECK(tok.model() == "gpt2");
    const auto ids = tok.encode(k_mixed, false, false);
    CHECK(ids.size() > 20);
    CHECK(tok.decode(ids) == k_mixed);
  }
}

TEST_CASE("bpe: a character split across tokens streams only when complete", "[core]") {
  const auto tok = load("ggml-vocab-gpt-2.gguf");
  // GPT-2 has no token for these characters: each is several byte tokens.
  const std::string text = "你好🦙";
  const auto ids = tok.encode(text, false, false);
  REQUIRE(ids.size() > 3);
  tokenizer::StreamDecoder d(tok, tok.add_space_prefix());
  std::string out;
  size_t n_held = 0;
  for (const int32_t id : ids) {
    const std::string piece = d.push(id);
    n_held += d.n_pending_bytes() > 0;
    // Whatever comes out is whole characters: never a partial UTF-8 sequence.
    std::string check = piece, complete;
    tokenizer::drain_utf8(check, complete, false);
    CHECK(check.empty());
    CHECK(complete == piece);
    out += piece;
  }
  out += d.finish();
  CHECK(out == text);
  CHECK(n_held > 0);  // some bytes were held back
}

TEST_CASE("bpe: control tokens only with parse_special, user-defined always, end of generation", "[core]") {
  if (const auto why = test::models_dir() / "hf-vocab-missing.txt"; std::filesystem::exists(why)) {
    KVC_SKIP("Llama 3 / Qwen vocabularies not fetched: " << test::read_file(why));
  }
  const auto qwen = load("ggml-vocab-qwen2.gguf");
  const int32_t im_start = qwen.find_piece("<|im_start|>"), im_end = qwen.find_piece("<|im_end|>");
  const int32_t think = qwen.find_piece("<think>");
  REQUIRE(im_start == 151644);
  REQUIRE(im_end == 151645);
  REQUIRE(think == 151667);
  // Typed by a user (parse_special off): the control token's text is plain text.
  const auto typed = qwen.encode("<|im_start|>user", false, false);
  CHECK(std::find(typed.begin(), typed.end(), im_start) == typed.end());
  CHECK(qwen.decode(typed) == "<|im_start|>user");
  // From a chat template (parse_special on): one id.
  const auto templ = qwen.encode("<|im_start|>user\nhi<|im_end|>", false, true);
  CHECK(templ.front() == im_start);
  CHECK(templ.back() == im_end);
  // <think> is an added, non-special token: one id even in typed text.
  const auto with_think = qwen.encode("a<think>b", false, false);
  CHECK(std::find(with_think.begin(), with_think.end(), think) != with_think.end());
  // Qwen's turn end and its EOS stop a reply; an ordinary token does not.
  CHECK(qwen.is_end_of_generation(im_end));
  CHECK(qwen.is_end_of_generation(qwen.find_piece("<|endoftext|>")));
  CHECK_FALSE(qwen.is_end_of_generation(qwen.encode("hello", false, false).front()));

  const auto llama3 = load("ggml-vocab-llama-bpe.gguf");
  CHECK(llama3.wants_bos());
  CHECK(llama3.bos() == 128000);
  CHECK(llama3.encode("hi", true, false).front() == 128000);
  CHECK(llama3.is_end_of_generation(llama3.find_piece("<|eot_id|>")));
  CHECK(llama3.is_end_of_generation(128001));  // <|end_of_text|>, the EOS
  CHECK_FALSE(qwen.wants_bos());
}

TEST_CASE("tokenizer: no token stands for more than max_bytes_per_token bytes of text", "[core]") {
  // The server refuses a text longer than the context times this bound before tokenizing it.
  std::string long_runs = std::string(5000, 'a') + std::string(3000, ' ') + std::string(2000, '-') + "\n\n\n\n";
  for (int i = 0; i < 200; ++i) long_runs += "<|endoftext|><s>" + std::to_string(i * 7919);
  for (const char* vocab : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-deepseek-llm.gguf",
                            "ggml-vocab-starcoder.gguf", "stories260K.gguf"}) {
    INFO(vocab);
    const auto tok = load(vocab);
    const size_t bound = tok.max_bytes_per_token();
    REQUIRE(bound >= 4);
    for (const std::string& text : {k_mixed, long_runs}) {
      for (const bool special : {false, true}) {
        const auto ids = tok.encode(text, false, special);
        CHECK(ids.size() * bound >= text.size());
      }
    }
    // The bound is the longest piece: some piece is that long, none is longer.
    size_t longest = 0;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) longest = std::max(longest, tok.piece(id).size());
    CHECK(bound == std::max<size_t>(longest, 4));
  }
}
