// A turn's prompt under the overflow policy, on a real vocabulary and template: the window is the template's render of
// the kept messages, and its system prompt prefix is shared.
#include <catch2/catch.hpp>

#include "app/common/chat_turn.h"
#include "app/common/chat_window.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "support/test_support.h"

using kvc::chat::ChatMessage;
using kvc::chat::ChatTemplate;
namespace test = kvc::test;

namespace {

kvc::tokenizer::Tokenizer llama_tokenizer() {
  auto file = kvc::gguf::GgufFile::open(test::model_path("ggml-vocab-llama-spm.gguf"));
  REQUIRE(file.ok());
  auto vocab = kvc::model::vocabulary_from_gguf(*file);
  REQUIRE(vocab.ok());
  auto tok = kvc::tokenizer::Tokenizer::create(*vocab);
  REQUIRE(tok.ok());
  return *tok;
}

struct Stored {
  std::string role, text;
  std::vector<int32_t> tokens;
};

}  // namespace

TEST_CASE("chat window: the kept messages render as the template renders them, the system prompt's tokens shared",
          "[app]") {
  const auto tok = llama_tokenizer();
  const auto tmpl_text = test::read_file(test::data_dir() / "templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  const ChatTemplate tmpl = ChatTemplate::load(tmpl_text, kvc::model::template_tokens(tok));
  const std::string system = "You are a careful assistant who answers in one short sentence, always politely.";
  const std::vector<std::pair<std::string, std::string>> turns = {
      {"Hello!", "Hi, how can I help?"}, {"What is 2 + 2?", "4."}, {"And 3 + 3?", "6."}, {"Thanks.", ""}};
  std::vector<Stored> stored;
  std::vector<ChatMessage> history;
  for (const auto& [user, reply] : turns) {
    auto seg = kvc::app::build_user_turn(tok, tmpl, system, history, user);
    REQUIRE(seg.ok());
    stored.push_back({"user", user, seg->tokens});
    history.emplace_back("user", user);
    if (reply.empty()) break;  // the last message is the one being answered
    stored.push_back({"assistant", reply, tok.encode_continuation(reply, false)});
    history.emplace_back("assistant", reply);
  }
  std::vector<kvc::app::StreamMessage> messages;
  for (const Stored& s : stored) messages.push_back({s.role, s.text, s.tokens});
  REQUIRE(messages.size() == 7);

  // No cut: the stored stream as it is.
  auto whole = kvc::app::window_tokens(tok, tmpl, system, messages, 0);
  REQUIRE(whole.ok());
  std::vector<int32_t> stream;
  for (const Stored& s : stored) stream.insert(stream.end(), s.tokens.begin(), s.tokens.end());
  CHECK(*whole == stream);

  // Cut at the second question: the template's render of (system, u2, a2, u3, a3, u4).
  auto cut = kvc::app::window_tokens(tok, tmpl, system, messages, 2);
  REQUIRE(cut.ok());
  std::vector<ChatMessage> kept{{"system", system}};
  kept.insert(kept.end(), history.begin() + 2, history.end());
  kvc::chat::RenderOptions opt;
  auto render = tmpl.render_prompt(kept, opt);
  REQUIRE(render.ok());
  CHECK(tok.decode(*cut) == tok.decode(tok.encode(*render, tok.wants_bos(), true)));
  // The system prompt's tokens (every block of them a cut can reuse) begin both windows.
  size_t common = 0;
  while (common < cut->size() && common < whole->size() && (*cut)[common] == (*whole)[common]) ++common;
  const size_t n_system = tok.encode("<|im_start|>system\n" + system, tok.wants_bos(), true).size();
  CHECK(common >= n_system - 1);
  CHECK(common >= 16);

  SECTION("the policy keeps it all while it fits, and cuts at a question when it does not") {
    kvc::chat::WindowPolicy roomy{4096, 256};
    auto w = kvc::app::plan_chat_window(tok, tmpl, system, messages, roomy, size_t{0});
    REQUIRE(w.ok());
    CHECK(w->first == 0);
    CHECK_FALSE(w->moved);
    CHECK(w->prompt == stream);
    const auto n = static_cast<int64_t>(stream.size());
    kvc::chat::WindowPolicy tight{n + 8, 8};  // room for n tokens: the whole fits
    w = kvc::app::plan_chat_window(tok, tmpl, system, messages, tight, size_t{0});
    REQUIRE(w.ok());
    CHECK(w->first == 0);
    tight = kvc::chat::WindowPolicy{n + 4, 8};  // not any more: a cut, at a user message
    w = kvc::app::plan_chat_window(tok, tmpl, system, messages, tight, size_t{0});
    REQUIRE(w.ok());
    CHECK(w->moved);
    CHECK(w->first % 2 == 0);
    CHECK(w->first > 0);
    auto again = kvc::app::window_tokens(tok, tmpl, system, messages, w->first);
    REQUIRE(again.ok());
    CHECK(w->prompt == *again);
    auto replayed = kvc::app::plan_chat_window(tok, tmpl, system, messages, tight, std::nullopt);
    REQUIRE(replayed.ok());
    CHECK(replayed->first == w->first);
  }
}
