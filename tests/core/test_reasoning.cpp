// split_reasoning: a reply's <think> reasoning told apart from its answer, finished, open, or absent.
#include <catch2/catch.hpp>

#include "core/chat/reasoning.h"

using kvc::chat::split_reasoning;

TEST_CASE("reasoning: a finished <think> block is cut from the answer", "[core]") {
  const auto s = split_reasoning("<think>\nadd them\n</think>\n\n4.");
  CHECK(s.has_reasoning);
  CHECK_FALSE(s.open);
  CHECK(s.reasoning == "add them");
  CHECK(s.answer == "4.");
  // A SentencePiece space before the tag, and DeepSeek-R1's reply without its opening tag.
  CHECK(split_reasoning(" <think>x</think>y").answer == "y");
  const auto r1 = split_reasoning("add them\n</think>\n\n4.");
  CHECK(r1.has_reasoning);
  CHECK(r1.reasoning == "add them");
  CHECK(r1.answer == "4.");
}

TEST_CASE("reasoning: an unfinished block is open, and a reply without one is all answer", "[core]") {
  const auto s = split_reasoning("<think>\nstill going");
  CHECK(s.has_reasoning);
  CHECK(s.open);
  CHECK(s.reasoning == "still going");
  CHECK(s.answer.empty());
  const auto plain = split_reasoning("4, and <think> later is text.");
  CHECK_FALSE(plain.has_reasoning);
  CHECK(plain.answer == "4, and <think> later is text.");
  CHECK_FALSE(split_reasoning("").has_reasoning);
}

namespace {

// A gpt-oss reply as its tokens decode (after the generation prompt "<|start|>assistant"): an
// analysis message, then the final answer; <|return|> ends it and writes no text.
const std::string k_harmony =
    "<|channel|>analysis<|message|>The user asks for a sum.\n2 + 2 = 4.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = **4**, in Besançon too.";

}  // namespace

TEST_CASE("reasoning: gpt-oss's analysis channel is the reasoning, its final channel the answer", "[core]") {
  const auto s = split_reasoning(k_harmony);
  CHECK(kvc::chat::is_harmony_reply(k_harmony));
  CHECK(s.has_reasoning);
  CHECK_FALSE(s.open);
  CHECK(s.reasoning == "The user asks for a sum.\n2 + 2 = 4.");
  CHECK(s.answer == "2 + 2 = **4**, in Besançon too.");
  // Still thinking: open, no answer yet.
  const auto open = split_reasoning("<|channel|>analysis<|message|>The user");
  CHECK(open.has_reasoning);
  CHECK(open.open);
  CHECK(open.reasoning == "The user");
  CHECK(open.answer.empty());
  // A final answer with no analysis; a preamble in the commentary channel is answer too.
  const auto direct = split_reasoning("<|channel|>final<|message|>4.");
  CHECK_FALSE(direct.has_reasoning);
  CHECK(direct.answer == "4.");
  const auto two = split_reasoning(
      "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
      "<|start|>assistant<|channel|>final<|message|>c");
  CHECK(two.reasoning == "a\n\nb");
  CHECK(two.answer == "c");
  // Text that only mentions the markers later is no harmony reply.
  CHECK_FALSE(kvc::chat::is_harmony_reply("Use <|channel|> tags."));
  CHECK(split_reasoning("Use <|channel|> tags.").answer == "Use <|channel|> tags.");
}

TEST_CASE("reasoning: a harmony reply split at every byte gives prefixes of its reasoning and answer", "[core]") {
  const auto whole = split_reasoning(k_harmony);
  // From 2 bytes on: a reply that is only "<" could be anything (it shows as it is).
  for (size_t n = 2; n <= k_harmony.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    const auto s = split_reasoning(std::string_view(k_harmony).substr(0, n));
    // No marker, nor a marker cut short, ever shows; what shows only grows.
    CHECK(whole.reasoning.compare(0, s.reasoning.size(), s.reasoning) == 0);
    CHECK(whole.answer.compare(0, s.answer.size(), s.answer) == 0);
    CHECK(s.reasoning.find('<') == std::string::npos);
    CHECK(s.answer.find('<') == std::string::npos);
  }
  // Streamed in two pieces cut at every byte, and byte by byte: the deltas add up to the split.
  for (size_t cut = 0; cut <= k_harmony.size(); ++cut) {
    INFO("cut at " << cut);
    kvc::chat::ReasoningStream stream;
    auto a = stream.feed(std::string_view(k_harmony).substr(0, cut));
    const auto b = stream.feed(std::string_view(k_harmony).substr(cut));
    CHECK(a.reasoning + b.reasoning == whole.reasoning);
    CHECK(a.answer + b.answer == whole.answer);
  }
  kvc::chat::ReasoningStream bytes;
  std::string reasoning;
  std::string answer;
  for (const char c : k_harmony) {
    const auto d = bytes.feed(std::string_view(&c, 1));
    reasoning += d.reasoning;
    answer += d.answer;
  }
  CHECK(reasoning == whole.reasoning);
  CHECK(answer == whole.answer);
  // A reply written without channels (a model that ignores the format) streams as it is, all answer.
  const std::string plain = "<b>4</b>, plainly.";
  for (size_t cut = 0; cut <= plain.size(); ++cut) {
    INFO("plain, cut at " << cut);
    kvc::chat::ReasoningStream stream;
    const auto a = stream.feed(std::string_view(plain).substr(0, cut));
    const auto b = stream.feed(std::string_view(plain).substr(cut));
    CHECK(a.answer + b.answer == plain);
    CHECK((a.reasoning + b.reasoning).empty());
  }
}

TEST_CASE("reasoning: a finished reply holds nothing back as a marker's possible start", "[core]") {
  const std::string final_lt = "<|channel|>final<|message|>a <";
  const std::string final_bar =
      "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>b <|";
  const std::string analysis_cut = "<|channel|>analysis<|message|>still <|en";
  // Growing, the ends are held back; finished, they are the reply's text.
  CHECK(split_reasoning(final_lt).answer == "a ");
  CHECK(split_reasoning(final_lt, true).answer == "a <");
  CHECK(split_reasoning(final_bar, true).answer == "b <|");
  CHECK(split_reasoning(analysis_cut, true).reasoning == "still <|en");
  // A reply that is only the start of a marker is, once finished, no harmony reply but its text.
  CHECK(split_reasoning("<|chan", true).answer == "<|chan");
  CHECK_FALSE(split_reasoning("<|chan", true).has_reasoning);
  // Streamed, finish() gives what was held back, and the deltas add up to the finished split.
  for (const std::string& reply : {final_lt, final_bar, analysis_cut, std::string("<"), std::string("<|chan")}) {
    const auto whole = split_reasoning(reply, true);
    for (size_t cut = 0; cut <= reply.size(); ++cut) {
      INFO(reply << " cut at " << cut);
      kvc::chat::ReasoningStream stream;
      const auto a = stream.feed(std::string_view(reply).substr(0, cut));
      const auto b = stream.feed(std::string_view(reply).substr(cut));
      const auto c = stream.finish();
      CHECK(a.reasoning + b.reasoning + c.reasoning == whole.reasoning);
      CHECK(a.answer + b.answer + c.answer == whole.answer);
    }
  }
}
