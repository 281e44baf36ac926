// Reasoning replies over a 6-turn conversation: the prompt is the template's visible history, and the cache serves all
// but the new message and the previous answer.
#include <catch2/catch.hpp>

#include <cstdio>

#include "app/common/chat_turn.h"
#include "app/gui/engine_turn_runner.h"
#include "core/backend/backend.h"
#include "core/chat/reasoning.h"
#include "core/model/model.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

model::GenerateOptions one_token() {
  model::GenerateOptions o;
  o.max_tokens = 1;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = 1.0f;
  o.stop_at_eog = false;
  return o;
}

struct Turn {
  std::string user, reasoning, answer;
};

const std::vector<Turn> k_turns = {
    {"What is 2 + 2?", "The user wants a sum. Two and two make four.", "2 + 2 = 4."},
    {"And times three?", "Four times three: twelve. Check: 4 + 4 + 4 = 12.", "12."},
    {"Name a prime above 12.", "13 has no divisors but 1 and itself.", "13 is prime."},
    {"Is 91 prime?", "91 = 7 * 13, so it is not prime.", "No: 91 = 7 x 13."},
    {"Sum of the first five odd numbers?", "1 + 3 + 5 + 7 + 9 = 25, a square as always.", "25."},
    {"Thanks!", "A thank-you: a short, friendly reply will do.", "You are welcome."},
};

}  // namespace

TEST_CASE(
    "reasoning turns: a Qwen 3 or DeepSeek-R1 conversation recomputes only the new message and the previous "
    "answer",
    "[app][engine]") {
  // DeepSeek-R1's generation prompt opens the reasoning ("<think>\n"), which its render of an
  // earlier reply drops with the reasoning: the opening goes with the reply (TurnSegment::opening_*).
  const std::string name = GENERATE(as<std::string>{}, "Qwen-Qwen3-0.6B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
                                    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B");
  const bool r1 = name.starts_with("deepseek");
  INFO(name);
  auto be = backend::make_cpu_backend(2);
  // A Qwen 3 architecture model with the chat template (its vocabulary is stories260K's).
  auto m = model::Model::load(test::model_path("tiny-qwen3-f16.gguf"), *be);
  REQUIRE(m.ok());
  const tokenizer::Tokenizer& tok = (*m)->tokenizer();
  const auto text = test::read_file(test::data_dir() / "templates" / (name + ".jinja"));
  const chat::ChatTemplate tmpl = chat::ChatTemplate::load(text, model::template_tokens(tok));
  REQUIRE(tmpl.runs_template());

  app::EngineRunnerOptions o;
  o.n_ctx = 2048;
  o.budget.t1_bytes = int64_t{512} << 20;
  auto runner = app::EngineTurnRunner::create(**m, o);
  REQUIRE(runner.ok());

  struct Stored {
    std::string text;             // as generated: the reasoning kept
    std::vector<int32_t> tokens;  // in the stream (a reply's start with its opening)
    std::string stream_text;      // what those tokens are, as text
  };
  std::vector<Stored> stored;
  std::vector<chat::ChatMessage> history;
  int64_t n_as_generated = 0;  // the stream's tokens had every reply kept whole, for the report
  for (size_t k = 0; k < k_turns.size(); ++k) {
    INFO("turn " << k + 1);
    const Turn& t = k_turns[k];
    auto seg = app::build_user_turn(tok, tmpl, "", history, t.user);
    REQUIRE(seg.ok());
    CHECK(seg->exact);
    int64_t n_previous_answer = 0;
    if (k > 0) {
      // The template drops the previous reply's reasoning: so does the stream.
      REQUIRE(seg->reply_tokens.has_value());
      // (R1's template keeps what follows "</think>", the blank line included.)
      CHECK(seg->reply_text == (r1 ? "\n\n" : "") + k_turns[k - 1].answer);
      stored.back().tokens = *seg->reply_tokens;
      stored.back().stream_text = seg->reply_text;
      n_previous_answer = static_cast<int64_t>(seg->reply_tokens->size());
    }
    std::vector<int32_t> stream;
    std::string stream_text;
    for (const Stored& s : stored) {
      stream.insert(stream.end(), s.tokens.begin(), s.tokens.end());
      stream_text += s.stream_text;
    }
    // The prompt is the template's render of the visible history: no reasoning in it.
    std::vector<chat::ChatMessage> next = history;
    next.emplace_back("user", t.user);
    const auto expected = tmpl.render_prompt(next, {});
    REQUIRE(expected.ok());
    CHECK(stream_text + seg->text + seg->opening_text == *expected);
    CHECK(seg->opening_text == (r1 ? "<think>\n" : ""));
    CHECK(expected->substr(0, expected->size() - seg->opening_text.size()).find("<think>") == std::string::npos);

    // The engine's prompt: the stream, the segment, the reply's opening.
    std::vector<int32_t> prompt_end = seg->tokens;
    prompt_end.insert(prompt_end.end(), seg->opening_tokens.begin(), seg->opening_tokens.end());
    auto r = (*runner)->run({7, stream, prompt_end, one_token(), {}, {}}, [](const app::TurnDelta&) { return true; });
    REQUIRE(r.ok());
    const int64_t n_message = static_cast<int64_t>(prompt_end.size());  // the opening counted in
    const int64_t n_recomputed = r->stats.n_prompt - r->stats.n_prompt_reused;
    n_as_generated +=
        n_message + (k > 0 ? static_cast<int64_t>(tok.encode_continuation(stored.back().text, false).size()) : 0);
    std::printf(
        "reasoning turns: %s: turn %zu: prompt %lld tokens (kept whole: %lld), %lld from cache, recomputed %lld "
        "<= message %lld + previous answer %lld + 16\n",
        name.c_str(), k + 1, static_cast<long long>(r->stats.n_prompt), static_cast<long long>(n_as_generated),
        static_cast<long long>(r->stats.n_prompt_reused), static_cast<long long>(n_recomputed),
        static_cast<long long>(n_message), static_cast<long long>(n_previous_answer));
    CHECK(n_recomputed <= n_message + n_previous_answer + 16);
    if (k > 0) CHECK(r->stats.n_prompt_reused > 0);

    // The "model" answers with reasoning, as it writes it after that prompt (R1's without the
    // opening tag, which its prompt holds): its tokens go through the engine as a generated reply
    // would (evaluated after the prompt), so the cache holds them.
    const std::string reply = (r1 ? "" : "<think>\n") + t.reasoning + "\n</think>\n\n" + t.answer;
    REQUIRE(chat::split_reasoning(reply).answer == t.answer);
    std::vector<int32_t> reply_tokens = seg->opening_tokens;  // the stored reply's tokens
    const std::vector<int32_t> generated = tok.encode_continuation(reply, false);
    reply_tokens.insert(reply_tokens.end(), generated.begin(), generated.end());
    std::vector<int32_t> with_reply = stream;
    with_reply.insert(with_reply.end(), seg->tokens.begin(), seg->tokens.end());
    with_reply.insert(with_reply.end(), reply_tokens.begin(), reply_tokens.end());
    auto filled = (*runner)->run({7, with_reply, {}, one_token(), {}, {}}, [](const app::TurnDelta&) { return true; });
    REQUIRE(filled.ok());
    CHECK(filled->stats.n_prompt_reused >= static_cast<int64_t>(stream.size() + seg->tokens.size()) - 16);

    stored.push_back({t.user, seg->tokens, seg->text});
    stored.push_back({reply, reply_tokens, seg->opening_text + reply});
    history.emplace_back("user", t.user);
    history.emplace_back("assistant", reply);  // stored whole, reasoning included
  }
}
