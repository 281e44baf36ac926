// parse_reply and ToolCallStream on the per-family fixtures of tests/data/tool-calls: calls, text beside them,
// malformed calls kept as text, and the same result whether parsed whole or piece by piece.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include "core/chat/tool_calls.h"
#include "core/chat/tool_constraint.h"

using namespace kvc::chat;
using nlohmann::json;

namespace {

json fixture(const std::string& family) {
  std::ifstream in(std::string(KVC_TEST_DATA_DIR) + "/tool-calls/" + family + ".json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

ToolFormat format_of(const std::string& name) {
  for (const ToolFormat f : {ToolFormat::hermes, ToolFormat::llama3, ToolFormat::mistral, ToolFormat::harmony,
                             ToolFormat::deepseek, ToolFormat::gemma}) {
    if (tool_format_name(f) == name) return f;
  }
  FAIL("unknown format " << name);
  return ToolFormat::none;
}

void check_case(ToolFormat f, const json& c) {
  const std::string reply = c["reply"];
  INFO(c["name"].get<std::string>() << ": " << reply);
  const ParsedReply p = parse_reply(reply, f, true, "chatcmpl-test");
  CHECK(p.content == c["content"].get<std::string>());
  if (c.contains("reasoning")) CHECK(p.reasoning == c["reasoning"].get<std::string>());
  REQUIRE(p.tool_calls.size() == c["calls"].size());
  for (size_t i = 0; i < p.tool_calls.size(); ++i) {
    CHECK(p.tool_calls[i].name == c["calls"][i][0].get<std::string>());
    CHECK(p.tool_calls[i].arguments == c["calls"][i][1].get<std::string>());
    CHECK(p.tool_calls[i].id == tool_call_id("chatcmpl-test", i));
  }
  // Streamed in pieces of every size from 1 to 7 bytes: the same content, reasoning and calls.
  for (size_t step = 1; step <= 7; ++step) {
    ToolCallStream s(f, "chatcmpl-test");
    std::string content, reasoning;
    std::vector<ToolCall> calls;
    auto take = [&](ToolCallStream::Delta d) {
      content += d.content;
      reasoning += d.reasoning;
      for (auto& [index, call] : d.calls) {
        CHECK(index == calls.size());
        calls.push_back(call);
      }
    };
    for (size_t at = 0; at < reply.size(); at += step) take(s.feed(std::string_view(reply).substr(at, step)));
    take(s.finish());
    INFO("step " << step);
    CHECK(content == p.content);
    CHECK(reasoning == p.reasoning);
    REQUIRE(calls.size() == p.tool_calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      CHECK(calls[i].id == p.tool_calls[i].id);
      CHECK(calls[i].name == p.tool_calls[i].name);
      CHECK(calls[i].arguments == p.tool_calls[i].arguments);
    }
  }
}

}  // namespace

TEST_CASE("tool calls: each family's recorded replies parse to their calls and text, whole and streamed", "[core]") {
  for (const char* family : {"hermes", "llama3", "mistral", "harmony", "deepseek", "gemma"}) {
    const json doc = fixture(family);
    const ToolFormat f = format_of(doc["format"]);
    SECTION(family) {
      for (const json& c : doc["cases"]) check_case(f, c);
    }
  }
}

TEST_CASE("tool calls: mangled replies never throw, and stream to what they parse to whole", "[core]") {
  std::mt19937 rng(51);
  const std::string noise[] = {"<tool_call>",
                               "</tool_call>",
                               "{",
                               "}",
                               "[",
                               "\"",
                               ";",
                               "<|call|>",
                               "<|channel|>",
                               "```",
                               "[TOOL_CALLS]",
                               "<｜tool▁call▁end｜>",
                               "\n",
                               "<|python_tag|>",
                               "</think>"};
  for (const char* family : {"hermes", "llama3", "mistral", "harmony", "deepseek", "gemma"}) {
    const json doc = fixture(family);
    const ToolFormat f = format_of(doc["format"]);
    for (const json& c : doc["cases"]) {
      const std::string reply = c["reply"];
      for (int n = 0; n < 300; ++n) {
        std::string text = reply.substr(0, std::uniform_int_distribution<size_t>(0, reply.size())(rng));
        const size_t at = std::uniform_int_distribution<size_t>(0, text.size())(rng);
        text.insert(at, noise[std::uniform_int_distribution<size_t>(0, std::size(noise) - 1)(rng)]);
        INFO(family << ": " << text);
        const ParsedReply whole = parse_reply(text, f, true, "s");
        ToolCallStream s(f, "s");
        std::string content, reasoning;
        size_t n_calls = 0;
        const size_t step = std::uniform_int_distribution<size_t>(1, 9)(rng);
        auto take = [&](const ToolCallStream::Delta& d) {
          content += d.content;
          reasoning += d.reasoning;
          n_calls += d.calls.size();
        };
        for (size_t p = 0; p < text.size(); p += step) take(s.feed(std::string_view(text).substr(p, step)));
        take(s.finish());
        CHECK(content == whole.content);
        CHECK(reasoning == whole.reasoning);
        CHECK(n_calls == whole.tool_calls.size());
      }
    }
  }
}

TEST_CASE("tool calls: plain text streams at once, a possible call start is held", "[core]") {
  ToolCallStream s(ToolFormat::hermes, "x");
  CHECK(s.feed("Hello").content == "Hello");
  CHECK(s.feed(" world <tool").content == " world");  // the space waits with the marker's possible start
  CHECK(s.feed("bar> ok").content == " <toolbar> ok");
  const auto call = s.feed("<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  CHECK(call.content.empty());
  CHECK(call.calls.empty());  // not closed yet
  const auto closed = s.feed("</tool_call>");
  REQUIRE(closed.calls.size() == 1);
  CHECK(closed.calls[0].first == 0);
  CHECK(closed.calls[0].second.name == "f");
  CHECK(closed.calls[0].second.arguments == "{}");
  CHECK(s.finish().content.empty());
  CHECK(s.parsed().content == "Hello world <toolbar> ok");
}

TEST_CASE("tool calls: ids are call_ and 24 hex digits, stable per seed and index", "[core]") {
  const std::string a = tool_call_id("chatcmpl-1", 0);
  CHECK(a.size() == 5 + 24);
  CHECK(a.rfind("call_", 0) == 0);
  CHECK(a == tool_call_id("chatcmpl-1", 0));
  CHECK(a != tool_call_id("chatcmpl-1", 1));
  CHECK(a != tool_call_id("chatcmpl-2", 0));
}

TEST_CASE("tool calls: no format reads nothing as a call", "[core]") {
  const std::string reply = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const ParsedReply p = parse_reply(reply, ToolFormat::none, true, "x");
  CHECK(p.tool_calls.empty());
  CHECK(p.content == reply);
}

TEST_CASE("tool calls: each template family has its format", "[core]") {
  using F = ChatTemplate::Family;
  CHECK(tool_format_of(ChatTemplate::detect("<|im_start|>{% if tools %}<tool_call>{% endif %}").family()) ==
        ToolFormat::hermes);
  CHECK(tool_format_of(F::llama3) == ToolFormat::llama3);
  CHECK(tool_format_of(F::mistral) == ToolFormat::mistral);
  CHECK(tool_format_of(F::harmony) == ToolFormat::harmony);
  CHECK(tool_format_of(ChatTemplate::detect("<｜User｜><｜Assistant｜><｜tool▁calls▁begin｜>").family()) ==
        ToolFormat::deepseek);
  CHECK(tool_format_of(F::gemma) == ToolFormat::gemma);
  CHECK(tool_format_of(F::zephyr) == ToolFormat::none);
}

namespace {

// A JSON text that a constrained sampler could write for `schema`: the call object around
// `args`, an array of one such object, or the arguments themselves.
json sample_for(const json& schema, const json& args) {
  if (schema.value("type", "") == "array") {
    const json& items = schema["items"].contains("anyOf") ? schema["items"]["anyOf"][0] : schema["items"];
    return json::array({sample_for(items, args)});
  }
  if (schema.contains("properties") && schema["properties"].contains("name") &&
      schema["properties"]["name"].contains("const")) {
    json call{{"name", schema["properties"]["name"]["const"]}};
    for (const char* key : {"arguments", "parameters"}) {
      if (schema["properties"].contains(key)) call[key] = args;
    }
    return call;
  }
  return args;
}

}  // namespace

TEST_CASE("tool constraints: each format's forced call parses back as that call", "[core]") {
  const json tools =
      json::array({json{{"type", "function"},
                        {"function",
                         {{"name", "get_weather"},
                          {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
                   json{{"type", "function"}, {"function", {{"name", "get_time"}}}}});
  const json args{{"city", "Paris"}};
  for (const ToolFormat f : {ToolFormat::hermes, ToolFormat::llama3, ToolFormat::mistral, ToolFormat::harmony,
                             ToolFormat::deepseek, ToolFormat::gemma}) {
    INFO(tool_format_name(f));
    auto named = tool_constraints(f, tools.dump(), std::string("get_weather"), true);
    REQUIRE(named.ok());
    REQUIRE(named->alternatives.size() == 1);
    const ToolConstraint& c = named->alternatives[0];
    const json schema = json::parse(c.schema_json);
    const std::string out = c.prefix + sample_for(schema, args).dump() + c.suffix;
    INFO(out);
    const ParsedReply p = parse_reply(out, f, true, "x");
    REQUIRE(p.tool_calls.size() == 1);
    CHECK(p.tool_calls[0].name == "get_weather");
    CHECK(json::parse(p.tool_calls[0].arguments) == args);
    CHECK(p.content.empty());
    // "required": any of the tools (mistral: one array whose items may be any of them).
    auto any = tool_constraints(f, tools.dump(), std::nullopt, false);
    REQUIRE(any.ok());
    CHECK(any->alternatives.size() == (f == ToolFormat::mistral ? 1u : 2u));
  }
  CHECK_FALSE(tool_constraints(ToolFormat::hermes, tools.dump(), std::string("nope"), false).ok());
  CHECK_FALSE(tool_constraints(ToolFormat::none, tools.dump(), std::nullopt, false).ok());
  CHECK_FALSE(tool_constraints(ToolFormat::hermes, "{}", std::nullopt, false).ok());
}
