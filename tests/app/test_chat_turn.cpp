// A user turn's segment: with a model's template, the stream plus the segments is the template's render of the whole
// conversation.
#include <catch2/catch.hpp>

#include "app/common/chat_turn.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "support/test_support.h"

using kvc::chat::ChatMessage;
using kvc::chat::ChatTemplate;
namespace test = kvc::test;

namespace {

kvc::tokenizer::Tokenizer tokenizer_of(const std::string& vocab_file) {
  auto file = kvc::gguf::GgufFile::open(test::model_path(vocab_file));
  REQUIRE(file.ok());
  auto vocab = kvc::model::vocabulary_from_gguf(*file);
  REQUIRE(vocab.ok());
  auto tok = kvc::tokenizer::Tokenizer::create(*vocab);
  REQUIRE(tok.ok());
  return *tok;
}

ChatTemplate load(const char* name, const kvc::tokenizer::Tokenizer& tok) {
  const auto text = test::read_file(test::data_dir() / "templates" / (std::string(name) + ".jinja"));
  return ChatTemplate::load(text, kvc::model::template_tokens(tok));
}

// Three turns as the app runs them: each segment appended to the stream, then the reply as generated.
struct Conversation {
  std::string stream;
  std::vector<ChatMessage> history;
  std::vector<bool> exact;
};

Conversation run_turns(const kvc::tokenizer::Tokenizer& tok, const ChatTemplate& t, const std::string& system,
                       const std::vector<std::pair<std::string, std::string>>& turns) {
  Conversation c;
  std::string opening;  // the last reply's (TurnSegment::opening_text): its stream text starts with it
  for (const auto& [user, reply] : turns) {
    auto seg = kvc::app::build_user_turn(tok, t, system, c.history, user);
    REQUIRE(seg.ok());
    CHECK(seg->tokens == (c.history.empty() ? tok.encode(seg->text, tok.wants_bos(), true)
                                            : tok.encode_continuation(seg->text, true)));
    if (seg->reply_tokens) {
      // The template shows the last reply without its reasoning: the stream follows it.
      CHECK(*seg->reply_tokens == tok.encode_continuation(seg->reply_text, true));
      c.stream.resize(c.stream.size() - opening.size() - c.history.back().content.size());
      c.stream += seg->reply_text;
    }
    CHECK(seg->opening_tokens == tok.encode_continuation(seg->opening_text, true));
    c.stream += seg->text + seg->opening_text + reply;
    opening = seg->opening_text;
    c.exact.push_back(seg->exact);
    c.history.emplace_back("user", user);
    c.history.emplace_back("assistant", reply);
  }
  return c;
}

const std::vector<std::pair<std::string, std::string>> k_turns = {
    {"Hello!", "Hi, how can I help?"}, {"What is 2 + 2?", "4."}, {"And 3 + 3?", "6."}};

}  // namespace

TEST_CASE("chat turn: with the model's template the segments add up to its render of the conversation", "[app]") {
  const auto tok = tokenizer_of("ggml-vocab-llama-spm.gguf");
  for (const char* name : {"meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B",
                           "google-gemma-2-2b-it", "microsoft-Phi-3.5-mini-instruct", "HuggingFaceTB-SmolLM3-3B"}) {
    INFO(name);
    const ChatTemplate t = load(name, tok);
    REQUIRE(t.runs_template());
    const Conversation c = run_turns(tok, t, "Be brief.", k_turns);
    // The stream before the last reply is the template's prompt for the last turn.
    std::vector<ChatMessage> prompt = {{"system", "Be brief."}};
    prompt.insert(prompt.end(), c.history.begin(), c.history.end() - 1);
    const auto expected = t.render_prompt(prompt, {});
    REQUIRE(expected.ok());
    CHECK(c.stream.substr(0, c.stream.size() - k_turns.back().second.size()) == *expected);
    CHECK(c.exact == std::vector<bool>{true, true, true});
  }
}

TEST_CASE("chat turn: a template that rewrites earlier replies keeps the stream and closes the reply", "[app]") {
  const auto tok = tokenizer_of("ggml-vocab-llama-spm.gguf");
  // Qwen 3 drops the reasoning of earlier replies: the stream shows the answer only, as the template does.
  const ChatTemplate t = load("Qwen-Qwen3-0.6B", tok);
  const std::string thought = "<think>\nadd them\n</think>\n\n4.";
  const Conversation c = run_turns(tok, t, "", {{"What is 2 + 2?", thought}, {"And 3 + 3?", "6."}});
  CHECK(c.exact == std::vector<bool>{true, true});
  CHECK(c.stream ==
        "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n4."
        "<|im_end|>\n<|im_start|>user\nAnd 3 + 3?<|im_end|>\n<|im_start|>assistant\n6.");
  // A reply without reasoning is kept as generated.
  const Conversation plain = run_turns(tok, t, "", {{"Hi", "Hello."}, {"Bye", "Bye."}});
  CHECK(plain.exact == std::vector<bool>{true, true});
  CHECK_THAT(plain.stream, Catch::Contains("assistant\nHello.<|im_end|>"));
  // DeepSeek-R1's generation prompt opens the reasoning ("<think>\n"), and its render of an earlier
  // reply keeps only what follows "</think>" (the blank line included): the opening is the
  // reply's, and goes with it.
  for (const char* name : {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B"}) {
    INFO(name);
    const ChatTemplate r1 = load(name, tok);
    const Conversation e =
        run_turns(tok, r1, "", {{"What is 2 + 2?", "add them\n</think>\n\n4."}, {"And 3 + 3?", "6."}});
    CHECK(e.exact == std::vector<bool>{true, true});
    CHECK_THAT(e.stream, Catch::EndsWith("<｜User｜>What is 2 + 2?<｜Assistant｜>\n\n4.<｜end▁of▁sentence｜>"
                                         "<｜User｜>And 3 + 3?<｜Assistant｜><think>\n6."));
    // A regenerate from the last user message appends the same opening.
    std::vector<ChatMessage> upto = {{"user", "What is 2 + 2?"}};
    const auto o = kvc::app::reply_opening(tok, r1, "", upto);
    CHECK(o.text == "<think>\n");
    CHECK(o.tokens == tok.encode_continuation("<think>\n", true));
  }
  // Every other template has no opening.
  CHECK(kvc::app::reply_opening(tok, t, "", std::vector<ChatMessage>{{"user", "Hi"}}).text.empty());
  // Llama 3 trims replies: a reply that ends in a newline is closed as generated.
  const ChatTemplate llama = load("meta-llama-Llama-3.1-8B-Instruct", tok);
  const Conversation d = run_turns(tok, llama, "", {{"Hi", "Hello.\n"}, {"Bye", "Bye."}});
  CHECK(d.exact == std::vector<bool>{true, false});
  CHECK_THAT(d.stream, Catch::Contains("Hello.\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"));
}

TEST_CASE("chat turn: without a runnable template the family segments are used", "[app]") {
  const auto tok = tokenizer_of("ggml-vocab-llama-spm.gguf");
  const ChatTemplate t = ChatTemplate::from_family(ChatTemplate::Family::chatml);
  const Conversation c = run_turns(tok, t, "S", {{"U1", "R1"}, {"U2", "R2"}});
  const std::vector<ChatMessage> all = {
      {"system", "S"}, {"user", "U1"}, {"assistant", "R1"}, {"user", "U2"}, {"assistant", "R2"}};
  CHECK(c.stream + t.assistant_suffix() == t.render(all, false));
  CHECK(c.exact == std::vector<bool>{false, false});
  // A template that rejects the conversation is an error for the caller to show.
  const ChatTemplate gemma = load("google-gemma-2-2b-it", tok);
  const std::vector<ChatMessage> odd = {{"assistant", "A"}};
  auto seg = kvc::app::build_user_turn(tok, gemma, "", odd, "U");
  REQUIRE_FALSE(seg.ok());
  CHECK_THAT(seg.error().message, Catch::Contains("roles must alternate"));
}

TEST_CASE("chat turn: gpt-oss's harmony replies lose their analysis from the next turn on, as its template does",
          "[app]") {
  const auto tok = tokenizer_of("ggml-vocab-llama-spm.gguf");
  const ChatTemplate t = load("openai-gpt-oss-120b", tok);
  REQUIRE(t.runs_template());
  CHECK(t.family() == ChatTemplate::Family::harmony);
  // Replies as gpt-oss writes them (its channel tokens decode to these texts): with an analysis,
  // straight to the final channel, and an answer a client sent back without any channel.
  const std::vector<std::pair<std::string, std::string>> turns = {
      {"What is 2 + 2?",
       "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>4."},
      {"And 3 + 3?", "<|channel|>final<|message|>6."},
      {"And 4 + 4?", "8."},
      {"Thanks.",
       "<|channel|>analysis<|message|>Polite.<|end|><|start|>assistant<|channel|>final<|message|>You're welcome."}};
  const Conversation c = run_turns(tok, t, "Be brief.", turns);
  CHECK(c.exact == std::vector<bool>{true, true, true, true});
  std::vector<ChatMessage> prompt = {{"system", "Be brief."}};
  prompt.insert(prompt.end(), c.history.begin(), c.history.end() - 1);
  const auto expected = t.render_prompt(prompt, {});
  REQUIRE(expected.ok());
  CHECK(c.stream.substr(0, c.stream.size() - turns.back().second.size()) == *expected);
  // The analysis is gone from the stream, every answer is in its final channel.
  CHECK(c.stream.find("Add them.") == std::string::npos);
  CHECK_THAT(c.stream, Catch::Contains("<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>"
                                       "final<|message|>4.<|end|><|start|>user<|message|>And 3 + 3?<|end|>"));
  CHECK_THAT(c.stream, Catch::Contains("<|start|>assistant<|channel|>final<|message|>8.<|end|>"));
  // The last reply, still being answered, keeps its analysis.
  CHECK_THAT(c.stream, Catch::EndsWith("<|start|>assistant" + turns.back().second));
  // The reasoning effort reaches the template's system message.
  const auto high = kvc::app::build_user_turn(tok, t, "", {}, "Hi", std::string("high"));
  REQUIRE(high.ok());
  CHECK_THAT(high->text, Catch::Contains("Reasoning: high\n"));
  const auto plain = kvc::app::build_user_turn(tok, t, "", {}, "Hi");
  REQUIRE(plain.ok());
  CHECK_THAT(plain->text, Catch::Contains("Reasoning: medium\n"));
}
