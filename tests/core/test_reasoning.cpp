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
