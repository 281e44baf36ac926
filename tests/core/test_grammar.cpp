// Grammar and GrammarMatcher: rule building, byte-level matching, token masks over a small
// vocabulary (partial UTF-8, special and end tokens), the per-state mask cache.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/sampling/grammar.h"
#include "core/sampling/grammar_matcher.h"
#include "core/sampling/sampler.h"

namespace kvc::sampling {
namespace {

using Seq = Grammar::Seq;

// ids:            0    1    2     3      4    5    6       7       8      9          10      11
const std::vector<std::string> k_tokens = {"a", "b", "ab", "abc", "{", "}", "\xc3", "\xa9", "ba", "<tool>", "</s>", ""};
std::shared_ptr<const TokenVocabulary> vocab() {
  std::vector<TokenKind> kinds(k_tokens.size(), TokenKind::text);
  kinds[9] = TokenKind::special;
  kinds[10] = TokenKind::end_of_generation;
  return std::make_shared<const TokenVocabulary>(k_tokens, kinds);
}

bool bit(const std::vector<uint64_t>& mask, int id) { return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u; }

std::vector<int> allowed_ids(GrammarMatcher& m) {
  std::vector<int> out;
  const auto& mask = m.allowed();
  for (int i = 0; i < static_cast<int>(k_tokens.size()); ++i) {
    if (bit(mask, i)) out.push_back(i);
  }
  return out;
}

// root ::= "{" ("a" | "b")* "}"
std::shared_ptr<const Grammar> braces() {
  auto g = std::make_shared<Grammar>();
  const Seq ab = {g->set(ByteSet::range('a', 'b'))};
  Seq root = g->literal("{");
  root.push_back(Grammar::ref(g->repeat(ab, 0, -1)));
  g->append_literal(root, "}");
  g->set_root(g->add_rule("root", {root}));
  REQUIRE(g->validate().ok());
  return g;
}

}  // namespace

TEST_CASE("grammar: byte sets hold exactly their ranges", "[core]") {
  ByteSet s = ByteSet::range('a', 'c');
  s.add(0xff, 0xff);
  CHECK(s.has('a'));
  CHECK(s.has('c'));
  CHECK(s.has(0xff));
  CHECK_FALSE(s.has('d'));
  CHECK_FALSE(s.complement().has('b'));
  CHECK(s.complement().has(0));
}

TEST_CASE("grammar: validate refuses missing alternatives and left recursion", "[core]") {
  Grammar empty;
  empty.set_root(empty.add_rule("root"));
  CHECK_FALSE(empty.validate().ok());

  Grammar left;  // a ::= b "x" ; b ::= "" | a
  const auto a = left.add_rule("a");
  const auto b = left.add_rule("b");
  left.add_alternative(a, {Grammar::ref(b), left.set(ByteSet::of('x'))});
  left.add_alternative(b, {});
  left.add_alternative(b, {Grammar::ref(a)});
  left.set_root(a);
  const Status st = left.validate();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("left-recursive") != std::string::npos);
}

TEST_CASE("grammar: the matcher accepts the language byte by byte and nothing else", "[core]") {
  GrammarMatcher m(braces(), vocab());
  CHECK_FALSE(m.is_complete());
  CHECK_FALSE(m.accept_bytes("a"));  // must open first; state unchanged
  CHECK(m.accept_bytes("{ab"));
  CHECK(m.accept_bytes("ba"));
  CHECK_FALSE(m.accept_bytes("c"));
  CHECK_FALSE(m.is_complete());
  CHECK(m.accept_bytes("}"));
  CHECK(m.is_complete());
  CHECK(m.is_finished());
  CHECK_FALSE(m.accept_bytes("}"));
}

TEST_CASE("grammar: repetition does not grow the stacks", "[core]") {
  GrammarMatcher m(braces(), vocab());
  REQUIRE(m.accept_bytes("{"));
  const GrammarState after_open = m.state();
  for (int i = 0; i < 100; ++i) REQUIRE(m.accept_bytes("ab"));
  CHECK(m.state() == after_open);
}

TEST_CASE("grammar: bounded repetition counts", "[core]") {
  auto g = std::make_shared<Grammar>();
  g->set_root(g->repeat(g->literal("a"), 2, 3));
  REQUIRE(g->validate().ok());
  for (const auto& [text, complete] :
       std::vector<std::pair<std::string, bool>>{{"a", false}, {"aa", true}, {"aaa", true}}) {
    GrammarMatcher m(g, vocab());
    REQUIRE(m.accept_bytes(text));
    CHECK(m.is_complete() == complete);
  }
  GrammarMatcher m(g, vocab());
  CHECK_FALSE(m.accept_bytes("aaaa"));
}

TEST_CASE("grammar: the token mask follows the state, with shared prefixes and end tokens", "[core]") {
  GrammarMatcher m(braces(), vocab());
  CHECK(allowed_ids(m) == std::vector<int>{4});  // only "{"
  REQUIRE(m.accept_token(4));
  // "a", "b", "ab", "ba", "}"; not "abc" (its "c"), not special, EOS or the empty token.
  CHECK(allowed_ids(m) == std::vector<int>{0, 1, 2, 5, 8});
  CHECK_FALSE(m.can_accept_token(3));
  CHECK_FALSE(m.accept_token(3));
  CHECK_FALSE(m.accept_token(10));  // EOS before the grammar is complete
  CHECK_FALSE(m.accept_token(11));  // a token with no bytes makes no progress
  REQUIRE(m.accept_token(2));
  REQUIRE(m.accept_token(5));
  CHECK(allowed_ids(m) == std::vector<int>{10});  // complete: only EOS
  CHECK(m.accept_token(10));
}

TEST_CASE("grammar: the mask of a state seen before comes from the cache", "[core]") {
  GrammarMatcher m(braces(), vocab());
  REQUIRE(m.accept_token(4));
  const std::vector<uint64_t> first = m.allowed();
  const size_t n = m.n_cached_masks();
  REQUIRE(m.accept_token(0));
  CHECK(m.allowed() == first);
  CHECK(m.n_cached_masks() == n);  // the same state after "a": no new walk
}

TEST_CASE("grammar: tokens that are partial UTF-8 match byte by byte", "[core]") {
  auto g = std::make_shared<Grammar>();  // root ::= "\xc3\xa9"  (é)
  g->set_root(g->add_rule("root", {g->literal("\xc3\xa9")}));
  GrammarMatcher m(g, vocab());
  CHECK(allowed_ids(m) == std::vector<int>{6});
  REQUIRE(m.accept_token(6));
  CHECK(allowed_ids(m) == std::vector<int>{7});
  REQUIRE(m.accept_token(7));
  CHECK(m.is_finished());
}

TEST_CASE("grammar: a special token matches only a special element, never text", "[core]") {
  auto g = std::make_shared<Grammar>();  // root ::= <tool> "a"
  g->set_root(g->add_rule("root", {{Grammar::special(9), g->set(ByteSet::of('a'))}}));
  REQUIRE(g->validate().ok());
  GrammarMatcher m(g, vocab());
  CHECK(allowed_ids(m) == std::vector<int>{9});
  CHECK_FALSE(m.accept_bytes("<tool>"));  // the text of the special token is not the token
  REQUIRE(m.accept_token(9));
  CHECK(allowed_ids(m) == std::vector<int>{0});

  GrammarMatcher text(braces(), vocab());
  REQUIRE(text.accept_token(4));
  CHECK_FALSE(text.can_accept_token(9));
}

TEST_CASE("grammar: mask_logits leaves only allowed tokens finite, and nothing when none is", "[core]") {
  GrammarMatcher m(braces(), vocab());
  std::vector<float> logits(k_tokens.size() + 2, 1.0f);  // two padding rows past the vocabulary
  REQUIRE(m.mask_logits(logits));
  for (size_t i = 0; i < logits.size(); ++i) CHECK((logits[i] == 1.0f) == (i == 4));

  auto g = std::make_shared<Grammar>();  // "z": no token has it
  g->set_root(g->add_rule("root", {g->literal("z")}));
  GrammarMatcher stuck(g, vocab());
  std::vector<float> untouched(k_tokens.size(), 1.0f);
  CHECK_FALSE(stuck.mask_logits(untouched));
  CHECK(untouched == std::vector<float>(k_tokens.size(), 1.0f));
  CHECK(stuck.end_token() == 10);
}

TEST_CASE("grammar: a constrained sampler draws only allowed tokens, greedy or sampled, and stops when done",
          "[core]") {
  for (const float temperature : {0.0f, 1.0f}) {
    for (int seed = 0; seed < 50; ++seed) {
      SamplingParams p;
      p.temperature = temperature;
      p.top_k = 3;  // more than the tokens allowed after "{": the rest must not fill the top-k
      p.min_p = 0.0f;
      p.top_p = 1.0f;
      p.seed = seed;
      Sampler s(p);
      s.constrain(std::make_unique<GrammarMatcher>(braces(), vocab()));
      std::string text;
      for (int step = 0; step < 20 && !s.constraint_done(); ++step) {
        std::vector<float> logits(k_tokens.size(), 0.0f);
        logits[3] = 9.0f;   // "abc": never allowed
        logits[5] = -2.0f;  // "}": allowed after "{", unlikely
        const int32_t id = s.sample(logits, {});
        INFO("temperature " << temperature << " seed " << seed << " text " << text);
        REQUIRE(id != 3);
        REQUIRE(id != 9);
        if (id != 10) text += k_tokens[static_cast<size_t>(id)];
      }
      CHECK(text.front() == '{');
      if (s.constraint_done()) CHECK(text.back() == '}');
    }
  }
}

}  // namespace kvc::sampling
