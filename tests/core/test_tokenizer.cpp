// Tests of the tokenizer against the original SentencePiece models, and of the streaming decoder.
#include <sentencepiece_processor.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/train_vocabulary.h"
#include "support/test_support.h"

namespace tk = kvc::tokenizer;
using tk::TokenType;

namespace {

// Pieces, scores and types of a .model read through sentencepiece's own API (independently of
// our protobuf writer). sentencepiece 0.1.97 has no IsUserDefined(); these models have none.
tk::Vocabulary vocabulary_of(const sentencepiece::SentencePieceProcessor& sp) {
  tk::Vocabulary v;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    v.tokens.push_back(sp.IdToPiece(id));
    v.scores.push_back(sp.GetScore(id));
    TokenType t = TokenType::normal;
    if (sp.IsUnknown(id))
      t = TokenType::unknown;
    else if (sp.IsControl(id))
      t = TokenType::control;
    else if (sp.IsByte(id))
      t = TokenType::byte;
    else if (sp.IsUnused(id))
      t = TokenType::unused;
    v.types.push_back(static_cast<int32_t>(t));
  }
  v.unk_id = sp.unk_id();
  v.bos_id = sp.bos_id();
  v.eos_id = sp.eos_id();
  return v;
}

struct Stories {
  sentencepiece::SentencePieceProcessor sp;
  tk::Vocabulary vocab;
  Stories() {
    REQUIRE(sp.Load(kvc::test::model_path("stories260K.tok512.model")).ok());
    vocab = vocabulary_of(sp);
  }
  std::vector<int32_t> reference(const std::string& text) const {
    std::vector<int> ids;
    REQUIRE(sp.Encode(text, &ids).ok());
    return {ids.begin(), ids.end()};
  }
};

const Stories& stories() {
  static const Stories s;
  return s;
}

tk::Tokenizer make(const tk::Vocabulary& v) {
  auto r = tk::Tokenizer::create(v);
  INFO((r.ok() ? std::string() : r.error().what()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Text without leading, trailing or repeated whitespace, where the .model's own normalizer
// (it collapses whitespace) agrees with the GGUF convention.
const std::vector<std::string> k_texts = {
    "Once upon a time, there was a little girl named Lily.",
    "She liked to play outside in the sun with her dog Max!",
    "Numbers: 0 1 2 3 42 1234567890 3.14159 -17 1e9 2025-03-01",
    "Accents: café, naïve, façade, Zürich, crème brûlée, São Paulo, Ångström",
    "CJK: 日本語のテキスト 中文字符 한국어 텍스트",
    "Emoji: 🎉 🚀 👨‍👩‍👧 🇫🇷 ☕",
    "Code: int main() { return a[i] + b->c * (d - e) / f; } // done",
    "def f(x):\n\treturn {'k': [x, x**2]}",
    "Punctuation: !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "Greek Ωμέγα, Cyrillic Привет, Arabic مرحبا, Hebrew שלום, Hindi नमस्ते",
    "Math ∑∫√≤≥≠∞π and arrows → ← ↑ ↓",
    "Lines\nwith\nnewlines",
    "a",
    "The end.",
};

}  // namespace

TEST_CASE("tokenizer: ids equal the original stories260K .model on varied text", "[core]") {
  const Stories& s = stories();
  const auto tok = make(s.vocab);
  REQUIRE(tok.n_vocab() == 512);
  for (const auto& text : k_texts) {
    INFO(text);
    const auto ids = tok.encode(text, false, false);
    CHECK(ids == s.reference(text));
    CHECK(tok.encode(text, true, false) == concat({tok.bos()}, s.reference(text)));
    CHECK(tok.decode(ids) == text);
    std::string sp_text;
    REQUIRE(s.sp.Decode(std::vector<int>(ids.begin(), ids.end()), &sp_text).ok());
    CHECK(tok.decode(ids) == sp_text);
  }
  // Byte fallback really happened (stories260K has no CJK pieces), so the test covers it.
  const auto cjk = tok.encode("日本語", false, false);
  CHECK(std::count_if(cjk.begin(), cjk.end(), [&](int32_t id) { return tok.type(id) == TokenType::byte; }) == 9);
}

TEST_CASE("tokenizer: stories260K ids equal llama.cpp's reference", "[core]") {
  const auto tok = make(stories().vocab);
  const auto ref = kvc::test::reference_path("stories260K.reference.txt");
  const auto prompt = kvc::test::read_reference_ids(ref, "prompt");
  CHECK(tok.encode("Once upon a time", true, false) == std::vector<int32_t>(prompt.begin(), prompt.end()));
  // The reference's text is llama.cpp's rendering of its greedy ids: the rest of the file.
  std::ifstream in(ref);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string all = buffer.str();
  const auto at = all.find("text: ");
  REQUIRE(at != std::string::npos);
  std::string text = all.substr(at + 6);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto greedy = kvc::test::read_reference_ids(ref, "greedy");
  CHECK(tok.decode(std::vector<int32_t>(greedy.begin(), greedy.end())) == text);
}

TEST_CASE("tokenizer: leading, trailing and repeated whitespace is kept", "[core]") {
  const Stories& s = stories();
  const auto tok = make(s.vocab);
  for (const std::string text : {"  two leading spaces", "a  b   c", "trailing  ", "\n\nnewlines first",
                                 "tab\tand  \t mixed", " ", "x\n\n\ny"}) {
    INFO("[" << text << "]");
    CHECK(tok.decode(tok.encode(text, true, false)) == text);
  }
  // The .model collapses "a  b" to "a b"; we must not (one more space piece).
  const auto ours = tok.encode("a  b", false, false);
  CHECK(tok.decode(s.reference("a  b")) == "a b");
  CHECK(ours.size() == s.reference("a b").size() + 1);
  // The dummy prefix is one space: " x" encodes like "x" after a space piece.
  CHECK(tok.encode(" hello", false, false).size() == tok.encode("hello", false, false).size() + 1);
}

TEST_CASE("tokenizer: empty text, BOS and EOS", "[core]") {
  auto v = stories().vocab;
  const auto tok = make(v);
  CHECK(tok.encode("", false, false).empty());
  CHECK(tok.encode("", true, false) == std::vector<int32_t>{1});
  CHECK(tok.bos() == 1);
  CHECK(tok.eos() == 2);
  CHECK(tok.wants_bos());
  CHECK_FALSE(tok.wants_eos());
  CHECK(tok.is_control(1));
  CHECK(tok.is_end_of_generation(2));
  CHECK_FALSE(tok.is_end_of_generation(1));
  CHECK_FALSE(tok.is_end_of_generation(-1));
  CHECK_FALSE(tok.is_end_of_generation(512));
  CHECK(tok.piece(2) == "</s>");
  CHECK(tok.find_piece("</s>") == 2);
  CHECK(tok.find_piece("no such piece") == -1);
  // Control tokens give no text when decoded, and the dummy space after BOS is removed.
  CHECK(tok.decode(concat({1}, concat(tok.encode("hi there", false, false), {2}))) == "hi there");

  v.bos_id = -1;
  v.add_bos = false;
  const auto no_bos = make(v);
  CHECK_FALSE(no_bos.wants_bos());
  CHECK(no_bos.encode("hi", true, false) == tok.encode("hi", false, false));
}

TEST_CASE("tokenizer: parse_special turns control pieces in the text into ids", "[core]") {
  auto v = stories().vocab;
  v.tokens.push_back("<|im_start|>");
  v.tokens.push_back("<|im_end|>");
  v.tokens.push_back("<tool>");
  v.scores.insert(v.scores.end(), {0.0f, 0.0f, 0.0f});
  v.types.insert(v.types.end(), {3, 3, 4});  // control, control, user-defined
  const auto tok = make(v);
  const int32_t im_start = 512;
  const int32_t im_end = 513;
  const int32_t tool = 514;
  const Stories& s = stories();

  CHECK(tok.is_end_of_generation(im_end));
  CHECK_FALSE(tok.is_end_of_generation(im_start));

  // llama.cpp's rule: every plain-text fragment gets the dummy prefix, also after a special.
  const std::string text = "<|im_start|>user\nHello<|im_end|>\n<s>x</s>";
  const auto ids = tok.encode(text, false, true);
  std::vector<int32_t> expected = {im_start};
  for (const std::vector<int32_t>& part : std::initializer_list<std::vector<int32_t>>{
           s.reference("user\nHello"), {im_end}, s.reference("\n"), {1}, s.reference("x"), {2}}) {
    expected = concat(expected, part);
  }
  CHECK(ids == expected);
  CHECK(tok.decode(ids) == "user\nHello \n x");

  // Without parse_special, the markers are plain text (as the .model tokenizes them).
  CHECK(tok.encode("<s>x</s>", false, false) == s.reference("<s>x</s>"));
  CHECK(tok.decode(tok.encode(text, false, false)) == text);
  // User-defined pieces are always atomic.
  CHECK(tok.encode("a<tool>b", false, false) == concat(concat(s.reference("a"), {tool}), s.reference("b")));
  CHECK(tok.decode({std::vector<int32_t>{tool}}) == "<tool>");

  // A continuation has no dummy prefix at its start, but still after specials.
  const auto cont = tok.encode_continuation("Hi<|im_end|>yo", true);
  REQUIRE(!cont.empty());
  CHECK(tok.piece(cont.front()).substr(0, 3) != "\xe2\x96\x81");
  CHECK(std::string(tok.token_bytes(cont.front())).find(' ') == std::string::npos);
  const auto im_end_at = std::find(cont.begin(), cont.end(), im_end);
  REQUIRE(im_end_at != cont.end());
  CHECK(std::vector<int32_t>(im_end_at + 1, cont.end()) == s.reference("yo"));
}

TEST_CASE("tokenizer: gpt-oss's harmony tokens are written out, and <|end|> ends no generation there", "[core]") {
  auto v = stories().vocab;
  for (const char* piece : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"}) {
    v.tokens.emplace_back(piece);
    v.scores.push_back(0.0f);
    v.types.push_back(3);  // control, as in gpt-oss's vocabulary
  }
  const auto tok = make(v);
  const int32_t start = 512;
  const int32_t channel = 513;
  const int32_t message = 514;
  const int32_t end = 515;
  const int32_t ret = 516;
  const int32_t call = 517;
  // The reply's channels show in its text (llama.cpp writes these out for gpt-oss).
  const std::string reply = "<|channel|>analysis<|message|>sum<|end|><|start|>assistant<|channel|>final<|message|>4";
  const auto ids = tok.encode_continuation(reply, true);
  CHECK(std::count(ids.begin(), ids.end(), end) == 1);
  CHECK(std::count(ids.begin(), ids.end(), channel) == 2);
  CHECK(tok.decode({std::vector<int32_t>{channel, message, end, start}}) == "<|channel|><|message|><|end|><|start|>");
  CHECK_FALSE(tok.is_end_of_generation(start));
  // <|end|> closes the analysis message; <|return|> and <|call|> end the reply.
  CHECK_FALSE(tok.is_end_of_generation(end));
  CHECK(tok.is_end_of_generation(ret));
  CHECK(tok.is_end_of_generation(call));
  CHECK(tok.decode({std::vector<int32_t>{ret}}).empty());

  // Without <|return|> and <|call|> (Phi-3's vocabulary), <|end|> ends a reply and writes nothing.
  auto phi = stories().vocab;
  phi.tokens.emplace_back("<|end|>");
  phi.scores.push_back(0.0f);
  phi.types.push_back(3);
  const auto phi_tok = make(phi);
  CHECK(phi_tok.is_end_of_generation(512));
  CHECK(phi_tok.decode({std::vector<int32_t>{512}}).empty());
}

TEST_CASE("tokenizer: unsupported model types and invalid vocabularies are clear errors", "[core]") {
  const auto good = stories().vocab;
  const auto expect_error = [](const tk::Vocabulary& v, kvc::ErrorCode code, const std::string& words) {
    const auto r = tk::Tokenizer::create(v);
    REQUIRE_FALSE(r.ok());
    INFO(r.error().what());
    CHECK(r.error().code == code);
    CHECK(r.error().message.find(words) != std::string::npos);
  };
  auto v = good;
  v.model = "bert";
  expect_error(v, kvc::ErrorCode::unsupported, "\"bert\"");
  v = good;
  v.model = "gpt2";
  v.pre = "klingon-bpe";
  expect_error(v, kvc::ErrorCode::unsupported, "'klingon-bpe' (tokenizer.ggml.pre)");
  v.pre = "gpt-2";
  v.merges = {"a b", "nospace"};
  expect_error(v, kvc::ErrorCode::invalid_file, "merge 1 (tokenizer.ggml.merges) \"nospace\"");
  v = good;
  v.tokens.clear();
  v.scores.clear();
  v.types.clear();
  expect_error(v, kvc::ErrorCode::invalid_file, "empty");
  v = good;
  v.scores.pop_back();
  expect_error(v, kvc::ErrorCode::invalid_file, "512 tokens but 511 scores");
  v = good;
  v.types.push_back(1);
  expect_error(v, kvc::ErrorCode::invalid_file, "tokenizer.ggml.token_type");
  v = good;
  v.types[300] = 7;
  expect_error(v, kvc::ErrorCode::invalid_file, "token 300");
  v = good;
  v.types[300] = 0;
  expect_error(v, kvc::ErrorCode::invalid_file, "has type 0");
  v = good;
  v.tokens[400] = v.tokens[300];
  expect_error(v, kvc::ErrorCode::invalid_file, "duplicates token 300");
  v = good;
  v.tokens[400].clear();
  expect_error(v, kvc::ErrorCode::invalid_file, "token 400 is an empty string");
  v = good;
  v.bos_id = 512;
  expect_error(v, kvc::ErrorCode::invalid_file, "tokenizer.ggml.bos_token_id");
  v = good;
  v.eos_id = -5;
  expect_error(v, kvc::ErrorCode::invalid_file, "tokenizer.ggml.eos_token_id");
  v = good;
  v.types[0] = 1;
  v.unk_id = -1;
  expect_error(v, kvc::ErrorCode::invalid_file, "no token has type unknown");
  v = good;
  v.unk_id = 5;
  expect_error(v, kvc::ErrorCode::invalid_file, "unknown-token id 5");
  v = good;
  v.types[3 + 0x41] = 1;  // <0x41> no longer a byte piece
  expect_error(v, kvc::ErrorCode::invalid_file, "<0x41> is missing");
  v = good;
  v.types[300] = 6;
  expect_error(v, kvc::ErrorCode::invalid_file, "not spelled <0xXX>");
  v = good;
  v.scores[300] = std::numeric_limits<float>::quiet_NaN();
  expect_error(v, kvc::ErrorCode::invalid_file, "not finite");
}

TEST_CASE("tokenizer: the streaming decoder holds back split UTF-8 sequences", "[core]") {
  const auto tok = make(stories().vocab);
  const auto byte = [&](int b) { return 3 + b; };  // stories260K: <0x00> is id 3
  REQUIRE(tok.piece(byte(0xF0)) == "<0xF0>");

  tk::StreamDecoder d(tok);
  // 🎉 = F0 9F 8E 89: nothing comes out until the fourth byte.
  CHECK(d.push(byte(0xF0)).empty());
  CHECK(d.push(byte(0x9F)).empty());
  CHECK(d.push(byte(0x8E)).empty());
  CHECK(d.n_pending_bytes() == 3);
  CHECK(d.push(byte(0x89)) == "🎉");
  CHECK(d.n_pending_bytes() == 0);
  // A broken sequence becomes U+FFFD and the next byte is kept.
  CHECK(d.push(byte(0xC3)).empty());
  CHECK(d.push(byte('A')) ==
        "\xef\xbf\xbd"
        "A");
  // An unfinished sequence at the end of the stream becomes U+FFFD.
  CHECK(d.push(byte(0xE6)).empty());
  CHECK(d.finish() == "\xef\xbf\xbd");

  // Token by token, the pieces add up to decode(), and only the stream's first space goes.
  const std::string text = "Hi 日本 and café 🎉 end";
  const auto ids = tok.encode(text, true, false);
  std::string streamed;
  size_t n_empty = 0;
  for (const int32_t id : ids) {
    const auto piece = d.push(id);
    n_empty += piece.empty();
    streamed += piece;
  }
  streamed += d.finish();
  CHECK(streamed == text);
  CHECK(n_empty > 6);  // BOS, and the held-back bytes of 日, 本 and 🎉
  // After finish() a new stream starts and strips its first space again.
  const auto push_all = [](tk::StreamDecoder& decoder, const std::vector<int32_t>& all) {
    std::string out;
    for (const int32_t id : all) out += decoder.push(id);
    return out;
  };
  CHECK(push_all(d, tok.encode("x y", false, false)) == "x y");
  tk::StreamDecoder keep(tok, false);
  CHECK(push_all(keep, tok.encode("x y", false, false)) == " x y");
}

TEST_CASE("tokenizer: drain_utf8 follows Unicode's replacement rules", "[core]") {
  const auto drain = [](std::string bytes, bool final) {
    std::string out;
    tk::drain_utf8(bytes, out, final);
    return std::make_pair(out, bytes);
  };
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(drain("ab\xc3\xa9", false) == std::make_pair(std::string("ab\xc3\xa9"), std::string()));
  CHECK(drain("ab\xe6\x97", false) == std::make_pair(std::string("ab"), std::string("\xe6\x97")));
  CHECK(drain("\xe6\x97", true).first == fffd);
  CHECK(drain("\xc0\xaf", false).first == fffd + fffd);                        // overlong lead byte C0
  CHECK(drain("\xe0\x80\x80", false).first == fffd + fffd + fffd);             // overlong 3-byte form
  CHECK(drain("\xed\xa0\x80", false).first == fffd + fffd + fffd);             // surrogate
  CHECK(drain("\xf4\x90\x80\x80", false).first == fffd + fffd + fffd + fffd);  // > U+10FFFF
  CHECK(drain("\xe6\x97x", false).first == fffd + "x");                        // truncated by an ASCII byte
  CHECK(drain("\x80", false).first == fffd);                                   // lone continuation byte
}

TEST_CASE("tokenizer: train_vocabulary on the demo corpus", "[core]") {
  const std::string corpus = std::string(KVC_ASSET_DIR) + "/demo/corpus.txt";
  std::string model;
  auto trained = tk::train_vocabulary(corpus, 1024, &model);
  INFO((trained.ok() ? std::string() : trained.error().what()));
  REQUIRE(trained.ok());
  const auto& v = trained.value();
  CHECK(v.tokens.size() == 1024);
  CHECK(v.tokens[0] == "<unk>");
  CHECK(v.tokens[1] == "<s>");
  CHECK(v.tokens[2] == "</s>");
  CHECK(std::count(v.types.begin(), v.types.end(), 6) == 256);
  const auto tok = make(v);

  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(model).ok());
  std::ifstream in(corpus);
  std::string line;
  size_t n_lines = 0;
  while (std::getline(in, line)) {
    INFO("[" << line << "]");
    const auto ids = tok.encode(line, false, false);
    std::vector<int> ref;
    REQUIRE(sp.Encode(line, &ref).ok());  // this .model keeps whitespace, like the GGUF convention
    CHECK(ids == std::vector<int32_t>(ref.begin(), ref.end()));
    CHECK(tok.decode(ids) == line);
    ++n_lines;
  }
  CHECK(n_lines > 500);

  // Deterministic: a second training gives the same vocabulary.
  auto again = tk::train_vocabulary(corpus, 1024);
  REQUIRE(again.ok());
  CHECK(again->tokens == v.tokens);
  CHECK(again->scores == v.scores);
  CHECK(again->types == v.types);

  const auto too_small = tk::train_vocabulary(corpus, 300);
  REQUIRE_FALSE(too_small.ok());
  CHECK(too_small.error().code == kvc::ErrorCode::invalid_argument);
  const auto missing = tk::train_vocabulary(corpus + ".missing", 1024);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == kvc::ErrorCode::io);
}
