// json_schema_grammar: each supported schema feature accepts valid JSON text and rejects
// invalid bytes; unsupported keywords are refused by name.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/sampling/grammar_matcher.h"
#include "core/sampling/json_schema_grammar.h"

namespace kvc::sampling {
namespace {

std::shared_ptr<const TokenVocabulary> byte_vocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  return std::make_shared<const TokenVocabulary>(bytes, std::vector<TokenKind>(bytes.size(), TokenKind::text));
}

// Whether the grammar of `schema` matches `text` completely.
bool matches(const std::string& schema, const std::string& text) {
  auto g = json_schema_grammar(schema);
  INFO(schema);
  REQUIRE(g.ok());
  GrammarMatcher m(*g, byte_vocab());
  return m.accept_bytes(text) && m.is_complete();
}

void accepts(const std::string& schema, const std::vector<std::string>& good, const std::vector<std::string>& bad) {
  for (const std::string& t : good) {
    INFO("should accept " << t);
    CHECK(matches(schema, t));
  }
  for (const std::string& t : bad) {
    INFO("should reject " << t);
    CHECK_FALSE(matches(schema, t));
  }
}

}  // namespace

TEST_CASE("json schema: scalars", "[core]") {
  accepts(R"({"type":"string"})", {R"("")", R"("a b")", R"("\"\\\n\u00e9")", "\"\xc3\xa9\xe2\x82\xac\""},
          {"a", R"("a)", R"("\x")", R"("\ud800")", "\"\xc3\"", "\"\x01\""});
  accepts(R"({"type":"integer"})", {"0", "-12", "1234567890"}, {"01", "1.5", "-", "1e5", "\"1\""});
  accepts(R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-7"}, {"1.", ".5", "+1", "1e", "00"});
  accepts(R"({"type":"integer","minimum":0})", {"0", "42"}, {"-1"});
  accepts(R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "null"});
  accepts(R"({"type":"null"})", {"null"}, {"nul", "\"null\""});
  accepts(R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", "\"a\xc3\xa9\"", R"("abc")"},
          {R"("a")", R"("abcd")"});
}

TEST_CASE("json schema: enum, const and nullable types", "[core]") {
  accepts(R"({"enum":["red","green",3,null]})", {R"("red")", R"("green")", "3", "null"}, {R"("blue")", "4"});
  accepts(R"({"const":{"a":[1,2]}})", {R"({"a":[1,2]})"}, {R"({"a":[1]})"});
  accepts(R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"});
}

TEST_CASE("json schema: objects in property order, required and optional", "[core]") {
  const std::string s = R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
    "tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"],"additionalProperties":false})";
  accepts(
      s,
      {R"({"name":"a","tags":[]})", R"({"name":"a","age":3,"tags":["x"]})", R"({ "name": "a", "tags": [ "x", "y" ] })"},
      {R"({"name":"a"})", R"({"tags":[],"name":"a"})", R"({"name":"a","tags":[],"extra":1})", R"({"name":1,"tags":[]})",
       R"({"name":"a",,"tags":[]})", R"({  "name":"a","tags":[]})"});
  accepts(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})",
          {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"}, {R"({,"b":2})", R"({"a":1,})"});
}

TEST_CASE("json schema: any object, any value and maps", "[core]") {
  accepts(R"({"type":"object"})", {"{}", R"({"a":[1,{"b":null}],"c":"d"})"}, {"[]", "1", R"({"a"})", R"({"a":})"});
  accepts("{}", {"1", "[true,false]", R"({"x":{}})"}, {"[1,]", "tru"});
  accepts(R"({"type":"object","additionalProperties":{"type":"integer"}})", {"{}", R"({"x":1,"y":2})"},
          {R"({"x":"1"})"});
  GrammarMatcher m(json_object_grammar(), byte_vocab());
  CHECK(m.accept_bytes(R"({"k": [1, 2.5, "s", null]})"));
  CHECK(m.is_finished());
}

TEST_CASE("json schema: arrays with minItems and maxItems", "[core]") {
  accepts(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1,2]", "[1, 2, 3]"},
          {"[]", "[1,2,3,4]", "[1,]", R"(["a"])"});
  accepts(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
}

TEST_CASE("json schema: anyOf, $ref and recursive $defs", "[core]") {
  accepts(R"({"anyOf":[{"type":"integer"},{"type":"string","enum":["x"]}]})", {"1", R"("x")"}, {R"("y")", "true"});
  const std::string tree = R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
    "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],
    "additionalProperties":false}}})";
  accepts(tree, {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"},
          {R"({"v":1,"kids":[{"v":2}]})", R"({"v":1})"});
  accepts(R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]})",
          {R"({"next":null})", R"({"next":{"next":null}})"}, {R"({"next":{}})"});
}

TEST_CASE("json schema: simple patterns", "[core]") {
  accepts(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"},
          {R"("AB-12")", R"("ab-123")", R"("AB-1234")"});
  accepts(R"({"type":"string","pattern":"^a+b?c*$"})", {R"("a")", R"("aabccc")"}, {R"("b")", R"("abb")"});
  accepts(R"({"type":"string","pattern":"^[^,]+\\.txt$"})", {R"("x.txt")"}, {R"("a,b.txt")", R"(".txt")"});
  accepts(R"({"type":"string","pattern":"id"})", {R"("id")", R"("my id 1")"}, {R"("i d")"});
}

TEST_CASE("json schema: prefix and suffix text and special tokens around the JSON", "[core]") {
  const std::vector<GrammarPiece> prefix = {{"call: ", -1}};
  const std::vector<GrammarPiece> suffix = {{"", 7}};
  auto g = json_schema_grammar(R"({"type":"integer"})", prefix, suffix);
  REQUIRE(g.ok());
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  std::vector<TokenKind> kinds(bytes.size(), TokenKind::text);
  kinds[7] = TokenKind::special;
  GrammarMatcher m(*g, std::make_shared<const TokenVocabulary>(bytes, kinds));
  REQUIRE(m.accept_bytes("call: 42"));
  CHECK_FALSE(m.is_complete());
  CHECK(m.can_accept_token(7));
  REQUIRE(m.accept_token(7));
  CHECK(m.is_finished());
}

TEST_CASE("json schema: a choice of framed schemas, repeated after a separator (forced tool calls)", "[core]") {
  // Two tools, each call framed as the Hermes format frames it.
  const std::vector<FramedSchema> calls = {
      {{{"<call>", -1}}, R"({"type":"object","properties":{"n":{"const":"a"}},"required":["n"]})", {{"</call>", -1}}},
      {{{"<call>", -1}}, R"({"type":"object","properties":{"n":{"const":"b"}},"required":["n"]})", {{"</call>", -1}}}};
  const std::vector<GrammarPiece> separator = {{"\n", -1}};
  const auto run = [&](bool repeat, const std::string& text) {
    auto g = json_schema_choice_grammar(calls, repeat, separator);
    REQUIRE(g.ok());
    GrammarMatcher m(*g, byte_vocab());
    return m.accept_bytes(text) && m.is_complete();
  };
  CHECK(run(false, R"(<call>{"n":"a"}</call>)"));
  CHECK(run(false, R"(<call>{"n":"b"}</call>)"));
  CHECK_FALSE(run(false, R"(<call>{"n":"c"}</call>)"));
  CHECK_FALSE(run(false, "<call>{\"n\":\"a\"}</call>\n<call>{\"n\":\"b\"}</call>"));  // one call only
  CHECK(run(true, "<call>{\"n\":\"a\"}</call>\n<call>{\"n\":\"b\"}</call>\n<call>{\"n\":\"a\"}</call>"));
  CHECK_FALSE(run(true, "<call>{\"n\":\"a\"}</call><call>{\"n\":\"b\"}</call>"));  // no separator
  CHECK_FALSE(run(true, ""));
  CHECK_FALSE(json_schema_choice_grammar({}).ok());
  const std::vector<FramedSchema> bad = {{{}, R"({"oneOf":[]})", {}}};
  CHECK_FALSE(json_schema_choice_grammar(bad).ok());
}

TEST_CASE("json schema: unsupported keywords and bad schemas are refused by name", "[core]") {
  const auto error_of = [](const std::string& schema) {
    auto g = json_schema_grammar(schema);
    REQUIRE_FALSE(g.ok());
    return g.error().message;
  };
  CHECK(error_of(R"({"oneOf":[{"type":"integer"}]})").find("\"oneOf\"") != std::string::npos);
  CHECK(error_of(R"({"type":"object","properties":{"a":{"type":"string","format":"date"}}})").find("/properties/a") !=
        std::string::npos);
  CHECK(error_of(R"({"type":"string","pattern":"^(a|b)$"})").find("alternation") != std::string::npos);
  CHECK(error_of(R"({"type":"integer","maximum":5})").find("\"maximum\"") != std::string::npos);
  CHECK(error_of("{nope").find("not valid JSON") != std::string::npos);
  CHECK(error_of(R"({"type":"thing"})").find("unknown type") != std::string::npos);
  CHECK(error_of(R"({"$ref":"#/$defs/x"})").find("points nowhere") != std::string::npos);
  CHECK(error_of(R"({"$ref":"#"})").find("reaches itself") != std::string::npos);
  CHECK(error_of(R"({"type":"object","properties":{"a":{}},"required":["b"]})").find("\"b\"") != std::string::npos);
}

}  // namespace kvc::sampling
