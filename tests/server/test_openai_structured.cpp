// kvchat-cli serve's structured outputs driven by the official openai npm client
// (tests/server/openai_structured.mjs): response_format json_schema answers, whole through
// chat.completions.parse and streamed, validate against the schema; a keyword kvchat cannot
// enforce is a 400 naming response_format.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>

#include "server/serve_process.h"
#include "support/json_schema_check.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

const std::filesystem::path k_npm_dir = KVC_TEST_NPM_DIR;

std::string client_missing() {
  if (const std::string v = test::qwen_vocab_missing(); !v.empty()) return v;
  const auto why = k_npm_dir / "openai-missing.txt";
  if (std::filesystem::exists(why)) return "the openai npm client was not fetched: " + test::read_file(why);
  if (!std::filesystem::exists(k_npm_dir / "node_modules" / "openai")) {
    return "the openai npm client is not installed in " + k_npm_dir.string() +
           " (CTest's test_openai_client fixture runs tests/server/fetch-openai-client.sh)";
  }
  return "";
}

// Bounded everywhere, so the random-weight model finishes every answer within max_tokens.
const char* const k_schema = R"({"type":"object","properties":{
  "code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},"name":{"type":"string","maxLength":10},
  "count":{"type":"integer","minimum":0},"sizes":{"type":"array","items":{"enum":["S","M","L"]},"minItems":1,"maxItems":3},
  "discontinued":{"type":["boolean","null"]}},"required":["code","name","count","sizes","discontinued"],
  "additionalProperties":false})";

}  // namespace

TEST_CASE("serve: the openai client gets JSON valid against its response_format schema", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  const std::string model = test::make_chat_model(tmp);
  test::ServeProcess s(model, tmp.file("data"), "", tmp);
  std::string cmd = "timeout 300 node " + test::quoted(std::string(KVC_TEST_SERVER_DIR) + "/openai_structured.mjs");
  for (const std::string& arg :
       {(k_npm_dir / "node_modules").string(), s.base_url(), std::string("chat-qwen"), json::parse(k_schema).dump()}) {
    cmd += ' ' + test::quoted(arg);
  }
  cmd += " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  ::pclose(p);
  INFO("node printed: " << out << "\nserver log: " << s.log());
  const size_t end = out.find_last_not_of('\n');
  REQUIRE(end != std::string::npos);
  const size_t begin = out.rfind('\n', end);
  const json r = json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1, end + 1), nullptr, false);
  REQUIRE(!r.is_discarded());
  REQUIRE(!r.contains("failed"));

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
