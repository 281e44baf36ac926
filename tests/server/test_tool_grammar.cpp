// tool_call_grammar: a forced tool call's grammar from the format's framing, with the control
// tokens it spells matched as those tokens, and a closing end-of-generation token (harmony's
// <|call|>) left to the sampler, which allows end tokens once the grammar is complete.
#include <catch2/catch.hpp>

#include "app/server/response_format.h"
#include "core/backend/backend.h"
#include "core/model/grammar_vocabulary.h"
#include "core/model/model.h"
#include "core/sampling/grammar_matcher.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

TEST_CASE("tool call grammar: control tokens are tokens, a closing end token ends the reply", "[server]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(test::model_with_template(tmp, "Qwen-Qwen2.5-7B-Instruct.jinja"), *be);
  REQUIRE(m.ok());
  const tokenizer::Tokenizer& tok = (*m)->tokenizer();
  const int32_t eos = tok.eos();  // stories260K's "</s>": a control token that ends generation
  REQUIRE(eos >= 0);
  REQUIRE(tok.is_end_of_generation(eos));
  const int32_t bos = tok.bos();  // "<s>": a control token that does not
  REQUIRE(bos >= 0);
  REQUIRE_FALSE(tok.is_end_of_generation(bos));
  const std::string num = R"({"type":"integer","enum":[1,2]})";
  const auto vocab = model::grammar_vocabulary(**m);

  SECTION("a control token the prefix spells is that token, never its text") {
    chat::ToolConstraints c;
    c.alternatives.push_back({"<s>call ", num, ""});
    auto g = server::tool_call_grammar(c, tok);
    REQUIRE(g.ok());
    sampling::GrammarMatcher text(*g, vocab);
    CHECK_FALSE(text.accept_bytes("<s>"));
    sampling::GrammarMatcher token(*g, vocab);
    REQUIRE(token.accept_token(bos));
    REQUIRE(token.accept_bytes("call 2"));
    CHECK(token.is_complete());
  }
  SECTION("a suffix ending in an end-of-generation token: complete before it, and the reply ends there") {
    chat::ToolConstraints c;
    c.alternatives.push_back({"call ", num, "</s>"});
    c.repeat = true;  // nothing can follow an end token: no second call
    c.separator = ";";
    auto g = server::tool_call_grammar(c, tok);
    REQUIRE(g.ok());
    sampling::GrammarMatcher mt(*g, vocab);
    REQUIRE(mt.accept_bytes("call 1"));
    CHECK(mt.is_complete());
    CHECK_FALSE(mt.accept_bytes(";"));
    CHECK(mt.accept_token(eos));
  }
}
