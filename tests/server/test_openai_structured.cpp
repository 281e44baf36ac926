// kvchat-cli serve's structured outputs driven by the official openai npm client
// (tests/server/openai_structured.mjs): response_format json_schema answers, whole through
// chat.completions.parse and streamed, validate against the schema; a keyword kvchat cannot
// enforce is a 400 naming response_format.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "server/npm_client.h"
#include "server/serve_process.h"
#include "support/json_schema_check.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

// Bounded everywhere, so the random-weight model finishes every answer within max_tokens.
const char* const k_schema = R"({"type":"object","properties":{
  "code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},"name":{"type":"string","maxLength":10},
  "count":{"type":"integer","minimum":0},"sizes":{"type":"array","items":{"enum":["S","M","L"]},"minItems":1,"maxItems":3},
  "discontinued":{"type":["boolean","null"]}},"required":["code","name","count","sizes","discontinued"],
  "additionalProperties":false})";

}  // namespace

TEST_CASE("serve: the openai client gets JSON valid against its response_format schema", "[app][e2e][server]") {
  if (const std::string why = test::openai_client_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  const std::string model = test::make_chat_model(tmp);
  test::ServeProcess s(model, tmp.file("data"), "", tmp);
  const json r = test::run_node(s, "openai_structured.mjs", test::quoted(json::parse(k_schema).dump()), 300);

  const json schema = json::parse(k_schema);
  REQUIRE(r["parsed"].size() == 5);
  for (const json& a : r["parsed"]) {
    INFO(a.dump());
    CHECK(a["finish_reason"] == "stop");
    CHECK(a["parsed"] == json::parse(a["content"].get<std::string>()));  // the client parsed it
    CHECK(test::schema_violation(a["parsed"], schema) == "");
  }
  INFO("streamed: " << r["streamed"]);
  CHECK(r["stream_finish"] == "stop");
  const json streamed = json::parse(r["streamed"].get<std::string>(), nullptr, false);
  REQUIRE_FALSE(streamed.is_discarded());
  CHECK(test::schema_violation(streamed, schema) == "");
  CHECK(r["refused"]["status"] == 400);
  CHECK(r["refused"]["param"] == "response_format");
  CHECK_THAT(r["refused"]["message"].get<std::string>(), Catch::Contains("format"));
}
