// ConversationMapper on real tokenizers: a resent history becomes the app's segment-by-segment
// stream, with earlier answers mapped back to the ids that produced them.
#include <catch2/catch.hpp>

#include <random>

#include "app/common/chat_turn.h"
#include "app/server/conversation_mapper.h"
#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
#include "core/tokenizer/tokenizer.h"
#include "server/serve_process.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;
using chat::ChatMessage;
using server::ConversationMapper;

namespace {

std::unique_ptr<model::Model> load(const std::string& path, backend::Backend& be) {
  auto m = model::Model::load(path, be);
  INFO((m.ok() ? std::string() : m.error().message));
  REQUIRE(m.ok());
  return std::move(*m);
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// `n` ids of ordinary pieces, as a sampler might draw them, and their text as the engine
// streams it (no dummy-prefix space removed).
std::pair<std::vector<int32_t>, std::string> sampled_answer(const tokenizer::Tokenizer& tok, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, tok.n_vocab() - 1);
  std::vector<int32_t> ids;
  while (static_cast<int>(ids.size()) < n) {
    const int32_t id = dist(rng);
    if (tok.type(id) == tokenizer::TokenType::normal) ids.push_back(id);
  }
  tokenizer::StreamDecoder dec(tok, false);
  std::string text;
  for (const int32_t id : ids) text += dec.push(id);
  return {ids, text + dec.finish()};
}

void check_model(const model::Model& m) {
  const tokenizer::Tokenizer& tok = m.tokenizer();
  const chat::ChatTemplate& tmpl = m.chat_template();
  auto store = storage::AnswerStore::open("");
  REQUIRE(store.ok());
  const ConversationMapper mapper(m, **store);
  // The segment of a user turn after `history` (the messages so far, replies as generated).
  const auto seg = [&](std::string_view sys, const std::vector<ChatMessage>& history, std::string_view user) {
    auto s = app::build_user_turn(tok, tmpl, sys, history, user);
    REQUIRE(s.ok());
    return s->tokens;
  };

  const std::vector<ChatMessage> first = {{"system", "Be brief."}, {"user", "What is a cache?"}};
  auto p0 = mapper.map(first);
  REQUIRE(p0.ok());
  CHECK(p0->tokens == seg("Be brief.", {}, "What is a cache?"));
  CHECK(p0->n_answers == 0);

  // The engine sampled `ids`; the client got `text` and resends it. Tokenized afresh, some
  // sampled answers come back as other ids: why the mapping is needed at all.
  std::vector<int32_t> ids;
  std::string text;
  for (uint32_t seed = 1; seed <= 100 && ids.empty(); ++seed) {
    auto [sampled, streamed] = sampled_answer(tok, 24, seed);
    if (tok.encode_continuation(streamed, false) != sampled) ids = sampled, text = streamed;
  }
  REQUIRE_FALSE(ids.empty());
  mapper.remember(p0->tokens, text, ids);
  std::vector<ChatMessage> second = first;
  second.push_back({"assistant", text});
  second.push_back({"user", "And a block?"});
  auto p1 = mapper.map(second);
  REQUIRE(p1.ok());
  CHECK(p1->tokens == cat(cat(p0->tokens, ids),
                          seg("Be brief.", {{"user", "What is a cache?"}, {"assistant", text}}, "And a block?")));
  CHECK(p1->n_answers == 1);
  CHECK(p1->n_answers_recalled == 1);
  CHECK(p1->conversation == p0->conversation);

  // An answer the engine did not write (edited by the client): tokenized afresh.
  second[2].content = text + " (edited)";
  auto p2 = mapper.map(second);
  REQUIRE(p2.ok());
  CHECK(p2->n_answers_recalled == 0);
  CHECK(p2->tokens ==
        cat(cat(p0->tokens, tok.encode_continuation(second[2].content, false)),
            seg("Be brief.", {{"user", "What is a cache?"}, {"assistant", second[2].content}}, "And a block?")));

  // Two user messages in a row: the first one's reply is empty, as in ChatTemplate::render.
  auto p3 = mapper.map(std::vector<ChatMessage>{{"user", "a"}, {"user", "b"}});
  REQUIRE(p3.ok());
  CHECK(p3->tokens == cat(seg("", {}, "a"), seg("", {{"user", "a"}, {"assistant", ""}}, "b")));
  // An answer with no question before it follows an empty user turn.
  auto p4 = mapper.map(std::vector<ChatMessage>{{"assistant", "Hello!"}, {"user", "Hi"}});
  REQUIRE(p4.ok());
  CHECK(p4->tokens == cat(cat(seg("", {}, ""), tok.encode_continuation("Hello!", false)),
                          seg("", {{"user", ""}, {"assistant", "Hello!"}}, "Hi")));

  for (const auto& bad :
       {std::vector<ChatMessage>{{"system", "S"}}, std::vector<ChatMessage>{{"user", "a"}, {"assistant", "b"}}}) {
    auto r = mapper.map(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::invalid_argument);
  }
}

}  // namespace

TEST_CASE("conversation mapper: histories as the app's stream, answers as their sampled ids (SentencePiece)",
          "[server]") {
  auto be = backend::make_cpu_backend(1);
  auto m = load(test::model_path("tiny-gqa-q8_0.gguf"), *be);
  check_model(*m);
}

TEST_CASE("conversation mapper: the same on Qwen's byte-level BPE vocabulary and chatml", "[server]") {
  if (const std::string why = test::qwen_vocab_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(1);
  auto m = load(test::make_chat_model(tmp), *be);
  REQUIRE(m->chat_template().name() == "chatml");
  check_model(*m);
}

TEST_CASE("conversation mapper: the conversation id comes from the system prompt and first user message", "[server]") {
  const auto id = [](std::vector<ChatMessage> msgs) { return ConversationMapper::conversation_id(msgs); };
  const int64_t a = id({{"system", "S"}, {"user", "U"}});
  CHECK(a > 0);
  CHECK(a == id({{"system", "S"}, {"user", "U"}, {"assistant", "A"}, {"user", "V"}}));
  CHECK(a != id({{"system", "S2"}, {"user", "U"}}));
  CHECK(a != id({{"system", "S"}, {"user", "U2"}}));
  CHECK(a != id({{"user", "U"}}));
  CHECK(id({{"system", "ab"}, {"user", "c"}}) != id({{"system", "a"}, {"user", "bc"}}));
  CHECK(id({{"assistant", "A"}, {"user", "U"}}) == id({{"user", "U"}}));
}

TEST_CASE("conversation mapper: a DeepSeek-R1 template's prompt is its render, the opening ending it", "[server]") {
  test::TempDir tmp;
  // A model whose GGUF carries the R1 distill's template (stories260K's vocabulary).
  const std::filesystem::path r1_model =
      test::model_with_template(tmp, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
  auto be = backend::make_cpu_backend(1);
  auto m = load(r1_model, *be);
  const tokenizer::Tokenizer& tok = m->tokenizer();
  const chat::ChatTemplate& tmpl = m->chat_template();
  REQUIRE(tmpl.runs_template());
  auto store = storage::AnswerStore::open("");
  REQUIRE(store.ok());
  const ConversationMapper mapper(*m, **store);

  auto p0 = mapper.map(std::vector<ChatMessage>{{"user", "What is 2 + 2?"}});
  REQUIRE(p0.ok());
  auto s0 = app::build_user_turn(tok, tmpl, "", {}, "What is 2 + 2?");
  REQUIRE(s0.ok());
  REQUIRE(s0->opening_text == "<think>\n");
  CHECK(p0->tokens == cat(s0->tokens, s0->opening_tokens));  // the generation prompt, "<think>\n" last
  CHECK(p0->messages.back().end == p0->tokens.size());       // in the window with the user message

  // The client resends the answer alone (its reasoning dropped, or as reasoning_content): the
  // prompt is the template's render of the visible history, then the new opening.
  const std::vector<ChatMessage> second = {{"user", "What is 2 + 2?"}, {"assistant", "4."}, {"user", "And 3 + 3?"}};
  auto p1 = mapper.map(second);
  REQUIRE(p1.ok());
  auto s1 = app::build_user_turn(tok, tmpl, "", std::span(second).first(2), "And 3 + 3?");
  REQUIRE(s1.ok());
  CHECK(s1->exact);
  REQUIRE(s1->reply_tokens.has_value());
  CHECK(s1->reply_text == "4.");
  CHECK(p1->tokens == cat(cat(cat(s0->tokens, *s1->reply_tokens), s1->tokens), s1->opening_tokens));
  auto rendered = tmpl.render_prompt(second, {});
  REQUIRE(rendered.ok());
  CHECK(s0->text + s1->reply_text + s1->text + s1->opening_text == *rendered);
}

TEST_CASE(
    "conversation mapper: gpt-oss's prompt has the request's reasoning effort and its answers in the final "
    "channel",
    "[server]") {
  test::TempDir tmp;
  const std::filesystem::path model = test::model_with_template(tmp, "openai-gpt-oss-120b.jinja");
  auto be = backend::make_cpu_backend(1);
  auto m = load(model, *be);
  const tokenizer::Tokenizer& tok = m->tokenizer();
  const chat::ChatTemplate& tmpl = m->chat_template();
  REQUIRE(tmpl.runs_template());
  CHECK(tmpl.uses_reasoning_effort());
  auto store = storage::AnswerStore::open("");
  REQUIRE(store.ok());
  const ConversationMapper mapper(*m, **store);

  const std::vector<ChatMessage> first = {{"user", "What is 2 + 2?"}};
  auto high = mapper.map(first, std::string("high"));
  REQUIRE(high.ok());
  CHECK_THAT(tok.decode(high->tokens), Catch::Contains("Reasoning: high"));
  auto plain = mapper.map(first);
  REQUIRE(plain.ok());
  CHECK_THAT(tok.decode(plain->tokens), Catch::Contains("Reasoning: medium"));

  // The client resends the answer alone (content, as the server answered it): the prompt is the
  // template's render, the answer in its final channel.
  const std::vector<ChatMessage> second = {{"user", "What is 2 + 2?"}, {"assistant", "4."}, {"user", "And 3 + 3?"}};
  auto p1 = mapper.map(second, std::string("low"));
  REQUIRE(p1.ok());
  chat::RenderOptions opt;
  opt.reasoning_effort = "low";
  auto rendered = tmpl.render_prompt(second, opt);
  REQUIRE(rendered.ok());
  CHECK_THAT(*rendered, Catch::Contains("<|start|>assistant<|channel|>final<|message|>4.<|end|><|start|>user"));
  auto s0 = app::build_user_turn(tok, tmpl, "", {}, "What is 2 + 2?", std::string("low"));
  auto s1 = app::build_user_turn(tok, tmpl, "", std::span(second).first(2), "And 3 + 3?", std::string("low"));
  REQUIRE(s0.ok());
  REQUIRE(s1.ok());
  CHECK(s1->exact);
  REQUIRE(s1->reply_tokens.has_value());
  CHECK(s1->reply_text == "<|channel|>final<|message|>4.");
  CHECK(s0->text + s1->reply_text + s1->text == *rendered);
  CHECK(p1->tokens == cat(cat(s0->tokens, *s1->reply_tokens), s1->tokens));
}
